// Parses the ECMAScript regular-expression subset that JSON Schema `pattern` uses (with Unicode
// semantics: the unit is the code point; \p{...} takes General_Category values). Unsupported
// syntax (lookaround, backreferences, word boundaries, script properties) is a kGrammar error
// naming the construct.
#pragma once

#include "grammar/regex.h"
#include "util/result.h"

#include <string_view>

namespace deepinfer::grammar {

Result<Regex> parse_ecmascript_regex(std::string_view pattern);

// Well-known classes, also used by the EBNF and JSON Schema front ends.
CodepointSet class_digit();       // \d
CodepointSet class_word();        // \w
CodepointSet class_space();       // \s
CodepointSet class_dot();         // . (everything but line terminators)

}  // namespace deepinfer::grammar
