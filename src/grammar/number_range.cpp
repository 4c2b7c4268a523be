#include "grammar/number_range.h"

#include "grammar/regex.h"

#include <string>
#include <vector>

namespace deepinfer::grammar {
namespace {

Regex digit(char lo, char hi) {
  if (lo > hi) return re_nothing();
  return re_chars(CodepointSet::range(static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)));
}
Regex any_digits(uint32_t min, uint32_t max = kUnbounded) { return re_repeat(digit('0', '9'), min, max); }
Regex lit(const std::string& s) { return re_literal(s); }
Regex point() { return re_char('.'); }

// Non-negative integer texts ("0" or no leading zero).
Regex int_any() { return re_alt({lit("0"), re_seq({digit('1', '9'), any_digits(0)})}); }

Regex same_length_ge(const std::string& d) {
  std::vector<Regex> alts{lit(d)};
  size_t n = d.size();
  for (size_t i = 0; i < n; ++i) {
    alts.push_back(re_seq({lit(d.substr(0, i)), digit(static_cast<char>(d[i] + 1), '9'), any_digits(static_cast<uint32_t>(n - i - 1), static_cast<uint32_t>(n - i - 1))}));
  }
  return re_alt(std::move(alts));
}

Regex same_length_le(const std::string& d) {
  std::vector<Regex> alts{lit(d)};
  size_t n = d.size();
  for (size_t i = 0; i < n; ++i) {
    char lo = (i == 0 && n > 1) ? '1' : '0';
    alts.push_back(re_seq({lit(d.substr(0, i)), digit(lo, static_cast<char>(d[i] - 1)), any_digits(static_cast<uint32_t>(n - i - 1), static_cast<uint32_t>(n - i - 1))}));
  }
  return re_alt(std::move(alts));
}

Regex int_ge(const std::string& d) {
  if (d == "0") return int_any();
  return re_alt({re_seq({digit('1', '9'), any_digits(static_cast<uint32_t>(d.size()))}), same_length_ge(d)});
}

Regex int_le(const std::string& d) {
  std::vector<Regex> alts{same_length_le(d)};
  if (d.size() >= 2) {
    alts.push_back(lit("0"));
    alts.push_back(re_seq({digit('1', '9'), any_digits(0, static_cast<uint32_t>(d.size() - 2))}));
  }
  return re_alt(std::move(alts));
}

Regex int_gt(const std::string& d) { return int_ge(digits_increment(d)); }
Regex int_lt(const std::string& d) { return d == "0" ? re_nothing() : int_le(digits_decrement(d)); }

// Fraction digit strings f (at least one digit) compared as 0.f against 0.F.
Regex frac_ge(const std::string& f) {
  if (f.empty()) return any_digits(1);
  std::vector<Regex> alts{re_seq({lit(f), any_digits(0)})};
  for (size_t i = 0; i < f.size(); ++i) alts.push_back(re_seq({lit(f.substr(0, i)), digit(static_cast<char>(f[i] + 1), '9'), any_digits(0)}));
  return re_alt(std::move(alts));
}

Regex frac_gt(const std::string& f) {
  Regex nonzero_tail = re_seq({re_star(re_char('0')), digit('1', '9'), any_digits(0)});
  std::vector<Regex> alts{re_seq({lit(f), nonzero_tail})};
  for (size_t i = 0; i < f.size(); ++i) alts.push_back(re_seq({lit(f.substr(0, i)), digit(static_cast<char>(f[i] + 1), '9'), any_digits(0)}));
  return re_alt(std::move(alts));
}

Regex frac_le(const std::string& f, bool strict) {
  std::vector<Regex> alts;
  if (f.empty()) return strict ? re_nothing() : re_plus(re_char('0'));
  for (size_t i = 0; i < f.size(); ++i) alts.push_back(re_seq({lit(f.substr(0, i)), digit('0', static_cast<char>(f[i] - 1)), any_digits(0)}));
  size_t last = strict ? f.size() - 1 : f.size();
  for (size_t i = 1; i <= last; ++i) alts.push_back(re_seq({lit(f.substr(0, i)), re_star(re_char('0'))}));
  return re_alt(std::move(alts));
}

Regex opt_fraction() { return re_opt(re_seq({point(), any_digits(1)})); }

// Non-negative decimal texts x with x >= a (x > a when strict).
Regex dec_ge(const Decimal& a, bool strict) {
  Regex above = re_seq({int_gt(a.integer), opt_fraction()});
  Regex same;
  if (strict) {
    same = re_seq({lit(a.integer), point(), frac_gt(a.fraction)});
  } else if (a.fraction.empty()) {
    same = re_seq({lit(a.integer), opt_fraction()});
  } else {
    same = re_seq({lit(a.integer), point(), frac_ge(a.fraction)});
  }
  return re_alt({above, same});
}

// Non-negative decimal texts x with x <= b (x < b when strict).
Regex dec_le(const Decimal& b, bool strict) {
  Regex below = re_seq({int_lt(b.integer), opt_fraction()});
  std::vector<Regex> same{re_seq({lit(b.integer), point(), frac_le(b.fraction, strict)})};
  if (!strict || !b.fraction.empty()) same.push_back(lit(b.integer));
  return re_alt({below, re_alt(std::move(same))});
}

Regex dec_any() { return re_seq({int_any(), opt_fraction()}); }

Result<Dfa> both(const Regex& a, const Regex& b) {
  DI_TRY(da, Dfa::from_regex(a));
  DI_TRY(db, Dfa::from_regex(b));
  return Dfa::intersect(da, db);
}

// `sign` followed by a magnitude m (non-negative number text) with lo <= m <= hi, each side optional.
Result<Dfa> magnitude_between(const Regex& sign, const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi,
                              bool integers) {
  Regex ge, le;
  if (integers) {
    ge = lo ? int_ge(lo->value.integer) : int_any();
    le = hi ? int_le(hi->value.integer) : int_any();
  } else {
    ge = lo ? dec_ge(lo->value, lo->exclusive) : dec_any();
    le = hi ? dec_le(hi->value, hi->exclusive) : dec_any();
  }
  return both(re_seq({sign, ge}), re_seq({sign, le}));
}

Decimal plus_one(const Decimal& d) {  // integers only
  if (!d.negative) return Decimal{false, digits_increment(d.integer), ""};
  Decimal m{false, digits_decrement(d.integer), ""};
  return m.is_zero() ? m : m.negated();
}

Decimal minus_one(const Decimal& d) { return plus_one(d.negated()).negated(); }

}  // namespace

