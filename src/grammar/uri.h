// RFC 3986 reference resolution, enough for JSON Schema $id / $ref.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer::grammar {

std::string resolve_uri(std::string_view base, std::string_view reference);
// Splits "a#b" into ("a", "b"); the fragment is empty when absent.
std::pair<std::string, std::string> split_fragment(std::string_view uri);
std::string percent_decode(std::string_view s);

}  // namespace deepinfer::grammar
