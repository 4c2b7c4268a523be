#include "sample/logits_processors.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace deepinfer {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

}  // namespace

Result<void> apply_token_bitmask(std::span<float> logits, std::span<const uint32_t> bitmask) {
  if (bitmask.size() != bitmask_words(logits.size())) {
    return make_error(Code::kInvalidArgument,
                      "token bitmask has {} words, {} tokens need {}", bitmask.size(),
                      logits.size(), bitmask_words(logits.size()));
  }
  for (size_t w = 0; w < bitmask.size(); ++w) {
    const uint32_t word = bitmask[w];
    if (word == ~0u) continue;
    const size_t end = std::min(logits.size(), (w + 1) * 32);
    for (size_t i = w * 32; i < end; ++i) {
      if (!((word >> (i % 32)) & 1u)) logits[i] = kMasked;
    }
  }
  return ok();
}

void apply_allowed_token_ids(std::span<float> logits, std::span<const int32_t> allowed_token_ids) {
  if (allowed_token_ids.empty()) return;
  thread_local std::vector<float> kept;
  kept.resize(allowed_token_ids.size());
  for (size_t i = 0; i < allowed_token_ids.size(); ++i) kept[i] = logits[allowed_token_ids[i]];
  std::fill(logits.begin(), logits.end(), kMasked);
  for (size_t i = 0; i < allowed_token_ids.size(); ++i) logits[allowed_token_ids[i]] = kept[i];
}

void apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& logit_bias) {
  for (const auto& [token, bias] : logit_bias) logits[token] += bias;
}

void apply_min_tokens(std::span<float> logits, const SamplingParams& params, int32_t num_generated,
                      std::span<const int32_t> eos_token_ids) {
  if (num_generated >= params.min_tokens) return;
  for (int32_t token : params.stop_token_ids) logits[token] = kMasked;
  if (!params.ignore_eos) {
    for (int32_t token : eos_token_ids) logits[token] = kMasked;
  }
}

void apply_penalties(std::span<float> logits, const SamplingParams& params,
                     const SequenceSamplingState& state) {
  const float repetition = params.repetition_penalty;
  const float frequency = params.frequency_penalty;
  const float presence = params.presence_penalty;
  if (repetition == 1.0f && frequency == 0.0f && presence == 0.0f) return;
  for (const auto& [token, seen] : state.occurrences()) {
    float& logit = logits[token];
    if (repetition != 1.0f) logit = logit > 0.0f ? logit / repetition : logit * repetition;
    if (seen.output_count > 0) {
      logit -= frequency * static_cast<float>(seen.output_count);
      logit -= presence;
    }
  }
}

}  // namespace deepinfer
