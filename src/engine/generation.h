// A generation in flight (engine-thread data): the request as submitted and the state of each of
// its completions. A completion is one sequence of model state: tokens processed into it, tokens
// waiting to be processed, and what it has generated.
#pragma once

#include "engine/event.h"
#include "grammar/matcher.h"
#include "sample/sampling_params.h"
#include "sample/sequence_state.h"
#include "sample/stop_string_matcher.h"
#include "text/streaming_detokenizer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer {

class Session;

struct Completion {
  int32_t index = 0;
  int32_t seq = -1;                // runner sequence; -1: none (not started, or preempted)
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
};

struct Generation {
  std::shared_ptr<Session> session;
  SamplingParams params;
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  uint64_t seed = 0;
  uint64_t arrival = 0;
  std::vector<int32_t> context;  // the prompt: the session's context when generation started
  uint64_t cached_tokens = 0;    // context tokens whose state was reused
  bool admitted = false;
  std::vector<Completion> completions;
  std::vector<Logprobs> prompt_logprobs;  // when params.prompt_logprobs
  std::vector<Event> pending;             // events of this step, delivered at its end

  bool done() const {
    for (const auto& c : completions)
      if (!c.done) return false;
    return true;
  }
};

}  // namespace deepinfer
