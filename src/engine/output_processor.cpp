#include "engine/output_processor.h"

#include "sample/stop_condition.h"

namespace deepinfer {

void OutputProcessor::finish(Generation& g, Completion& c, FinishReason reason, std::optional<Error> error) {
  if (c.done) return;
  c.done = true;
  c.reason = reason;
  c.error = std::move(error);
  if (std::string tail = c.flush_text(); !tail.empty()) {
    c.text += tail;
    Event e;
    e.completion = c.index;
    e.text = std::move(tail);
    g.pending.push_back(std::move(e));
  }
  g.pending.push_back(g.finished_event(c));
  if (c.index != 0 || !g.joins_context(reason)) {
    c.close_state(table_);
  } else if (c.seq >= 0) {
    // Completion 0's state stays with the owner for its next turn. It becomes idle now, not when the
    // whole generation retires: other completions may still run, and the scheduler must be able to
    // evict it for them (a finished sequence it cannot see would hold its blocks until they finish,
    // and they might never get the blocks to do so).
    residents_.keep(g.owner, c.seq, std::move(c.processed), step_);
    c.seq = -1;
  }
}

void OutputProcessor::cancel(Generation& g) {
  for (auto& c : g.completions) finish(g, c, FinishReason::kCancelled);
}

void OutputProcessor::fail_all(std::vector<std::unique_ptr<Generation>>& active, const Error& error) {
  for (auto& g : active)
    for (auto& c : g->completions)
      if (!c.done) {
        c.detok.reset();
        c.stops.reset();
        finish(*g, c, FinishReason::kError, error);
      }
}

void OutputProcessor::emit_prompt_logprobs(Generation& g, const Completion& c) {
  if (!g.params.prompt_logprobs || c.index != 0 || !c.output.empty()) return;
  Event e;
  e.kind = Event::Kind::kPromptLogprobs;
  e.tokens.assign(g.context.begin() + 1, g.context.end());
  e.logprobs = std::move(g.prompt_logprobs);
  e.has_logprobs = true;
  g.pending.push_back(std::move(e));
}

bool OutputProcessor::take(Generation& g, Completion& c, Result<SampleResult>& sampled) {
  const SamplingParams& p = g.params;
  auto end = [&](FinishReason reason, std::optional<Error> error = std::nullopt) {
    finish(g, c, reason, std::move(error));
    return false;
  };
  if (!sampled) return end(FinishReason::kError, sampled.error());
  const int32_t token = sampled.value().token;
  c.output.push_back(token);
  if (auto a = c.sampling->append_output(token); !a) return end(FinishReason::kError, a.error());
  c.to_feed = {token};
  c.decoding = true;
  if (c.matcher) {
    if (auto a = c.matcher->advance(token); !a) return end(FinishReason::kError, a.error());
    c.mask_ready = false;
  }

  Event e;
  e.completion = c.index;
  e.tokens = {token};
  if (sampled.value().logprobs) {
    e.has_logprobs = true;
    e.logprobs.push_back(std::move(*sampled.value().logprobs));
  }
  bool stopped_by_string = false;
  if (c.detok) {
    auto piece = c.detok->push(token);
    std::string text = piece ? std::move(piece).value() : std::string();
    if (c.stops) {
      auto fed = c.stops->feed(text, stop_strings_armed(p, c.sampling->num_generated()));
      text = std::move(fed.text);
      stopped_by_string = fed.match.has_value();
    }
    c.text += text;
    e.text = std::move(text);
  }
  g.pending.push_back(std::move(e));
  if (stopped_by_string) return end(FinishReason::kStop);
  if (auto stop = check_token_stop(p, eos_ids_, token, c.sampling->num_generated())) return end(stop->reason);
  if (c.matcher && c.matcher->is_terminated()) return end(FinishReason::kStop);  // even with ignore_eos
  if (static_cast<int64_t>(c.processed.size()) + 1 >= max_context_) return end(FinishReason::kLength);
  return c.matcher.has_value();
}

OutputProcessor::Delivery OutputProcessor::end_generation(Generation& g) {
  Completion& c0 = g.completions[0];
  const bool keep = g.joins_context(c0.reason);
  if (keep && c0.seq >= 0) {
    residents_.keep(g.owner, c0.seq, std::move(c0.processed), step_);
    c0.seq = -1;
  }
  c0.close_state(table_);
  Event done;
  done.kind = Event::Kind::kDone;
  done.seed = g.seed;
  g.pending.push_back(std::move(done));
  return Delivery{g.sink, std::move(g.pending), true, keep, std::move(c0.output), std::move(c0.text)};
}

void OutputProcessor::retire(std::vector<std::unique_ptr<Generation>>& active) {
  for (auto it = active.begin(); it != active.end();) {
    Generation& g = **it;
    if (g.done()) {
      deliveries_.push_back(end_generation(g));
      it = active.erase(it);
    } else {
      if (!g.pending.empty()) deliveries_.push_back(Delivery{g.sink, std::move(g.pending), false, false, {}, {}});
      g.pending.clear();
      ++it;
    }
  }
}

void OutputProcessor::deliver() {
  for (Delivery& d : deliveries_)
    d.sink->deliver(std::move(d.events), d.ended, d.joins ? &d.output : nullptr, d.joins ? &d.text : nullptr);
  deliveries_.clear();
}

void OutputProcessor::deliver_cancelled(Generation& g) {
  std::vector<Event> events;
  auto cancelled = [&](int32_t index, size_t generated) {
    Event e;
    e.kind = Event::Kind::kFinished;
    e.completion = index;
    e.reason = FinishReason::kCancelled;
    e.seed = g.seed;
    e.prompt_tokens = g.context.size();
    e.completion_tokens = generated;
    events.push_back(std::move(e));
  };
  // A generation not admitted yet has no completions: each of its n still ends with an event.
  if (!g.admitted)
    for (int32_t i = 0; i < g.params.n; ++i) cancelled(i, 0);
  for (auto& c : g.completions)
    if (!c.done) cancelled(c.index, c.output.size());
  Event done;
  done.kind = Event::Kind::kDone;
  done.seed = g.seed;
  events.push_back(std::move(done));
  g.sink->deliver(std::move(events), true, nullptr, nullptr);
}

}  // namespace deepinfer
