// One completion of a generation (engine-thread data): one sequence of model state and what it has
// generated. Its ids are `processed` (in its state) then `to_feed` (next to process; the last one's
// logits are sampled from); preemption moves them all back to `to_feed`, to be recomputed.
#pragma once

#include "cache/sequence_table.h"
#include "grammar/matcher.h"
#include "sample/finish_reason.h"
#include "sample/sampling_params.h"
#include "sample/sequence_state.h"
#include "sample/stop_string_matcher.h"
#include "text/streaming_detokenizer.h"
#include "text/tokenizer.h"
#include "util/result.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer {

struct Completion {
  int32_t index = 0;
  int32_t seq = -1;                // in the SequenceTable; -1: none (not started, or preempted)
  std::vector<int32_t> processed;  // ids in its state, in order
  std::vector<int32_t> to_feed;    // ids to process next; the last one's logits are sampled from
  bool decoding = false;           // has sampled at least once
  std::vector<int32_t> output;
  std::string text;                // output text emitted so far
  std::optional<SequenceSamplingState> sampling;
  std::optional<text::StreamingDetokenizer> detok;
  std::optional<StopStringMatcher> stops;
  std::optional<grammar::Matcher> matcher;  // when the generation is constrained
  std::vector<uint32_t> mask;               // the matcher's allowed tokens for the next sample
  bool mask_ready = false;
  bool done = false;
  FinishReason reason = FinishReason::kStop;
  std::optional<Error> error;

  // Sets up completion `index` of a generation whose prompt is `context`: its sampling state, the
  // detokenizer (with a tokenizer), stop strings and grammar matcher; the whole context is to be
  // fed. Fails when `context` is no valid start for sampling (nothing else is set up then).
  Result<void> start(int32_t index, const std::vector<int32_t>& context, int32_t vocab, const SamplingParams& params,
                     const text::Tokenizer* tokenizer, const std::shared_ptr<const grammar::CompiledGrammar>& grammar);
  // The first n ids of `to_feed` were processed into its state.
  void advance(int32_t n);
  // Gives its state up; every id is fed again later (recomputed).
  void preempt(SequenceTable& table);
  // Closes its sequence, if it holds one.
  void close_state(SequenceTable& table);
  // The text held back (an incomplete character, a possible stop string), released at its end.
  std::string flush_text();
};

}  // namespace deepinfer
