#include "grammar/decimal.h"

#include <algorithm>

namespace deepinfer::grammar {
namespace {

void normalize(Decimal& d) {
  size_t nz = d.integer.find_first_not_of('0');
  d.integer = nz == std::string::npos ? "0" : d.integer.substr(nz);
  while (!d.fraction.empty() && d.fraction.back() == '0') d.fraction.pop_back();
  if (d.is_zero()) d.negative = false;
}

int compare_magnitude(const Decimal& a, const Decimal& b) {
  if (a.integer.size() != b.integer.size()) return a.integer.size() < b.integer.size() ? -1 : 1;
  if (int c = a.integer.compare(b.integer); c != 0) return c < 0 ? -1 : 1;
  size_t n = std::max(a.fraction.size(), b.fraction.size());
  for (size_t i = 0; i < n; ++i) {
    char x = i < a.fraction.size() ? a.fraction[i] : '0';
    char y = i < b.fraction.size() ? b.fraction[i] : '0';
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

// Exponents beyond this are refused: the digit strings would be absurdly long.
constexpr long kMaxExponent = 4000;

}  // namespace

Result<Decimal> Decimal::parse(std::string_view text) {
  Decimal d;
  size_t i = 0;
  auto bad = [&]() { return make_error(Code::kGrammar, "invalid number '{}'", text); };
  if (i < text.size() && text[i] == '-') {
    d.negative = true;
    ++i;
  }
  size_t start = i;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == start) return bad();
  std::string digits(text.substr(start, i - start));
  long point = static_cast<long>(digits.size());
  if (i < text.size() && text[i] == '.') {
    ++i;
    size_t fs = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    if (i == fs) return bad();
    digits += text.substr(fs, i - fs);
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) neg = text[i++] == '-';
    size_t es = i;
    long e = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      e = e * 10 + (text[i] - '0');
      if (e > kMaxExponent) return make_error(Code::kGrammar, "number '{}' has an exponent out of range", text);
      ++i;
    }
    if (i == es) return bad();
    point += neg ? -e : e;
  }
  if (i != text.size()) return bad();
  if (point <= 0) {
    d.integer.assign(1, '0');  // (not = "0": GCC 12 reports a false -Wrestrict there)
    d.fraction = std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (static_cast<size_t>(point) >= digits.size()) {
    d.integer = digits + std::string(static_cast<size_t>(point) - digits.size(), '0');
  } else {
    d.integer = digits.substr(0, static_cast<size_t>(point));
    d.fraction = digits.substr(static_cast<size_t>(point));
  }
  normalize(d);
  return d;
}

Decimal Decimal::abs() const {
  Decimal d = *this;
  d.negative = false;
  return d;
}

Decimal Decimal::negated() const {
  Decimal d = *this;
  d.negative = !d.negative;
  normalize(d);
  return d;
}

Decimal Decimal::floor() const {
  Decimal d = *this;
  if (d.fraction.empty()) return d;
  d.fraction.clear();
  if (d.negative) d.integer = digits_increment(d.integer);
  normalize(d);
  return d;
}

Decimal Decimal::ceil() const {
  Decimal d = *this;
  if (d.fraction.empty()) return d;
  d.fraction.clear();
  if (!d.negative) d.integer = digits_increment(d.integer);
  normalize(d);
  return d;
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int m = compare_magnitude(a, b);
  return a.negative ? -m : m;
}

std::string digits_increment(const std::string& digits) {
  std::string s = digits;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '9') {
      ++s[i];
      return s;
    }
    s[i] = '0';
  }
  return "1" + s;
}

std::string digits_decrement(const std::string& digits) {
  std::string s = digits;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '0') {
      --s[i];
      break;
    }
    s[i] = '9';
  }
  size_t nz = s.find_first_not_of('0');
  return nz == std::string::npos ? "0" : s.substr(nz);
}

}  // namespace deepinfer::grammar
