#include "sched/scheduler.h"

#include <algorithm>
#include <numeric>

namespace deepinfer {
namespace {

int32_t blocks_for(int64_t tokens, int32_t block_tokens) {
  return static_cast<int32_t>((tokens + block_tokens - 1) / block_tokens);
}

struct Planner {
  const SchedLimits& lim;
  std::vector<SchedSequence> seqs;  // working copy
  std::vector<bool> gone;           // evicted or preempted this step
  std::vector<bool> fed;
  int32_t free_blocks, free_slots;
  SchedDecision out;

  Planner(const std::vector<SchedSequence>& s, const SchedLimits& l)
      : lim(l), seqs(s), gone(s.size()), fed(s.size()), free_blocks(l.free_blocks), free_slots(l.free_slots) {}

  void drop(size_t i, std::vector<size_t>& list) {
    free_blocks += seqs[i].blocks_held;
    if (seqs[i].has_slot) ++free_slots;
    seqs[i].blocks_held = 0;
    seqs[i].has_slot = false;
    gone[i] = true;
    list.push_back(i);
  }

  // Drops the least recently used idle sequence's state. False when there is none.
  bool evict_idle(size_t self) {
    size_t best = seqs.size();
    for (size_t i = 0; i < seqs.size(); ++i)
      if (!gone[i] && i != self && seqs[i].to_feed == 0 && (seqs[i].blocks_held || seqs[i].has_slot) &&
          (best == seqs.size() || seqs[i].order < seqs[best].order))
        best = i;
    if (best == seqs.size()) return false;
    drop(best, out.evict);
    return true;
  }

  // Frees memory from someone other than `self`: an idle sequence, else the newest running one that
  // arrived after `self`. False when nothing is left to take.
  bool reclaim(size_t self) {
    if (evict_idle(self)) return true;
    size_t best = seqs.size();
    for (size_t i = 0; i < seqs.size(); ++i)
      if (!gone[i] && !fed[i] && seqs[i].order > seqs[self].order && seqs[i].to_feed > 0 &&
          (seqs[i].blocks_held || seqs[i].has_slot) && (best == seqs.size() || seqs[i].order > seqs[best].order))
        best = i;
    if (best == seqs.size()) return false;
    drop(best, out.preempt);
    return true;
  }

  // Tries to give sequence i a slot and blocks for `n` more tokens, reclaiming memory when
  // `may_reclaim`. Returns the blocks it then holds, or -1.
  int32_t reserve(size_t i, int32_t n, bool may_reclaim) {
    SchedSequence& s = seqs[i];
    const int32_t need_blocks = blocks_for(static_cast<int64_t>(s.length) + n, lim.block_tokens);
    for (;;) {
      const bool slot_ok = s.has_slot || free_slots > 0;
      const int32_t extra = std::max(0, need_blocks - s.blocks_held);
      if (slot_ok && extra <= free_blocks) {
        if (!s.has_slot) {
          --free_slots;
          s.has_slot = true;
        }
        free_blocks -= extra;
        s.blocks_held += extra;
        return s.blocks_held;
      }
      if (!may_reclaim || !reclaim(i)) return -1;
    }
  }
};

}  // namespace

SchedDecision schedule_step(const std::vector<SchedSequence>& sequences, const SchedLimits& limits) {
  Planner p(sequences, limits);
  std::vector<size_t> order(sequences.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sequences[a].order < sequences[b].order; });

  // A sequence that cannot fit its next token even in the whole pool can never proceed.
  for (size_t i : order) {
    const SchedSequence& s = sequences[i];
    if (s.to_feed > 0 && blocks_for(static_cast<int64_t>(s.length) + std::min(s.to_feed, 1), limits.block_tokens) > limits.total_blocks) {
      p.gone[i] = true;
      p.out.over_capacity.push_back(i);
    }
  }

  int32_t budget = limits.max_batched_tokens;
  for (size_t i : order) {  // decodes: every one runs
    if (p.gone[i] || !sequences[i].decoding || sequences[i].to_feed <= 0) continue;
    const int32_t n = sequences[i].to_feed;
    const int32_t held = p.reserve(i, n, /*may_reclaim=*/true);
    if (held < 0) {  // only itself is left to give memory: give up its state, recompute later
      p.drop(i, p.out.preempt);
      continue;
    }
    p.fed[i] = true;
    p.out.feeds.push_back({i, n, held});
    budget -= n;
  }
  for (size_t i : order) {  // prefills: chunks in arrival order, while the budget lasts
    if (budget <= 0) break;
    if (p.gone[i] || p.fed[i] || sequences[i].decoding || sequences[i].to_feed <= 0) continue;
    SchedSequence& s = p.seqs[i];
    int32_t n = std::min(s.to_feed, budget);
    // A prefill never preempts running sequences: it shrinks its chunk to the free blocks, takes
    // idle state, or waits.
    int32_t held = p.reserve(i, n, /*may_reclaim=*/false);
    while (held < 0) {
      const int32_t fit = static_cast<int32_t>(static_cast<int64_t>(s.blocks_held + p.free_blocks) * limits.block_tokens - s.length);
      if ((s.has_slot || p.free_slots > 0) && fit > 0 && fit < n) {
        n = fit;
      } else if (!p.evict_idle(i)) {
        break;
      }
      held = p.reserve(i, n, false);
    }
    if (held < 0) break;  // waits; later arrivals wait behind it
    p.fed[i] = true;
    p.out.feeds.push_back({i, n, held});
    budget -= n;
  }
  return p.out;
}

}  // namespace deepinfer
