// Random JSON Schemas built from the keywords the compiler supports (test helper).
#pragma once

#include <nlohmann/json.hpp>

#include <random>

namespace deepinfer::grammar::testing {

nlohmann::ordered_json random_schema(std::mt19937_64& rng);

}  // namespace deepinfer::grammar::testing
