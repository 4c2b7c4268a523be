// JSON Schema `format` values. String formats are regexes over the decoded string (whole-string
// match; a value is valid when it matches every regex) plus a length bound; each is exact or
// stricter than its RFC (never looser): e.g. `time` refuses leap seconds, `email` refuses comments
// and unquoted non-ASCII, `hostname` refuses A-labels (punycode, whose validity needs IDNA tables).
// OpenAPI's numeric formats (int32, int64, float, double) are the ranges they name, and `byte` is
// base64. `regex` takes any string (its syntax nests, so no automaton checks it exactly). A format
// the specifications define but that is not enforced here (idn-email, idn-hostname, iri,
// iri-reference, uri-template) is an error: a user who names one expects it enforced. Any other
// format is an annotation (JSON Schema 2020-12's default).
#pragma once

#include "grammar/decimal.h"
#include "grammar/regex.h"
#include "util/result.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace deepinfer::grammar {

struct FormatRule {
  enum class Kind { kString, kNumber, kAnnotation } kind = Kind::kAnnotation;
  std::vector<Regex> patterns;       // kString
  uint64_t max_length = UINT64_MAX;  // kString, in code points
  std::optional<Decimal> minimum, maximum;  // kNumber (inclusive)
  bool integer = false;                     // kNumber: integers only
};

Result<FormatRule> format_rule(std::string_view format);

}  // namespace deepinfer::grammar
