#include "grammar/utf8.h"

#include <algorithm>

namespace deepinfer::grammar {
namespace {

constexpr uint32_t kMaxForLength[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

int encoded_length(uint32_t cp) {
  for (int i = 0; i < 4; ++i) {
    if (cp <= kMaxForLength[i]) return i + 1;
  }
  return 0;
}

int encode(uint32_t cp, uint8_t* out) {
  int n = encoded_length(cp);
  switch (n) {
    case 1: out[0] = static_cast<uint8_t>(cp); break;
    case 2:
      out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    case 3:
      out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    case 4:
      out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    default: break;
  }
  return n;
}

// Splits [lo, hi] (same encoded length, no surrogates) until each piece is a product of byte ranges.
void split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  int n = encoded_length(lo);
  if (n != encoded_length(hi)) {
    uint32_t mid = kMaxForLength[n - 1];
    split(lo, mid, out);
    split(mid + 1, hi, out);
    return;
  }
  if (n == 1) {
    Utf8Sequence s;
    s.length = 1;
    s.lo[0] = static_cast<uint8_t>(lo);
    s.hi[0] = static_cast<uint8_t>(hi);
    out.push_back(s);
    return;
  }
  // Each continuation byte holds 6 bits: a range is a clean product when, for some suffix of
  // k continuation bytes, lo has all-zero and hi all-one bits there and the prefixes match.
  for (int i = 1; i < n; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  Utf8Sequence s;
  s.length = static_cast<uint8_t>(n);
  for (int i = 0; i < n; ++i) {
    s.lo[i] = a[i];
    s.hi[i] = b[i];
  }
  out.push_back(s);
}

}  // namespace

size_t utf8_decode(std::string_view s, uint32_t* cp) {
  if (s.empty()) return 0;
  auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t n;
  uint32_t v;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    v = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    v = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    v = b0 & 0x07;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    auto b = static_cast<uint8_t>(s[i]);
    if ((b & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b & 0x3F);
  }
  if (encoded_length(v) != static_cast<int>(n) || (v >= 0xD800 && v <= 0xDFFF) || v > 0x10FFFF) return 0;
  *cp = v;
  return n;
}

void utf8_append(std::string& out, uint32_t cp) {
  uint8_t buf[4];
  int n = encode(cp, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

std::vector<Utf8Sequence> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<Utf8Sequence> out;
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo > hi) return out;
  if (lo < 0xD800 && hi > 0xDFFF) {
    split(lo, 0xD7FF, out);
    split(0xE000, hi, out);
  } else if (lo >= 0xD800 && hi <= 0xDFFF) {
    return out;
  } else if (lo >= 0xD800 && lo <= 0xDFFF) {
    split(0xE000, hi, out);
  } else if (hi >= 0xD800 && hi <= 0xDFFF) {
    split(lo, 0xD7FF, out);
  } else {
    split(lo, hi, out);
  }
  return out;
}

}  // namespace deepinfer::grammar
