// Runs the model for a set of sequences whose state it tracks (slot, block table, length: a
// SequenceTable of src/cache): the one place that turns "these sequences get these tokens" into a
// ForwardBatch. Used by the engine's step loop and by tools (logits, perplexity). Not thread-safe.
#pragma once

#include "backend/backend.h"
#include "cache/sequence_table.h"
#include "model/deepseek_v4.h"
#include "util/result.h"

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer {

struct RunnerOptions {
  int32_t max_sequences = 64;      // state slots
  int64_t state_bytes = 0;         // block pool size; 0: enough for max_context tokens per sequence
  int64_t max_context = 4096;      // used when state_bytes is 0
  int32_t block_tokens = 0;        // 0: the model's default
  // With state_bytes 0 on a backend that knows its free memory (a GPU): the pool takes at most this
  // fraction of what is free after `reserve_bytes` (scratch of the forwards); 0 keeps it unbounded.
  double free_memory_fraction = 0.0;
  int64_t reserve_bytes = int64_t(4) << 30;
  bool graphs = true;              // let the backend replay decode steps as captured graphs
};

class ModelRunner {
 public:
  static Result<std::unique_ptr<ModelRunner>> create(DeepseekV4& model, Backend& backend, const RunnerOptions& options);

  const StateLayout& layout() const { return layout_; }
  const StatePool& pool() const { return table_.pool(); }
  // The sequences' slots and block tables.
  SequenceTable& sequences() { return table_; }
  const SequenceTable& sequences() const { return table_; }
  // Tokens of context the whole block pool holds.
  int64_t capacity_tokens() const { return table_.capacity_tokens(); }

  // A new, empty sequence (kCapacity when no slot is free).
  Result<int32_t> open_sequence();
  // Frees the sequence's slot and blocks. The id becomes invalid.
  void close_sequence(int32_t id);
  // Frees its blocks and empties its state but keeps the slot (the sequence restarts at length 0).
  void reset_sequence(int32_t id);
  int32_t length(int32_t id) const { return table_.length(id); }
  // Benchmarks: the sequence goes on as if `n` tokens had been processed (its blocks grow to hold
  // them); its state is whatever the backend holds there, e.g. after Backend::randomize_state.
  Result<void> set_synthetic_length(int32_t id, int32_t n);
  int32_t blocks_held(int32_t id) const { return table_.blocks_held(id); }

  struct Feed {
    int32_t sequence = 0;
    const int32_t* ids = nullptr;
    int32_t n = 0;
    ForwardBatch::Logits logits = ForwardBatch::Logits::kLast;
  };
  // One forward over all feeds (each sequence at most once). Returns the logits rows in feed order,
  // valid until the next step (the caller may change them). On error no sequence advances (blocks grown for it are kept, which
  // is harmless).
  Result<std::span<float>> step(const std::vector<Feed>& feeds);
  // The same forward for greedy decoding: returns the best token of each logits row
  // (DeepseekV4::forward_greedy) instead of the rows, which stay on the backend.
  Result<std::span<const int32_t>> step_greedy(const std::vector<Feed>& feeds);
  // The same forward leaving the logits rows on the backend (DeepseekV4::forward_logits), for
  // sample_rows: sampling without copying them to the host. Valid until the next step.
  Result<Tensor> step_on_backend(const std::vector<Feed>& feeds);
  // Backend::sample_rows on the rows step_on_backend returned.
  Result<void> sample_rows(Tensor logits, std::span<const RowSampling> rows, std::vector<Result<SampleResult>>& out) {
    return backend_.sample_rows(logits, rows, out);
  }

 private:
  ModelRunner(DeepseekV4& model, Backend& backend, StateLayout layout, int32_t slots, int32_t blocks);
  Result<void> build_batch(const std::vector<Feed>& feeds);
  // After a forward: each fed sequence holds its new positions.
  void advance(const std::vector<Feed>& feeds);

  DeepseekV4& model_;
  Backend& backend_;
  StateLayout layout_;
  SequenceTable table_;
  ForwardBatch batch_;
};

}  // namespace deepinfer
