#include "sample/sampler.h"

#include "sample/candidate_set.h"
#include "sample/logits_processors.h"
#include "sample/row_math.h"
#include "sample/token_choice.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace deepinfer {
namespace {

Result<void> check_inputs(std::span<const float> logits, const SequenceSamplingState& state,
                          std::span<const int32_t> eos_token_ids) {
  if (logits.size() != static_cast<size_t>(state.vocab_size())) {
    return make_error(Code::kInvalidArgument, "logits row has {} entries, the vocabulary {}",
                      logits.size(), state.vocab_size());
  }
  for (int32_t eos : eos_token_ids) {
    if (eos < 0 || eos >= state.vocab_size()) {
      return make_error(Code::kInvalidArgument, "EOS id {} is outside the vocabulary [0, {})", eos,
                        state.vocab_size());
    }
  }
  return check_model_logits(logits);
}

Error model_error(std::string_view what) {
  return make_error(Code::kModelFormat, "the model produced {}: its weights or configuration hold values out of range", what);
}

}  // namespace

Error model_logit_error(float value, int64_t token) {
  return model_error(fmt::format("a logit of {} for token {}", value, token));
}

Result<void> check_model_logits(std::span<const float> logits) {
  if (const int64_t bad = first_non_finite(logits); bad >= 0) return model_logit_error(logits[bad], bad);
  return ok();
}

Result<SampleResult> sample_row(std::span<float> logits, const SamplingParams& params,
                                const SequenceSamplingState& state,
                                std::span<const int32_t> eos_token_ids,
                                std::span<const uint32_t> grammar_bitmask, const SampleKey& key) {
  DI_TRYV(check_inputs(logits, state, eos_token_ids));
  const bool raw_logprobs = params.logprobs && params.logprobs_mode == LogprobsMode::kRaw;
  thread_local std::vector<float> raw;
  if (raw_logprobs) raw.assign(logits.begin(), logits.end());

  if (!grammar_bitmask.empty()) {
    DI_TRYV(apply_token_bitmask(logits, grammar_bitmask));
  }
  apply_allowed_token_ids(logits, params.allowed_token_ids);
  apply_logit_bias(logits, params.logit_bias);
  apply_min_tokens(logits, params, state.num_generated(), eos_token_ids);
  apply_penalties(logits, params, state);

  int32_t token = -1;
  if (params.temperature == 0.0f) {
    token = greedy_token(logits);
  } else {
    thread_local CandidateSet candidates;
    candidates.collect(logits);
    if (!candidates.empty()) {
      candidates.apply_top_k(params.top_k);
      candidates.apply_temperature(params.temperature);
      candidates.apply_top_p(params.top_p);
      candidates.apply_min_p(params.min_p);
      token = candidates.draw(sample_uniform(key));
      candidates.store_processed(logits, params.temperature);
    }
  }
  if (token < 0) {
    return make_error(Code::kInvalidArgument,
                      "no token can be generated at output position {}: the grammar mask, "
                      "allowed_token_ids and min_tokens exclude every token",
                      state.num_generated());
  }

  SampleResult result{token, std::nullopt};
  if (params.logprobs) {
    const std::span<const float> source = raw_logprobs ? std::span<const float>(raw) : logits;
    DI_TRY(logprobs, compute_logprobs(source, token, *params.logprobs));
    result.logprobs = std::move(logprobs);
  }
  return result;
}

bool picks_argmax(const SamplingParams& params, const SequenceSamplingState& state,
                  std::span<const int32_t> eos_token_ids, bool has_grammar) {
  const bool min_tokens_masks = state.num_generated() < params.min_tokens &&
                                (!params.stop_token_ids.empty() || (!params.ignore_eos && !eos_token_ids.empty()));
  return params.temperature == 0.0f && !has_grammar && !params.logprobs && params.allowed_token_ids.empty() &&
         params.logit_bias.empty() && !min_tokens_masks && params.repetition_penalty == 1.0f &&
         params.frequency_penalty == 0.0f && params.presence_penalty == 0.0f;
}

Result<SampleResult> argmax_result(int32_t argmax, const SequenceSamplingState& state) {
  if (argmax == -1) return model_error("a row of logits that are all -inf");
  if (argmax == -2) return model_error("a row of logits holding NaN or +inf");
  if (argmax < 0 || argmax >= state.vocab_size()) return make_error(Code::kInternal, "argmax {} is outside the vocabulary", argmax);
  return SampleResult{argmax, std::nullopt};
}

}  // namespace deepinfer
