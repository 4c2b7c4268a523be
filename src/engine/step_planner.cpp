#include "engine/step_planner.h"

#include "sample/sampler.h"

namespace deepinfer {

void StepPlanner::admit(Generation& g) {
  g.admitted = true;
  const SamplingParams& p = g.params;
  for (int32_t i = 0; i < p.n; ++i) {
    Completion c;
    if (auto started = c.start(i, g.context, options_.vocab, p, options_.tokenizer, g.grammar); !started) {
      c.done = true;
      c.reason = FinishReason::kError;
      c.error = started.error();
      g.pending.push_back(g.finished_event(c));
    }
    g.completions.push_back(std::move(c));
  }
  // Completion 0 continues from the owner's state when that state is a strict prefix of the
  // context (prompt logprobs need every prompt row, so they recompute).
  Completion& c0 = g.completions[0];
  auto reuse = residents_.take(g.owner, g.context, !p.prompt_logprobs && !c0.done);
  if (!reuse) return;
  c0.seq = reuse->seq;
  c0.to_feed.assign(g.context.begin() + static_cast<std::ptrdiff_t>(reuse->processed.size()), g.context.end());
  c0.processed = std::move(reuse->processed);
  g.cached_tokens = c0.processed.size();
}

void StepPlanner::schedule(std::vector<std::unique_ptr<Generation>>& active) {
  collect(active);
  const StatePool& pool = table_.pool();
  const SchedLimits limits{options_.max_batched_tokens, table_.block_tokens(), pool.free_blocks(), pool.free_slots(),
                           pool.n_blocks()};
  decision_ = schedule_step(sequences_, limits);
  apply();
}

const StepPlan& StepPlanner::plan() {
  plan_.feeds.clear();
  plan_.rows.clear();
  plan_.prompt_tokens = 0;
  for (const SchedFeed& f : decision_.feeds) add_feed(f);
  plan_.greedy = true;
  for (size_t i = 0; i < plan_.rows.size() && plan_.greedy; ++i) {
    const StepRow& r = plan_.rows[i];
    if (r.logits == ForwardBatch::Logits::kAll) plan_.greedy = false;
    if (r.logits == ForwardBatch::Logits::kLast)
      plan_.greedy = picks_argmax(r.g->params, *r.c->sampling, *options_.eos_ids, r.c->matcher.has_value());
  }
  return plan_;
}

void StepPlanner::collect(std::vector<std::unique_ptr<Generation>>& active) {
  sequences_.clear();
  entries_.clear();
  for (auto& gp : active) {
    Generation& g = *gp;
    for (auto& c : g.completions) {
      if (c.done) continue;
      entries_.push_back({&g, &c, g.owner});
      sequences_.push_back({static_cast<int32_t>(c.to_feed.size()), static_cast<int32_t>(c.processed.size()),
                            c.seq >= 0 ? table_.blocks_held(c.seq) : 0, c.seq >= 0, c.decoding,
                            g.arrival * 4096 + static_cast<uint64_t>(c.index)});
    }
  }
  for (const auto& [owner, r] : residents_.residents()) {
    entries_.push_back({nullptr, nullptr, owner});
    sequences_.push_back({0, static_cast<int32_t>(r.processed.size()), table_.blocks_held(r.seq), true, false, r.last_used});
  }
}

void StepPlanner::apply() {
  for (size_t i : decision_.evict) residents_.release(entries_[i].owner);
  for (size_t i : decision_.preempt) entries_[i].c->preempt(table_);  // recomputed later from its ids
  for (size_t i : decision_.over_capacity) output_.finish(*entries_[i].g, *entries_[i].c, FinishReason::kLength);
  plan_.preempted = decision_.preempt.size();
  plan_.evicted = decision_.evict.size();
}

void StepPlanner::add_feed(const SchedFeed& f) {
  Generation& g = *entries_[f.index].g;
  Completion& c = *entries_[f.index].c;
  if (c.seq < 0) {
    auto seq = runner_.open_sequence();
    if (!seq) return output_.finish(g, c, FinishReason::kError, seq.error());
    c.seq = seq.value();
  }
  const bool last = f.n == static_cast<int32_t>(c.to_feed.size());
  const bool prompt_rows = g.params.prompt_logprobs && c.index == 0 && !c.decoding && c.output.empty();
  const auto logits = prompt_rows ? ForwardBatch::Logits::kAll : last ? ForwardBatch::Logits::kLast : ForwardBatch::Logits::kNone;
  plan_.feeds.push_back({c.seq, c.to_feed.data(), f.n, logits});
  plan_.rows.push_back({&g, &c, f.n, logits});
  if (!c.decoding) plan_.prompt_tokens += static_cast<uint64_t>(f.n);
}

}  // namespace deepinfer
