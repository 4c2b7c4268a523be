// JSON Schema (draft 2020-12) to grammar. Object properties are generated in schema order
// (declared properties first, in `properties` order, then additional ones); whitespace follows
// the options. Every accepted text is a valid instance; a keyword that cannot be enforced is a
// compile error naming it.
#pragma once

#include "grammar/grammar.h"
#include "grammar/grammar_options.h"
#include "util/result.h"

#include <string_view>

namespace deepinfer::grammar {

Result<Grammar> compile_json_schema(std::string_view schema, const GrammarOptions& options);

}  // namespace deepinfer::grammar
