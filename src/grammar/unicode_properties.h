// Unicode properties for regex \p{...} / \P{...}: General_Category values by short name or alias
// (L, Letter, Lu, Uppercase_Letter, Nd, digit, ...; also as gc=X or General_Category=X) and the
// binary properties Any, ASCII and Assigned. Data from utf8proc (its Unicode version).
#pragma once

#include "grammar/codepoint_set.h"

#include <optional>
#include <string_view>

namespace deepinfer::grammar {

std::optional<CodepointSet> unicode_property(std::string_view name);

}  // namespace deepinfer::grammar
