// The engine's sampling stage (step thread, its rows on the sample pool): reads the step's output
// row by row in feed order, advances each fed completion past its ids, scores the prompt rows
// asked for (prompt logprobs) and draws the next token of each completion whose ids are all
// processed. Draws touch only their own completion (and read its generation), so the rows of a
// step are sampled in parallel; their results are then taken in feed order (OutputProcessor).
#pragma once

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
    std::span<float> row;
    Result<SampleResult> result = SampleResult{};
  };

  StepSampler(ThreadPool& pool, const std::vector<int32_t>& eos_ids, int32_t vocab)
      : pool_(pool), eos_ids_(eos_ids), vocab_(vocab) {}

  // The step's output: `logits` (the rows of the feeds asking for them, in feed order) or, for a
  // greedy plan, `best` (one id per such row). Returns the draws, in feed order, valid until the
  // next call.
  std::span<Draw> sample(const StepPlan& plan, std::span<float> logits, std::span<const int32_t> best);

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

  ThreadPool& pool_;
  const std::vector<int32_t>& eos_ids_;
  const int32_t vocab_;
  std::vector<Draw> draws_;
  std::vector<PromptScore> scores_;
};

}  // namespace deepinfer
