// Splitting a fuzz input into parts: the bytes before the first NUL are the main input (a
// tokenizer.json, a grammar), the rest drives what is done with it (text to encode, bytes to feed a
// matcher). Inputs without a NUL are all main input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

namespace deepinfer::fuzz {

inline std::pair<std::string_view, std::string_view> split_input(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return {all, {}};
  return {all.substr(0, nul), all.substr(nul + 1)};
}

}  // namespace deepinfer::fuzz
