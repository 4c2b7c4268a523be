// Per-completion sampling state: what the penalties need to know about the tokens seen so far,
// kept incrementally so a step never rescans the history.
#pragma once

#include "util/result.h"

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer {

struct TokenOccurrences {
  int32_t output_count = 0;  // times generated (presence and frequency penalties)
  bool in_prompt = false;    // repetition penalty also counts prompt tokens
};

struct SeenToken {
  int32_t token;
  TokenOccurrences seen;
};

// Copyable: the n completions of one prompt start from copies of the prompt's state. After a
// preemption the engine rebuilds it from the prompt and the output ids.
class SequenceSamplingState {
 public:
  // Fails if a prompt token lies outside [0, vocab_size).
  static Result<SequenceSamplingState> create(std::span<const int32_t> prompt_tokens,
                                              int32_t vocab_size);

  // Records a generated token (after sample_row returned it). Fails for ids outside the vocabulary.
  Result<void> append_output(int32_t token);

  int32_t num_generated() const { return num_generated_; }
  int32_t vocab_size() const { return vocab_size_; }
  // Every token seen in the prompt or the output, by ascending id (the device sampler's edit lists
  // merge it as it is instead of sorting it every step).
  std::span<const SeenToken> occurrences() const { return occurrences_; }
  // One token's occurrences, or null when it was never seen.
  const TokenOccurrences* find(int32_t token) const;

 private:
  explicit SequenceSamplingState(int32_t vocab_size) : vocab_size_(vocab_size) {}

  int32_t vocab_size_;
  int32_t num_generated_ = 0;
  std::vector<SeenToken> occurrences_;  // sorted by token
};

}  // namespace deepinfer
