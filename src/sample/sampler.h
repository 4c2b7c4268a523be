// Sampling one row of logits: the CPU reference of the processing order in sampling_params.h.
// The contract (parameters, state, SampleKey and its uniform draw, inverse CDF in token id order)
// is what a device implementation must reproduce; this file is only the CPU math.
//
// Determinism: the token is a pure function of (logits row, params, state, grammar mask, key).
// Nothing depends on other rows, batch size, thread or call order; every sum has one fixed order in
// double precision (candidate_set.h, row_math.h), so one build reproduces a token bit for bit. (The
// whole-row passes use their own exp; a top_k list's few weights use libm's, which another libm may
// round differently in the last bit.) Rows may be sampled concurrently from different threads.
//
// Cost on a 129k vocabulary (tools/bench/sampler_bench, one core): greedy ~75 us, temperature with top_p
// on a trained model's row ~350 us; the passes over the row are vectorized.
#pragma once

#include "sample/logprobs.h"
#include "sample/sampling_params.h"
#include "sample/sampling_rng.h"
#include "sample/sequence_state.h"
#include "util/result.h"

#include <cstdint>
#include <optional>
#include <span>

namespace deepinfer {

struct SampleResult {
  int32_t token = 0;
  std::optional<Logprobs> logprobs;  // set when params.logprobs is; source: params.logprobs_mode
};

// Samples the next token of one completion.
//   logits          one row, width = vocabulary size = state.vocab_size(). Modified in place: on
//                   return it holds the processed logits (up to an additive constant): after
//                   step 5 for greedy rows; after step 10 for sampled rows, divided by the
//                   temperature and -inf outside the surviving tokens.
//   params          must have passed validate(params, logits.size()).
//   state           the completion's history; not modified (call state.append_output(token)).
//   eos_token_ids   the model's EOS ids (banned by min_tokens unless ignore_eos).
//   grammar_bitmask bitmask_words(width) words, bit set = allowed; empty = no grammar.
//   key             (seed, completion index, output position) of this token; unused when greedy.
// Fails for mismatched sizes, EOS ids outside the row, a logit that is not finite (the model's
// fault: check_model_logits), and when the masks leave no token (Code::kInvalidArgument).
Result<SampleResult> sample_row(std::span<float> logits, const SamplingParams& params,
                                const SequenceSamplingState& state,
                                std::span<const int32_t> eos_token_ids,
                                std::span<const uint32_t> grammar_bitmask, const SampleKey& key);

// Whether sample_row's token is the row's argmax whatever the row: greedy, no logprobs, and no step
// before the choice changes a logit (no grammar, allowed tokens, bias, penalties, or min_tokens
// masking stop ids or EOS). Such a token can be found where the logits are (Backend::argmax_rows).
bool picks_argmax(const SamplingParams& params, const SequenceSamplingState& state,
                  std::span<const int32_t> eos_token_ids, bool has_grammar);

// What sample_row returns for such a row, from Backend::argmax_rows' answer for it (an id, -1 for a
// row of -inf, -2 for a row holding NaN or +inf: nothing masked the row, so both are the model's).
Result<SampleResult> argmax_result(int32_t argmax, const SequenceSamplingState& state);

// A row of logits as the model produced it must be finite: NaN or an infinity comes from broken
// weights or configuration values, not from the request (Code::kModelFormat naming the token).
Result<void> check_model_logits(std::span<const float> logits);
// The error check_model_logits returns for `value` at `token` (also the device sampler's).
Error model_logit_error(float value, int64_t token);

}  // namespace deepinfer
