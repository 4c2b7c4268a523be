#include "sample/stop_condition.h"

#include <algorithm>

namespace deepinfer {
namespace {

bool contains(std::span<const int32_t> ids, int32_t token) {
  return std::find(ids.begin(), ids.end(), token) != ids.end();
}

}  // namespace

std::optional<TokenStop> check_token_stop(const SamplingParams& params,
                                          std::span<const int32_t> eos_token_ids, int32_t token,
                                          int32_t num_generated) {
  if (num_generated > params.min_tokens) {
    if (!params.ignore_eos && contains(eos_token_ids, token)) {
      return TokenStop{FinishReason::kStop, true, token};
    }
    if (contains(params.stop_token_ids, token)) return TokenStop{FinishReason::kStop, false, token};
  }
  if (num_generated >= params.max_tokens) return TokenStop{FinishReason::kLength, false, token};
  return std::nullopt;
}

bool stop_strings_armed(const SamplingParams& params, int32_t num_generated) {
  return num_generated > params.min_tokens;
}

}  // namespace deepinfer
