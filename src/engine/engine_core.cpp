#include "engine/engine_core.h"

#include "util/log.h"

#include <algorithm>
#include <chrono>
#include <new>
#include <optional>
#include <typeinfo>

namespace deepinfer {

Result<std::unique_ptr<EngineCore>> EngineCore::create(ModelRunner& runner, const EngineCoreOptions& o) {
  DI_TRY(sample_pool, ThreadPool::create(o.sample_threads));
  DI_TRY(mask_worker, MaskWorker::create(o.mask_threads));
  return std::unique_ptr<EngineCore>(new EngineCore(runner, o, std::move(sample_pool), std::move(mask_worker)));
}

EngineCore::EngineCore(ModelRunner& runner, const EngineCoreOptions& o, std::unique_ptr<ThreadPool> sample_pool,
                       std::unique_ptr<MaskWorker> mask_worker)
    : runner_(runner),
      sample_pool_(std::move(sample_pool)),
      residents_(runner.sequences()),
      output_(runner.sequences(), residents_, *o.planner.eos_ids, o.max_context),
      planner_(runner, residents_, output_, o.planner),
      sampler_(*sample_pool_, *o.planner.eos_ids, o.planner.vocab),
      masks_(std::move(mask_worker)),
      sample_on_backend_(o.sample_on_backend) {}

bool EngineCore::has_work() const {
  for (const auto& g : active_)
    if (!g->done() || g->sink->cancel_requested()) return true;
  return false;
}

StepReport EngineCore::step(std::vector<std::unique_ptr<Generation>>& arrivals, const std::vector<uint64_t>& releases) {
  for (auto& g : arrivals) active_.push_back(std::move(g));
  arrivals.clear();
  StepReport report;
  report.step = ++step_;
  output_.begin_step(step_);
  const auto t_start = std::chrono::steady_clock::now();
  try {
    for (uint64_t owner : releases) residents_.release(owner);
    admit_and_cancel();
    planner_.schedule(active_);
    const auto t_planned = std::chrono::steady_clock::now();
    const StepPlan& plan = planner_.plan();
    const uint64_t generated = plan.feeds.empty() ? 0 : run(plan);
    const auto t_end = std::chrono::steady_clock::now();
    report.counted = true;
    report.prompt_tokens = plan.prompt_tokens;
    report.generated_tokens = generated;
    report.preemptions = plan.preempted;
    report.evictions = plan.evicted;
    report.step_seconds = std::chrono::duration<double>(t_end - t_start).count();
    report.schedule_seconds = std::chrono::duration<double>(t_planned - t_start).count();
    masks_.start();  // next masks: computed while the following step plans and runs its forward
  } catch (const std::exception& ex) {
    const bool oom = dynamic_cast<const std::bad_alloc*>(&ex) != nullptr;
    const Error err{oom ? Code::kOutOfMemory : Code::kInternal, std::string("the engine step failed: ") + ex.what()};
    log(LogLevel::kError, "{}", err.message);
    masks_.abandon();
    output_.fail_all(active_, err);
  }
  return report;
}

void EngineCore::admit_and_cancel() {
  for (auto& g : active_) {
    if (!g->admitted) planner_.admit(*g);
    if (g->sink->cancel_requested()) output_.cancel(*g);
  }
}

uint64_t EngineCore::run(const StepPlan& plan) {
  std::span<float> logits;
  std::span<const int32_t> best;
  Tensor backend_logits;
  std::optional<Error> failure;
  const bool on_backend = !plan.greedy && sample_on_backend_ &&
                          std::none_of(plan.rows.begin(), plan.rows.end(), [](const StepRow& r) { return r.logits == ForwardBatch::Logits::kAll; });
  if (plan.greedy) {
    auto stepped = runner_.step_greedy(plan.feeds);
    if (stepped) best = stepped.value();
    else failure = stepped.error();
  } else if (on_backend) {
    auto stepped = runner_.step_on_backend(plan.feeds);
    if (stepped) backend_logits = stepped.value();
    else failure = stepped.error();
  } else {
    auto stepped = runner_.step(plan.feeds);
    if (stepped) logits = stepped.value();
    else failure = stepped.error();
  }
  if (failure) {
    log(LogLevel::kError, "engine step failed: {}", failure->message);
    for (const StepRow& r : plan.rows) output_.finish(*r.g, *r.c, FinishReason::kError, failure);
    return 0;
  }
  masks_.collect();
  const std::span<StepSampler::Draw> draws =
      on_backend ? sampler_.sample_on_backend(plan, backend_logits, runner_) : sampler_.sample(plan, logits, best);
  for (StepSampler::Draw& d : draws) {  // in feed order: events and ends as with one thread
    output_.emit_prompt_logprobs(*d.g, *d.c);
    if (output_.take(*d.g, *d.c, d.result)) masks_.queue(*d.c);
  }
  return draws.size();
}

CoreBooks EngineCore::books() const {
  CoreBooks b;
  b.generations = active_.size();
  b.residents = residents_.size();
  for (const auto& g : active_)
    for (const auto& c : g->completions)
      if (!c.done) ++(c.seq >= 0 ? b.running_sequences : b.waiting_sequences);
  return b;
}

}  // namespace deepinfer
