// Log-probabilities of one row: a token's own logprob and rank plus the top-N entries.
#pragma once

#include "util/result.h"

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct Logprobs {
  int32_t token = 0;              // the sampled token (or the actual next prompt token)
  float logprob = 0.0f;           // its log-probability
  int32_t rank = 0;               // its 1-based place in `top`'s order over the whole vocabulary
  std::vector<TokenLogprob> top;  // the min(top_n, vocab) most likely, best first, ties by lower id
};

// log_softmax of `logits` (summed in double, in token id order), evaluated for `token` and the
// top_n most likely tokens. -inf logits give -inf logprobs. Used for generated tokens (raw or
// processed logits, see LogprobsMode) and for prompt positions (the row that predicts the next
// prompt token). Fails for a token outside the row, a negative top_n, NaN or +inf logits, or a
// row that is -inf everywhere.
Result<Logprobs> compute_logprobs(std::span<const float> logits, int32_t token, int32_t top_n);

}  // namespace deepinfer
