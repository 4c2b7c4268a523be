// The engine's output stage (step thread only): takes each sampled token into its completion
// (detokenized text, stop strings, stop tokens, the grammar, the context limit) and makes the
// events; ends completions, handing completion 0's state to the owner's resident state when its
// output joins the context; retires finished generations and delivers each step's events to their
// sinks once the engine's statistics show the step.
#pragma once

#include "cache/resident_cache.h"
#include "cache/sequence_table.h"
#include "engine/generation.h"
#include "sample/sampler.h"
#include "util/result.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer {

class OutputProcessor {
 public:
  OutputProcessor(SequenceTable& table, ResidentCache& residents, const std::vector<int32_t>& eos_ids, int64_t max_context)
      : table_(table), residents_(residents), eos_ids_(eos_ids), max_context_(max_context) {}

  // The step now running (idle state is stamped with it).
  void begin_step(uint64_t step) { step_ = step; }

  // Ends completion c (nothing when it has ended): releases the text held back, adds its FINISHED
  // event, and closes its state, or keeps it as the owner's idle state when c is completion 0 and
  // its output joins the context.
  void finish(Generation& g, Completion& c, FinishReason reason, std::optional<Error> error = std::nullopt);
  // Ends every completion as cancelled.
  void cancel(Generation& g);
  // Fails every unfinished completion with `error` after a step threw: their state may be
  // half-written, and the text held back is dropped (flushing it may be what threw).
  void fail_all(std::vector<std::unique_ptr<Generation>>& active, const Error& error);

  // Before c's first token: the prompt logprobs event, when they were asked for.
  void emit_prompt_logprobs(Generation& g, const Completion& c);
  // Takes the token sampled for c (or the sampling error) and emits its event; finishes c when it
  // ends. Returns whether c goes on under a grammar (its next mask is wanted).
  bool take(Generation& g, Completion& c, Result<SampleResult>& sampled);

  // Moves the finished generations out of `active` and readies the step's deliveries.
  void retire(std::vector<std::unique_ptr<Generation>>& active);
  // Hands the readied deliveries to their sinks (after the statistics were updated).
  void deliver();

  // At shutdown: a FINISHED event (cancelled) for every unfinished completion, then DONE.
  static void deliver_cancelled(Generation& g);

 private:
  // The events of a step for one sink.
  struct Delivery {
    std::shared_ptr<EventSink> sink;
    std::vector<Event> events;
    bool ended = false;
    bool joins = false;  // completion 0's output joins the context
    std::vector<int32_t> output;
    std::string text;
  };
  // Ends a finished generation: completion 0's state stays with the owner when its output joins.
  Delivery end_generation(Generation& g);

  SequenceTable& table_;
  ResidentCache& residents_;
  const std::vector<int32_t>& eos_ids_;
  const int64_t max_context_;
  uint64_t step_ = 0;
  std::vector<Delivery> deliveries_;
};

}  // namespace deepinfer
