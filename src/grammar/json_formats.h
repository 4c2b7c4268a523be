// JSON Schema `format` values as regexes over the decoded string (whole-string match; a value is
// valid when it matches every regex returned). Each is exact or stricter than its RFC (never
// looser): e.g. `time` refuses leap seconds, `email` refuses comments and unquoted non-ASCII,
// `hostname` refuses A-labels (punycode, whose validity needs IDNA tables). Unknown formats are an
// error, since a user who names one expects it enforced.
#pragma once

#include "grammar/regex.h"
#include "util/result.h"

#include <string_view>
#include <vector>

namespace deepinfer::grammar {

Result<std::vector<Regex>> format_regexes(std::string_view format);

}  // namespace deepinfer::grammar
