#include "text/utf8.h"

#include <cstdint>

namespace deepinfer::text {

Utf8Step utf8_step(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return {1, true, false};
  std::size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (the others are 80..BF)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {1, false, false};
  }
  for (std::size_t j = 1; j <= need; ++j) {
    if (i + j >= s.size()) return {j, false, true};
    const auto b = static_cast<uint8_t>(s[i + j]);
    if (b < (j == 1 ? lo : 0x80) || b > (j == 1 ? hi : 0xBF)) return {j, false, false};
  }
  return {need + 1, true, false};
}

std::size_t find_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Step st = utf8_step(s, i);
    if (!st.ok) return i;
    i += st.len;
  }
  return std::string_view::npos;
}

char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const std::size_t len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  char32_t cp = b0 & (0x7F >> len);
  for (std::size_t j = 1; j < len; ++j) cp = (cp << 6) | (static_cast<uint8_t>(s[i + j]) & 0x3F);
  i += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

void append_utf8_lossy(std::string& out, std::string_view bytes) {
  std::size_t i = 0, run = 0;  // [run, i) is well-formed and not yet copied
  while (i < bytes.size()) {
    const Utf8Step st = utf8_step(bytes, i);
    if (st.ok) {
      i += st.len;
      continue;
    }
    out.append(bytes.substr(run, i - run));
    out += "\xEF\xBF\xBD";
    i += st.len;
    run = i;
  }
  out.append(bytes.substr(run));
}

std::size_t emittable_utf8_prefix(std::string_view bytes) {
  // Only the last (at most 3) bytes can start an incomplete sequence.
  const std::size_t from = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (std::size_t i = from; i < bytes.size(); ++i) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b < 0x80 || b >= 0xC0) {  // a possible lead byte
      const Utf8Step st = utf8_step(bytes, i);
      if (st.truncated) return i;
    }
  }
  return bytes.size();
}

}  // namespace deepinfer::text
