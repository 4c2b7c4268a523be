// The engine's sampling stage (step thread, its rows on the sample pool): reads the step's output
// row by row in feed order, advances each fed completion past its ids, scores the prompt rows
// asked for (prompt logprobs) and draws the next token of each completion whose ids are all
// processed. Draws touch only their own completion (and read its generation), so the rows of a
// step are sampled in parallel; their results are then taken in feed order (OutputProcessor).
// Where the backend samples (sample_on_backend), the rows never leave it: one Backend::sample_rows
// call draws every completion's token, the host only prepares each row's arguments.
#pragma once

#include "backend/row_sampling.h"
#include "engine/model_runner.h"
#include "engine/step_planner.h"
#include "sample/sampler.h"
#include "util/result.h"
#include "util/thread_pool.h"

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer {

class StepSampler {
 public:
  // A completion whose next token is drawn from `row` this step (a greedy step: `result` holds the
  // backend's argmax already, and `row` is empty).
  struct Draw {
    Generation* g;
    Completion* c;
    std::span<float> row;  // on the host (empty: greedy, or the row is on the backend)
    int64_t logits_row;    // the row's index among the step's logits rows
    Result<SampleResult> result = SampleResult{};
  };

  StepSampler(ThreadPool& pool, const std::vector<int32_t>& eos_ids, int32_t vocab)
      : pool_(pool), eos_ids_(eos_ids), vocab_(vocab) {}

  // The step's output: `logits` (the rows of the feeds asking for them, in feed order) or, for a
  // greedy plan, `best` (one id per such row). Returns the draws, in feed order, valid until the
  // next call.
  std::span<Draw> sample(const StepPlan& plan, std::span<float> logits, std::span<const int32_t> best);
  // The same with the logits rows on the backend (ModelRunner::step_on_backend), sampled there. The
  // plan asks for no prompt logprobs (they need the rows on the host).
  std::span<Draw> sample_on_backend(const StepPlan& plan, Tensor logits, ModelRunner& runner);

 private:
  // A prompt row whose logprobs this step computes.
  struct PromptScore {
    Generation* g;
    size_t index;  // into g->prompt_logprobs
    std::span<const float> row;
    int32_t token;
    Result<Logprobs> result = Logprobs{};
  };
  void gather(const StepPlan& plan, std::span<float> logits, std::span<const int32_t> best);
  void draw(Draw& d) const;
  // The completion's grammar mask, computed here when it is its first (later ones come from GrammarMasks).
  static std::span<const uint32_t> mask_of(Completion& c);
  SampleKey key_of(const Draw& d) const;

  ThreadPool& pool_;
  const std::vector<int32_t>& eos_ids_;
  const int32_t vocab_;
  std::vector<Draw> draws_;
  std::vector<PromptScore> scores_;
  std::vector<RowSampling> rows_;                // sample_on_backend's arguments, a row each
  std::vector<Result<SampleResult>> on_backend_;  // and its results
};

}  // namespace deepinfer
