#include "text/byte_level.h"

#include "text/utf8.h"

#include <array>

namespace deepinfer::text {
namespace {

// Printable Latin-1 bytes stand for themselves; the other 68 bytes are moved to U+0100.. in order.
struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int, 324> to_byte{};  // indexed by code point; every mapped char is < 0x144

  Tables() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(unsigned char b) { return tables().to_char[b]; }

int char_to_byte(char32_t c) { return c < tables().to_byte.size() ? tables().to_byte[c] : -1; }

std::string token_to_bytes(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (std::size_t i = 0; i < token.size();) {
    const int b = char_to_byte(next_code_point(token, i));
    if (b < 0) return std::string(token);
    out += static_cast<char>(b);
  }
  return out;
}

std::string bytes_to_token(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, byte_to_char(b));
  return out;
}

}  // namespace deepinfer::text
