#include "sample/sequence_state.h"

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
    state.occurrences_[token].in_prompt = true;
  }
  return state;
}

Result<void> SequenceSamplingState::append_output(int32_t token) {
  if (token < 0 || token >= vocab_size_) {
    return make_error(Code::kInvalidArgument,
                      "output token {} is outside the vocabulary [0, {})", token, vocab_size_);
  }
  ++occurrences_[token].output_count;
  ++num_generated_;
  return ok();
}

}  // namespace deepinfer
