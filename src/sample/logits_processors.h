// Steps 1-5 of the processing order (sampling_params.h): in-place edits of one row of logits that
// run before greedy selection and temperature. Token ids in the parameters must have passed
// validate(params, logits.size()); the row width is the vocabulary size.
#pragma once

#include "sample/sampling_params.h"
#include "sample/sequence_state.h"
#include "util/result.h"

#include <cstdint>
#include <map>
#include <span>

namespace deepinfer {

// Number of uint32 words in a token bitmask over `vocab_size` tokens.
constexpr size_t bitmask_words(size_t vocab_size) { return (vocab_size + 31) / 32; }

// 1. Grammar: token i stays iff bit (i % 32) of word i / 32 is set (LSB first); others get -inf.
// Fails if the mask does not have bitmask_words(logits.size()) words.
Result<void> apply_token_bitmask(std::span<float> logits, std::span<const uint32_t> bitmask);

// 2. Every token not listed gets -inf. An empty list means no restriction.
void apply_allowed_token_ids(std::span<float> logits, std::span<const int32_t> allowed_token_ids);

// 3. logit += bias for each listed token.
void apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& logit_bias);

// 4. While num_generated < min_tokens, stop_token_ids and (unless ignore_eos) the EOS ids get -inf.
void apply_min_tokens(std::span<float> logits, const SamplingParams& params, int32_t num_generated,
                      std::span<const int32_t> eos_token_ids);

// 5. Repetition penalty over prompt and output tokens (positive logits divided, negative ones
// multiplied), then logit -= frequency_penalty * count and logit -= presence_penalty for output
// tokens.
void apply_penalties(std::span<float> logits, const SamplingParams& params,
                     const SequenceSamplingState& state);

}  // namespace deepinfer
