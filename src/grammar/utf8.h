// UTF-8 helpers shared by the regex front ends and the automata.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::grammar {

// Decodes one code point from the start of `s`; returns the bytes used, or 0 when `s` does not
// start with a well-formed UTF-8 sequence (overlong forms and surrogates are rejected).
size_t utf8_decode(std::string_view s, uint32_t* cp);
void utf8_append(std::string& out, uint32_t cp);

// One byte range per position: [lo[i], hi[i]] for i < length.
struct Utf8Sequence {
  uint8_t length = 0;
  uint8_t lo[4] = {};
  uint8_t hi[4] = {};
};

// The byte sequences whose union is exactly the UTF-8 encodings of [lo, hi] (surrogates excluded).
std::vector<Utf8Sequence> utf8_sequences(uint32_t lo, uint32_t hi);

}  // namespace deepinfer::grammar
