// JSON number texts whose value lies within exact decimal bounds (JSON Schema minimum, maximum,
// exclusiveMinimum, exclusiveMaximum), as a DFA. Bounded numbers are written without exponent and
// never as negative zero; every text in the language satisfies the bounds exactly.
#pragma once

#include "grammar/decimal.h"
#include "grammar/dfa.h"
#include "util/result.h"

#include <optional>

namespace deepinfer::grammar {

struct NumberBound {
  Decimal value;
  bool exclusive = false;
};

Result<Dfa> bounded_number_dfa(const std::optional<NumberBound>& lower, const std::optional<NumberBound>& upper,
                               bool integers_only);

// JSON number texts without exponent whose value is an integer multiple of `step` (> 0).
Result<Dfa> multiple_of_dfa(const Decimal& step);
// Whether value is an integer multiple of step (> 0), exactly.
bool is_multiple_of(const Decimal& value, const Decimal& step);

}  // namespace deepinfer::grammar
