// DFAs for JSON string bodies (between the quotes) that every schema compile would otherwise
// rebuild: one encoded character, and the contents allowed by each `format`. Built once per
// process, thread-safe.
#pragma once

#include "grammar/dfa.h"
#include "util/result.h"

#include <memory>
#include <string_view>

namespace deepinfer::grammar {

// Exactly one encoded code point (raw or escaped). Prefix-free, so Dfa::repeat applies.
const Dfa& json_char_dfa();
// Any string body: json_char_dfa() repeated.
const Dfa& json_body_dfa();
// The encoded string bodies whose value matches the patterns of string format `format` (its length
// bound is not included: see FormatRule).
Result<std::shared_ptr<const Dfa>> json_format_dfa(std::string_view format);

}  // namespace deepinfer::grammar