Result<Dfa> bounded_number_dfa(const std::optional<NumberBound>& lower, const std::optional<NumberBound>& upper,
                               bool integers_only) {
  std::optional<NumberBound> lo = lower, hi = upper;
  if (integers_only) {  // make both bounds inclusive integers
    if (lo) lo = NumberBound{lo->exclusive && lo->value.is_integer() ? plus_one(lo->value) : lo->value.ceil(), false};
    if (hi) hi = NumberBound{hi->exclusive && hi->value.is_integer() ? minus_one(hi->value) : hi->value.floor(), false};
  }
  Decimal zero;
  zero.integer = "0";
  // Non-negative side: values >= 0 within the bounds.
  std::optional<Dfa> pos;
  bool pos_possible = !hi || compare(hi->value, zero) > 0 || (hi->value.is_zero() && !hi->exclusive);
  if (pos_possible) {
    std::optional<NumberBound> plo;
    if (lo && (compare(lo->value, zero) > 0 || (lo->value.is_zero() && lo->exclusive))) plo = lo;
    DI_TRY(p, magnitude_between(re_empty(), plo, hi, integers_only));
    pos = std::move(p);
  }
  // Negative side: "-" m with m > 0 (no negative zero) and -m within the bounds.
  if (lo && compare(lo->value, zero) >= 0) return pos ? std::move(*pos) : Dfa::from_regex(re_nothing());
  std::optional<NumberBound> mlo, mhi;
  if (lo) mhi = NumberBound{lo->value.abs(), lo->exclusive};
  if (hi && compare(hi->value, zero) < 0) {
    mlo = NumberBound{hi->value.abs(), hi->exclusive};
  } else if (integers_only) {
    mlo = NumberBound{Decimal{false, "1", ""}, false};
  } else {
    mlo = NumberBound{zero, true};
  }
  DI_TRY(neg, magnitude_between(re_char('-'), mlo, mhi, integers_only));
  if (!pos) return std::move(neg);
  return Dfa::unite(*pos, neg);
}

namespace {

// step = p / 10^q with p a positive integer (no trailing zeros in the fraction, so q is minimal).
struct Step {
  uint64_t p = 0;
  uint32_t q = 0;
};

std::optional<Step> split_step(const Decimal& step) {
  std::string digits = step.integer + step.fraction;
  size_t nz = digits.find_first_not_of('0');
  if (step.negative || nz == std::string::npos || digits.size() - nz > 18) return std::nullopt;
  return Step{std::stoull(digits.substr(nz)), static_cast<uint32_t>(step.fraction.size())};
}

}  // namespace

