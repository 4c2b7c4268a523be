// Exact decimal numbers for JSON Schema bounds (minimum, maximum, ...): comparing and lowering
// them must not go through binary floating point.
#pragma once

#include "util/result.h"

#include <string>
#include <string_view>

namespace deepinfer::grammar {

struct Decimal {
  bool negative = false;    // never set for zero
  std::string integer;      // digits, no leading zeros ("0" for zero integer part)
  std::string fraction;     // digits after the point, no trailing zeros

  // Parses JSON number syntax (exponents allowed) exactly.
  static Result<Decimal> parse(std::string_view text);

  bool is_integer() const { return fraction.empty(); }
  bool is_zero() const { return integer == "0" && fraction.empty(); }
  Decimal abs() const;
  Decimal negated() const;
  Decimal floor() const;
  Decimal ceil() const;
};

// -1, 0, 1 as a <, ==, > b.
int compare(const Decimal& a, const Decimal& b);

// Non-negative integer digit strings.
std::string digits_increment(const std::string& digits);
std::string digits_decrement(const std::string& digits);  // digits > 0

}  // namespace deepinfer::grammar
