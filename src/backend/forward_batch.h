// One forward step as the scheduler hands it to the model: the new tokens of several sequences
// (prefill chunks and single decode tokens mixed), where each sequence's state lives, and which rows
// need logits. Host memory; backends copy what they need to the device.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer {

struct SequenceStep {
  int32_t slot = 0;          // state slot of the sequence
  int32_t first_row = 0;     // its first token row in the batch
  int32_t n_tokens = 0;      // new tokens this step (rows first_row .. first_row + n_tokens - 1)
  int32_t n_past = 0;        // tokens already in its state = position of its first new token
  int32_t table_offset = 0;  // its block table: block_tables[table_offset .. + n_blocks)
  int32_t n_blocks = 0;
};

struct ForwardBatch {
  std::vector<int32_t> tokens;     // [rows]
  std::vector<int32_t> positions;  // [rows]
  std::vector<int32_t> row_seq;    // [rows] index into seqs
  std::vector<SequenceStep> seqs;
  std::vector<int32_t> block_tables;
  std::vector<int32_t> logit_rows;  // rows whose logits are returned, in this order
  // The forward returns the best token of each logit row instead of its logits (greedy decoding;
  // DeepseekV4::forward_greedy). Part of the batch because a captured graph includes that step.
  bool greedy_tokens = false;

  int32_t rows() const { return static_cast<int32_t>(tokens.size()); }

  // Appends a sequence's new tokens (positions n_past, n_past+1, ...); `logits` selects which of
  // them produce logits: none, the last, or all.
  enum class Logits { kNone, kLast, kAll };
  void add_sequence(int32_t slot, int32_t n_past, const int32_t* ids, int32_t n, const std::vector<int32_t>& blocks,
                    Logits logits);
};

}  // namespace deepinfer
