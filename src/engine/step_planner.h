// The engine's planning stage (step thread only): admits new generations (their completions, and
// the owner's resident state completion 0 continues from), and plans each step: what every
// unfinished completion and every idle resident needs goes to the scheduler (src/sched), whose
// decision is carried out here (evictions, preemptions, completions that can never fit) and turned
// into the runner's feeds, each opened a sequence when it has none.
#pragma once

#include "backend/forward_batch.h"
#include "cache/resident_cache.h"
#include "engine/generation.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "sched/scheduler.h"
#include "text/tokenizer.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace deepinfer {

// One completion fed this step, beside its feed.
struct StepRow {
  Generation* g = nullptr;
  Completion* c = nullptr;
  int32_t n = 0;  // ids fed
  ForwardBatch::Logits logits = ForwardBatch::Logits::kNone;
};

struct StepPlan {
  std::vector<ModelRunner::Feed> feeds;  // for the runner
  std::vector<StepRow> rows;             // rows[i] is fed by feeds[i]
  // Every row sampled is plain greedy: only each row's best token leaves the backend.
  bool greedy = true;
  uint64_t prompt_tokens = 0;  // context ids fed (not decoding)
  size_t preempted = 0, evicted = 0;
};

struct PlannerOptions {
  int32_t max_batched_tokens = 2048;
  int32_t vocab = 0;
  const text::Tokenizer* tokenizer = nullptr;  // null: no text
  const std::vector<int32_t>* eos_ids = nullptr;
};

class StepPlanner {
 public:
  StepPlanner(ModelRunner& runner, ResidentCache& residents, OutputProcessor& output, const PlannerOptions& options)
      : runner_(runner), table_(runner.sequences()), residents_(residents), output_(output), options_(options) {}

  // Sets up a new generation: its completions, and what completion 0 reuses of the owner's state.
  void admit(Generation& g);
  // Schedules the step for the unfinished completions of `active` and the idle residents, and
  // carries out the evictions, preemptions and ends the decision asks for.
  void schedule(std::vector<std::unique_ptr<Generation>>& active);
  // The feeds of the step scheduled (valid until the next schedule).
  const StepPlan& plan();

 private:
  // What a scheduled sequence is: a completion, or the idle state of an owner (c null).
  struct Entry {
    Generation* g = nullptr;
    Completion* c = nullptr;
    uint64_t owner = 0;
  };
  void collect(std::vector<std::unique_ptr<Generation>>& active);
  void apply();
  void add_feed(const SchedFeed& feed);

  ModelRunner& runner_;
  SequenceTable& table_;
  ResidentCache& residents_;
  OutputProcessor& output_;
  PlannerOptions options_;
  // Kept between steps for their capacity: sequences_[i] is entries_[i] as the scheduler sees it.
  std::vector<SchedSequence> sequences_;
  std::vector<Entry> entries_;
  SchedDecision decision_;
  StepPlan plan_;
};

}  // namespace deepinfer
