// The last step: picking one token, greedily or by one uniform draw.
#pragma once

#include "sample/candidate_set.h"

#include <cstdint>
#include <span>

namespace deepinfer {

// Index of the largest logit, the lowest id among equals; -1 when every logit is -inf.
// Logits must not be NaN.
int32_t greedy_token(std::span<const float> logits);

// Inverse CDF: walks the candidates in token id order and returns the first whose cumulative
// weight exceeds u * total weight. u in [0, 1); candidates non-empty with weights set. A token
// of weight 0 is never chosen while any weight is positive.
int32_t draw_token(std::span<const Candidate> candidates, double u);

}  // namespace deepinfer
