// One engine step, stage by stage (the engine's step thread only):
//
//   admit      new generations: completions, reuse of the owner's resident state  (StepPlanner)
//   schedule   the scheduler's decision over completions and idle residents       (StepPlanner, src/sched)
//   plan       feeds for the runner, a sequence opened for each that has none     (StepPlanner)
//   forward    one forward over all feeds: logits rows, or greedy best ids        (ModelRunner)
//   sample     prompt logprobs and the next token of each completion due          (StepSampler)
//   output     tokens into completions, text, stops, events; ends completions     (OutputProcessor)
//   masks      next grammar masks, computed while the next forward runs           (GrammarMasks)
//   retire     finished generations leave; completion 0's state stays with the owner
//   deliver    each step's events to the generations' sinks (after the statistics)
//
// The Engine owns the thread, the inbox and the statistics; the core owns the generations in
// flight, the owners' resident state and the stages.
#pragma once

#include "cache/resident_cache.h"
#include "engine/generation.h"
#include "engine/grammar_masks.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/step_planner.h"
#include "engine/step_sampler.h"
#include "util/thread_pool.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace deepinfer {

struct EngineCoreOptions {
  PlannerOptions planner;
  int64_t max_context = 0;
  size_t sample_threads = 0;  // the sample pool (0: one per core)
  size_t mask_threads = 1;
  // Sample where the logits are (Backend::sample_rows) instead of copying the rows out of the
  // backend; steps with prompt logprobs still copy them.
  bool sample_on_backend = false;
};

// What one step did, for the engine's statistics.
struct StepReport {
  bool counted = false;  // the step got as far as its books (a step that threw before does not count)
  uint64_t step = 0;
  uint64_t prompt_tokens = 0, generated_tokens = 0;
  size_t preemptions = 0, evictions = 0;
  double step_seconds = 0, schedule_seconds = 0;
};

// The state of the sequences, for the engine's statistics.
struct CoreBooks {
  size_t generations = 0;        // in flight
  size_t running_sequences = 0;  // unfinished completions holding state
  size_t waiting_sequences = 0;  // unfinished completions without state
  size_t residents = 0;
};

class EngineCore {
 public:
  // Starts the sample pool and the grammar mask worker: a thread the system cannot start is an error.
  static Result<std::unique_ptr<EngineCore>> create(ModelRunner& runner, const EngineCoreOptions& options);

  // Whether a step has something to do: a generation unfinished or asked to cancel.
  bool has_work() const;
  // Runs one step: the arrivals join (and `arrivals` is emptied), the owners in `releases` give
  // their resident state up. Anything thrown inside fails the generations of the step, never the
  // engine: it goes on serving the others.
  StepReport step(std::vector<std::unique_ptr<Generation>>& arrivals, const std::vector<uint64_t>& releases);
  // Finished generations leave; the step's deliveries are readied.
  void retire() { output_.retire(active_); }
  CoreBooks books() const;
  // Hands the step's events to the sinks.
  void deliver() { output_.deliver(); }
  // The loop stops: waits for the grammar masks in flight.
  void stop() { masks_.collect(); }
  // At shutdown: the generations still in flight.
  std::vector<std::unique_ptr<Generation>> take_active() { return std::move(active_); }

 private:
  EngineCore(ModelRunner& runner, const EngineCoreOptions& options, std::unique_ptr<ThreadPool> sample_pool,
             std::unique_ptr<MaskWorker> mask_worker);
  void admit_and_cancel();
  // Runs the forward of the plan, samples and takes the tokens; returns the tokens generated.
  uint64_t run(const StepPlan& plan);

  ModelRunner& runner_;
  std::unique_ptr<ThreadPool> sample_pool_;  // the rows of a step are sampled in parallel
  ResidentCache residents_;
  OutputProcessor output_;
  StepPlanner planner_;
  StepSampler sampler_;
  GrammarMasks masks_;
  const bool sample_on_backend_;
  std::vector<std::unique_ptr<Generation>> active_;
  uint64_t step_ = 0;
};

}  // namespace deepinfer