// x is a multiple of p/10^q iff x·10^q is an integer divisible by p. The automaton reads the
// digits keeping (digits so far) mod p: integer digits, then up to q fraction digits, then only
// zeros; it accepts where the remainder, scaled to q fraction digits, is 0 mod p.
Result<Dfa> multiple_of_dfa(const Decimal& step) {
  auto s = split_step(step);
  if (!s) return make_error(Code::kGrammar, "multipleOf {} is not supported", step.integer + "." + step.fraction);
  const uint64_t p = s->p;
  const uint32_t q = s->q;
  if (p * (q + 3) + 4 > Dfa::kDefaultMaxStates) return make_error(Code::kGrammar, "multipleOf with too many digits");
  std::vector<uint64_t> pow10(q + 1, 1 % p);
  for (uint32_t j = 1; j <= q; ++j) pow10[j] = pow10[j - 1] * 10 % p;
  // States: 1 start, 2 after '-', 3 integer part "0", then blocks of p remainders: integer
  // digits, after '.', after k = 1..q fraction digits, and the zeros past q.
  const uint32_t kStart = 1, kMinus = 2, kZero = 3;
  auto integer = [&](uint64_t r) { return static_cast<uint32_t>(4 + r); };
  auto dot = [&](uint64_t r) { return static_cast<uint32_t>(4 + p + r); };
  auto frac = [&](uint64_t r, uint32_t k) { return static_cast<uint32_t>(4 + 2 * p + (k - 1) * p + r); };
  auto tail = [&](uint64_t r) { return static_cast<uint32_t>(4 + 2 * p + q * p + r); };
  uint32_t n = static_cast<uint32_t>(4 + p * (q + 3));
  auto decode = [&](uint32_t st, uint64_t* r, uint32_t* k) {  // block kind: 0 int, 1 dot, 2 frac, 3 tail
    uint64_t x = st - 4;
    if (x < p) {
      *r = x;
      return 0;
    }
    x -= p;
    if (x < p) {
      *r = x;
      return 1;
    }
    x -= p;
    if (x < static_cast<uint64_t>(q) * p) {
      *k = static_cast<uint32_t>(x / p) + 1;
      *r = x % p;
      return 2;
    }
    *r = x - static_cast<uint64_t>(q) * p;
    return 3;
  };
  auto accepting = [&](uint32_t st) {
    if (st == kZero) return true;
    if (st < 4) return false;
    uint64_t r = 0;
    uint32_t k = 0;
    switch (decode(st, &r, &k)) {
      case 0: return r * pow10[q] % p == 0;
      case 2: return r * pow10[q - k] % p == 0;
      case 3: return r == 0;
      default: return false;
    }
  };
  auto next = [&](uint32_t st, uint8_t c) -> uint32_t {
    bool digit = c >= '0' && c <= '9';
    uint64_t d = digit ? c - '0' : 0;
    if (st == kStart || st == kMinus) {
      if (c == '-' && st == kStart) return kMinus;
      if (c == '0') return kZero;
      return digit ? integer(d % p) : 0;
    }
    if (st == kZero) return c == '.' ? dot(0) : 0;
    uint64_t r = 0;
    uint32_t k = 0;
    switch (decode(st, &r, &k)) {
      case 0:
        if (c == '.') return dot(r);
        return digit ? integer((r * 10 + d) % p) : 0;
      case 1:
        if (!digit) return 0;
        if (q == 0) return c == '0' ? tail(r) : 0;
        return frac((r * 10 + d) % p, 1);
      case 2:
        if (!digit) return 0;
        if (k < q) return frac((r * 10 + d) % p, k + 1);
        return c == '0' ? tail(r) : 0;
      default: return c == '0' ? tail(r) : 0;
    }
  };
  return Dfa::from_function(n, kStart, accepting, next);
}

bool is_multiple_of(const Decimal& value, const Decimal& step) {
  auto s = split_step(step);
  if (!s) return false;
  if (value.fraction.size() > s->q) return false;  // more fraction digits than the step has
  std::string digits = value.integer + value.fraction + std::string(s->q - value.fraction.size(), '0');
  uint64_t r = 0;
  for (char c : digits) r = (r * 10 + static_cast<uint64_t>(c - '0')) % s->p;
  return r == 0;
}

}  // namespace deepinfer::grammar
