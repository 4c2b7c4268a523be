// Generates output under a grammar by sampling allowed tokens with random weights (test and
// benchmark helper: stands in for a model's logits).
#pragma once

#include "grammar/matcher.h"

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace deepinfer::grammar::testing {

struct GenerationResult {
  std::string text;
  std::vector<int32_t> tokens;
  bool terminated = false;  // ended with EOS (else hit max_tokens)
  std::vector<double> mask_us;  // time of each fill_mask call
};

// Each step: fill the mask, draw a token from the allowed ones with random weights, advance.
// EOS gets extra weight as the output grows so that generations end. `on_mask` (optional) sees
// every mask and the matcher state right after fill_mask.
GenerationResult generate(Matcher& matcher, std::mt19937_64& rng, size_t max_tokens,
                          const std::function<void(const uint32_t*)>& on_mask = nullptr);

}  // namespace deepinfer::grammar::testing
