// JSON Schema `format` values as regexes over the decoded string (whole-string match). Each is
// exact or stricter than its RFC (never looser): e.g. `time` refuses leap seconds, `email` refuses
// comments and unquoted non-ASCII. Unknown formats are an error, since a user who names one
// expects it enforced.
#pragma once

#include "grammar/regex.h"
#include "util/result.h"

#include <string_view>

namespace deepinfer::grammar {

Result<Regex> format_regex(std::string_view format);

}  // namespace deepinfer::grammar
