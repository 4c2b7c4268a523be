// A generation in flight (engine-thread data): the request as submitted, the sink its events go
// to, and its completions.
#pragma once

#include "engine/completion.h"
#include "engine/event.h"
#include "engine/event_sink.h"
#include "grammar/compiled_grammar.h"
#include "sample/logprobs.h"
#include "sample/sampling_params.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace deepinfer {

struct Generation {
  std::shared_ptr<EventSink> sink;  // kept alive until the generation's DONE event is delivered
  uint64_t owner = 0;               // whose state it continues and keeps (the session's id)
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
  // Whether completion 0's output joins the owner's context (and its state stays with the owner)
  // when it ends for `reason`.
  bool joins_context(FinishReason reason) const {
    if (reason == FinishReason::kError) return false;
    return reason != FinishReason::kCancelled || sink->keep_cancelled_output();
  }
  // The FINISHED event of completion c.
  Event finished_event(const Completion& c) const {
    Event e;
    e.kind = Event::Kind::kFinished;
    e.completion = c.index;
    e.reason = c.reason;
    e.error = c.error;
    e.seed = seed;
    e.prompt_tokens = context.size();
    e.completion_tokens = c.output.size();
    e.cached_tokens = c.index == 0 ? cached_tokens : 0;
    return e;
  }
};

}  // namespace deepinfer
