// An integer read from untrusted JSON: nlohmann's get<int>() converts with wrap-around (2^40
// became 0, a valid token id), so values outside int32 are refused here instead.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>

namespace deepinfer {

inline std::optional<int32_t> json_int32(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT32_MAX)) return static_cast<int32_t>(u);
  } else if (v.is_number_integer()) {
    const auto i = v.get<int64_t>();
    if (i >= INT32_MIN && i <= INT32_MAX) return static_cast<int32_t>(i);
  }
  return std::nullopt;
}

}  // namespace deepinfer
