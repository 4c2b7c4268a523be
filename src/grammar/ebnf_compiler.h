// GBNF-compatible EBNF (llama.cpp's dialect): `name ::= alternatives`, "strings", [classes],
// [^negated], `.`, (groups), `* + ? {m} {m,} {m,n}`, `#` comments, entry rule `root`.
// A rule may span lines; it ends where the next `name ::=` begins. Strings and classes are
// Unicode code points (escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH).
#pragma once

#include "grammar/grammar.h"
#include "util/result.h"

#include <string_view>

namespace deepinfer::grammar {

Result<Grammar> compile_ebnf(std::string_view source);

}  // namespace deepinfer::grammar
