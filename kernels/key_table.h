// The bf16 key tables Hopper's warpgroup MMA kernels read (key_table.cu): the prefill attention's
// (attention_wgmma.cu) and the indexer's (indexer_wgmma.cu).
#pragma once

#include "launch.h"

namespace deepinfer::kernels {

// Per sequence of the forward, a table's rows are, for kAttention: its ring (when it has a past) then
// its compressed entries (512 wide); for kIndexer: its compressed index keys. key_table_rows of them a sequence; key_table_build fills the
// table and seq_first (each sequence's first table row). kv: this forward's key rows in bf16
// ([rows][512]; the attention's, null for the indexer).
struct KeyTableDev {
  const bf16_t* kv = nullptr;
  const bf16_t* rows = nullptr;
  const int32_t* seq_first = nullptr;
};
enum class KeyTableKind { kAttention, kIndexer };
int64_t key_table_rows(int32_t n_past, int32_t n_tokens, const LayerDev& L, KeyTableKind kind);
cudaError_t key_table_build(BatchDev b, StateDev st, LayerDev L, KeyTableKind kind, int64_t max_seq_rows, bf16_t* rows, int32_t* seq_first,
                            Stream s);

}  // namespace deepinfer::kernels
