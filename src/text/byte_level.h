// The byte-level alphabet of GPT-2-style BPE: every byte is shown as one printable character, so
// a vocabulary of strings can cover arbitrary bytes. Used to load vocabularies (token string →
// bytes) and by the ByteLevel decoder.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer::text {

// The character that stands for byte `b`.
char32_t byte_to_char(unsigned char b);

// The byte that character `c` stands for, or -1 if `c` is not in the alphabet.
int char_to_byte(char32_t c);

// The bytes a token string decodes to under the ByteLevel decoder: each character mapped back to
// its byte, or, if any character is outside the alphabet (added tokens such as "<｜User｜>"),
// the token's own UTF-8 unchanged.
std::string token_to_bytes(std::string_view token);

// The token string for raw bytes (each byte mapped to its character).
std::string bytes_to_token(std::string_view bytes);

}  // namespace deepinfer::text
