// Whether a matcher accepts some serialization of a JSON value: compact (no whitespace) or pretty
// (two-space indent, like json.dumps(indent=2)), trying every object key order the grammar
// admits (the grammar fixes an order; the instance's own order is irrelevant to validity).
#pragma once

#include "grammar/matcher.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace deepinfer::grammar::testing {

enum class Layout { kCompact, kPretty };

// The matcher must be fresh; it is left as it was.
bool accepts_instance(Matcher& matcher, const nlohmann::ordered_json& value, Layout layout);
// The serialization accepts_instance found (the first key order the grammar admits), if any.
std::optional<std::string> accepted_text(Matcher& matcher, const nlohmann::ordered_json& value, Layout layout);

}  // namespace deepinfer::grammar::testing
