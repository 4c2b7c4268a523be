#include "backend/forward_batch.h"

namespace deepinfer {

void ForwardBatch::add_sequence(int32_t slot, int32_t n_past, const int32_t* ids, int32_t n,
                                const std::vector<int32_t>& blocks, Logits logits) {
  SequenceStep s;
  s.slot = slot;
  s.first_row = rows();
  s.n_tokens = n;
  s.n_past = n_past;
  s.table_offset = static_cast<int32_t>(block_tables.size());
  s.n_blocks = static_cast<int32_t>(blocks.size());
  block_tables.insert(block_tables.end(), blocks.begin(), blocks.end());
  const int32_t seq = static_cast<int32_t>(seqs.size());
  for (int32_t i = 0; i < n; ++i) {
    tokens.push_back(ids[i]);
    positions.push_back(n_past + i);
    row_seq.push_back(seq);
    if (logits == Logits::kAll || (logits == Logits::kLast && i == n - 1)) logit_rows.push_back(s.first_row + i);
  }
  seqs.push_back(s);
}

}  // namespace deepinfer
