// UTF-8 helpers shared by the tokenizer, the decoders and the streaming detokenizer.
// Ill-formed input is judged by the Unicode "maximal subpart" rule (the one WHATWG and Rust's
// String::from_utf8_lossy use), so our replacement characters fall exactly where HF's do.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace deepinfer::text {

// What sits at one position of a byte string.
struct Utf8Step {
  std::size_t len;  // bytes of the well-formed sequence, or of the maximal ill-formed subpart
  bool ok;          // a complete, well-formed character
  bool truncated;   // ill-formed only because the input ended inside a valid prefix
};

Utf8Step utf8_step(std::string_view s, std::size_t i);

// Byte offset of the first ill-formed sequence, or std::string_view::npos when `s` is valid.
std::size_t find_invalid_utf8(std::string_view s);

// Decodes the character at s[i] (which must be well-formed) and advances i past it.
char32_t next_code_point(std::string_view s, std::size_t& i);

void append_utf8(std::string& out, char32_t cp);

// Appends `bytes`, replacing each maximal ill-formed subpart with U+FFFD.
void append_utf8_lossy(std::string& out, std::string_view bytes);

// Length of the prefix of `bytes` that can be emitted now: all of it, except a trailing sequence
// that is incomplete but may still be completed by later bytes.
std::size_t emittable_utf8_prefix(std::string_view bytes);

}  // namespace deepinfer::text
