// Bounded renderings of untrusted values for error messages. A config.json or tokenizer.json value
// may be megabytes long or nested a million deep: messages show at most `max_chars` of it, and the
// rendering uses no recursion (nlohmann's dump() recurses once per level).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace deepinfer {

// Compact JSON text of `value`, cut after about `max_chars` characters (then ending in "...").
std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars = 64);

// `text` cut at a character boundary at most `max_chars` bytes in (then ending in "...").
std::string text_excerpt(std::string_view text, std::size_t max_chars = 64);

}  // namespace deepinfer
