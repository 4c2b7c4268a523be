// Regular pieces of JSON text. String contents are described twice: "decoded" regexes speak of
// the string value (what JSON Schema constrains), json_encode() turns one into the set of JSON
// string bodies (between the quotes) that decode to a matching value. A code point is written raw
// (UTF-8; not for '"', '\\' and control characters), as \" \\ \/ for those characters, as the
// short escape of a control character that has one, or as \uXXXX (a surrogate pair above the
// BMP), hex digits in either case: every spelling JSON allows. Lone surrogates are refused.
#pragma once

#include "grammar/grammar_options.h"
#include "grammar/regex.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace deepinfer::grammar {

using Json = nlohmann::ordered_json;

Regex json_encode(const Regex& decoded);
// Any one code point, encoded.
Regex json_string_char();
// A string value with its quotes, in every spelling.
Regex json_string_literal(std::string_view utf8);
// The canonical serialization of a string value, quotes included (controls as short escapes or
// \u00xx, '"' and '\' escaped, everything else raw).
std::string json_quote(std::string_view utf8);
// Whitespace allowed between two JSON tokens.
Regex json_whitespace(const GrammarOptions& options);
// Unbounded JSON numbers: with fraction and exponent, or integers only.
Regex json_number(bool integers_only);
// The texts of one JSON value with `ws` between its tokens (object keys in the given order;
// numbers also with trailing fractional zeros: 1 as 1, 1.0, 1.00 ...).
Regex json_value_regex(const Json& value, const Regex& ws);

}  // namespace deepinfer::grammar
