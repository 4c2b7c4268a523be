#include "engine/step_sampler.h"

#include "sample/logprobs.h"

#include <algorithm>

namespace deepinfer {

std::span<StepSampler::Draw> StepSampler::sample(const StepPlan& plan, std::span<float> logits, std::span<const int32_t> best) {
  gather(plan, logits, best);
  pool_.parallel_for(scores_.size() + draws_.size(), 1, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      if (i < scores_.size()) {
        PromptScore& ps = scores_[i];
        ps.result = compute_logprobs(ps.row, ps.token, *ps.g->params.prompt_logprobs);
      } else if (!draws_[i - scores_.size()].row.empty()) {
        draw(draws_[i - scores_.size()]);
      }
    }
  });
  for (PromptScore& ps : scores_) {  // a row that fails ends its prompt's logprobs there
    auto& all = ps.g->prompt_logprobs;
    if (ps.index >= all.size()) continue;
    if (ps.result) all[ps.index] = std::move(ps.result).value();
    else all.resize(ps.index);
  }
  return draws_;
}

void StepSampler::gather(const StepPlan& plan, std::span<float> logits, std::span<const int32_t> best) {
  draws_.clear();
  scores_.clear();
  const size_t vocab = static_cast<size_t>(vocab_);
  size_t row = 0;
  for (const StepRow& r : plan.rows) {
    Generation& g = *r.g;
    Completion& c = *r.c;
    const int32_t n = r.n;
    const size_t rows = r.logits == ForwardBatch::Logits::kAll ? n : r.logits == ForwardBatch::Logits::kLast ? 1 : 0;
    float* first = plan.greedy || logits.empty() ? nullptr : logits.data() + row * vocab;
    row += rows;
    if (r.logits == ForwardBatch::Logits::kAll && first) {  // prompt logprobs: row j predicts token p+j+1 (never on the backend)
      // Only rows not scored yet: a prefill preempted half-way is recomputed from its start.
      const size_t p = c.processed.size();
      for (int32_t j = 0; j < n; ++j)
        if (p + j + 1 < g.context.size() && p + j == g.prompt_logprobs.size()) {
          scores_.push_back({&g, g.prompt_logprobs.size(), {first + j * vocab, vocab}, g.context[p + j + 1]});
          g.prompt_logprobs.emplace_back();  // filled once scored
        }
    }
    c.advance(n);
    if (!c.to_feed.empty() || c.done) continue;
    const int64_t logits_row = static_cast<int64_t>(row) - 1;
    if (plan.greedy) {
      draws_.push_back({&g, &c, {}, logits_row, argmax_result(best[row - 1], *c.sampling)});
    } else {
      draws_.push_back({&g, &c, first ? std::span<float>(first + (rows - 1) * vocab, vocab) : std::span<float>(), logits_row});
    }
  }
}

std::span<StepSampler::Draw> StepSampler::sample_on_backend(const StepPlan& plan, Tensor logits, ModelRunner& runner) {
  gather(plan, {}, {});
  if (draws_.empty()) return draws_;  // a step of prefill chunks only
  // Rows without a draw (a completion that ended) get no parameters: sample_rows skips them with
  // an error nobody reads.
  rows_.assign(static_cast<size_t>(logits.rows), RowSampling{});
  if (std::any_of(draws_.begin(), draws_.end(), [](const Draw& d) { return d.c->matcher && !d.c->mask_ready; })) {
    pool_.parallel_for(draws_.size(), 1, [&](size_t begin, size_t end) {  // first grammar masks
      for (size_t i = begin; i < end; ++i) mask_of(*draws_[i].c);
    });
  }
  for (const Draw& d : draws_) {
    if (d.logits_row < 0 || d.logits_row >= logits.rows) continue;  // never: one row per draw
    Completion& c = *d.c;
    rows_[static_cast<size_t>(d.logits_row)] = RowSampling{&d.g->params, &*c.sampling, eos_ids_, mask_of(c), key_of(d)};
  }
  const Result<void> sampled = runner.sample_rows(logits, rows_, on_backend_);
  for (Draw& d : draws_) {
    if (!sampled) d.result = sampled.error();
    else if (d.logits_row < 0 || d.logits_row >= static_cast<int64_t>(on_backend_.size()))
      d.result = make_error(Code::kInternal, "no logits row {} for a draw", d.logits_row);
    else d.result = std::move(on_backend_[static_cast<size_t>(d.logits_row)]);
  }
  return draws_;
}

std::span<const uint32_t> StepSampler::mask_of(Completion& c) {
  if (!c.matcher) return {};
  if (!c.mask_ready) {
    c.mask.resize(c.matcher->compiled().vocabulary().mask_words());
    c.matcher->fill_mask(c.mask.data());
    c.mask_ready = true;
  }
  return c.mask;
}

SampleKey StepSampler::key_of(const Draw& d) const {
  return SampleKey{d.g->seed, static_cast<uint32_t>(d.g->params.first_completion + d.c->index), static_cast<uint32_t>(d.c->output.size())};
}

void StepSampler::draw(Draw& d) const {
  Completion& c = *d.c;
  const std::span<const uint32_t> mask = mask_of(c);
  d.result = sample_row(d.row, d.g->params, *c.sampling, eos_ids_, mask, key_of(d));
}

}  // namespace deepinfer
