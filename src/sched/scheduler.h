// Continuous batching decisions for one engine step, as a pure function of the sequences' needs and
// the free state memory: which sequences process how many tokens, and whose state is given up.
// CPU-only; knows nothing of models or devices. Decisions name sequences by their index in the
// input, so the caller maps them back to its own records without a lookup.
//
// Policy (vLLM-like):
// - every decoding sequence (one token to process) runs each step, oldest first;
// - prefills then get chunks of at most the remaining token budget, in arrival order; a prefill that
//   cannot start (no slot or blocks) stops later ones from starting, so none starves;
// - when blocks run out, idle sequences (state kept between turns) are evicted, least recently used
//   first, then running sequences are preempted newest first (their state is freed and recomputed
//   later); a sequence that cannot fit even alone is reported as over capacity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace deepinfer {

struct SchedSequence {
  int32_t to_feed = 0;      // tokens waiting to be processed (0: idle, state kept for later)
  int32_t length = 0;       // tokens already in its state
  int32_t blocks_held = 0;
  bool has_slot = false;
  bool decoding = false;    // produces one token per step (its prefill is done)
  uint64_t order = 0;       // arrival order for running sequences, last use for idle ones (smaller = older)
};

struct SchedLimits {
  int32_t max_batched_tokens = 2048;
  int32_t block_tokens = 256;
  int32_t free_blocks = 0;
  int32_t free_slots = 0;
  int32_t total_blocks = 0;
};

struct SchedFeed {
  size_t index = 0;   // into the sequences scheduled
  int32_t n = 0;      // tokens to process this step
  int32_t blocks = 0; // blocks the sequence must hold for it
};

struct SchedDecision {
  std::vector<SchedFeed> feeds;
  // Indices into the sequences scheduled:
  std::vector<size_t> evict;          // idle sequences whose state is dropped
  std::vector<size_t> preempt;        // running sequences whose state is dropped (recomputed later)
  std::vector<size_t> over_capacity;  // sequences that cannot grow even with the whole pool
};

SchedDecision schedule_step(const std::vector<SchedSequence>& sequences, const SchedLimits& limits);

}  // namespace deepinfer
