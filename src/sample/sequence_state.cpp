#include "sample/sequence_state.h"

#include <algorithm>

namespace deepinfer {

Result<SequenceSamplingState> SequenceSamplingState::create(std::span<const int32_t> prompt_tokens,
                                                            int32_t vocab_size) {
  if (vocab_size <= 0) {
    return make_error(Code::kInvalidArgument, "vocab_size={} must be positive", vocab_size);
  }
  SequenceSamplingState state(vocab_size);
  for (size_t i = 0; i < prompt_tokens.size(); ++i) {
    const int32_t token = prompt_tokens[i];
    if (token < 0 || token >= vocab_size) {
      return make_error(Code::kInvalidArgument,
                        "prompt token {} at position {} is outside the vocabulary [0, {})", token,
                        i, vocab_size);
    }
    state.occurrences_.push_back({token, {0, true}});
  }
  auto by_token = [](const SeenToken& a, const SeenToken& b) { return a.token < b.token; };
  std::sort(state.occurrences_.begin(), state.occurrences_.end(), by_token);
  state.occurrences_.erase(std::unique(state.occurrences_.begin(), state.occurrences_.end(),
                                       [](const SeenToken& a, const SeenToken& b) { return a.token == b.token; }),
                           state.occurrences_.end());
  return state;
}

const TokenOccurrences* SequenceSamplingState::find(int32_t token) const {
  auto it = std::lower_bound(occurrences_.begin(), occurrences_.end(), token,
                             [](const SeenToken& a, int32_t t) { return a.token < t; });
  return it != occurrences_.end() && it->token == token ? &it->seen : nullptr;
}

Result<void> SequenceSamplingState::append_output(int32_t token) {
  if (token < 0 || token >= vocab_size_) {
    return make_error(Code::kInvalidArgument,
                      "output token {} is outside the vocabulary [0, {})", token, vocab_size_);
  }
  auto it = std::lower_bound(occurrences_.begin(), occurrences_.end(), token,
                             [](const SeenToken& a, int32_t t) { return a.token < t; });
  if (it == occurrences_.end() || it->token != token) it = occurrences_.insert(it, SeenToken{token, {}});
  ++it->seen.output_count;
  ++num_generated_;
  return ok();
}

}  // namespace deepinfer
