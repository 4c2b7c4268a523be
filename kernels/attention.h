// Attention over the sliding window and the compressed entries: fp32 (attention.cu), on the tensor
// cores with mma.sync (attention_mma.cu) and on Hopper's warpgroup MMA from a bf16 key table
// (attention_wgmma.cu, key_table.cu).
#pragma once

#include "launch.h"
#include "key_table.h"

namespace deepinfer::kernels {

// Sliding window + compressed entries (all visible ones, or `selected` [rows, sel_cols] when given)
// with per-head sinks. head_dim <= 512. n_splits > 1 shares each (row, head)'s keys among that many
// blocks (for small batches, where rows x heads blocks leave the GPU idle) and merges them after;
// partial then holds rows * heads * n_splits * (head_dim + 2) floats. With unrope.inv_freq each output
// head's rope channels are rotated back by the row's position (in the merge when there is one).
cudaError_t attention(const float* q, const float* kv, const float* sinks, const int32_t* selected, int64_t sel_cols,
                      int heads, BatchDev b, StateDev st, LayerDev L, float* out, Stream s, int n_splits = 1,
                      float* partial = nullptr, RopeDev unrope = {});
// The same attention on the tensor cores for head_dim 512 (bf16 operands, fp32 accumulation and
// softmax; attention_mma.cu): each key is read once per group of 64 heads. Supported when
// the state layout keeps every key row 16-byte aligned. partial: rows * heads * n_splits * 514 floats.
// head_tile: heads a block, 64 or 16 (decode: 4x the blocks, a quarter of the query staging and
// partial output each).
bool attention_mqa_supported(const StateDev& st, const LayerDev& L);
// out_b16 (n_splits 1, head_tile 64): the output in bf16 there instead of out (prefill, for a
// product that reads bf16), rotated back (unrope) on the bf16 values.
cudaError_t attention_mqa(const float* q, const float* kv, const float* sinks, const int32_t* selected, int64_t sel_cols, int heads,
                          BatchDev b, StateDev st, LayerDev L, float* out, Stream s, int n_splits, float* partial,
                          RopeDev unrope = {}, int head_tile = 64, bf16_t* out_b16 = nullptr);
// The same attention as attention_mqa (head_dim 512, bf16 operands, fp32 softmax; attention_wgmma.cu)
// from a kAttention table.
// The output in bf16 (rows x heads x 512), rotated back by unrope when given. A block a
// multiprocessor walks the (row, 64 heads) items, each item's query loaded while the one before
// ends. The query from qb (bf16) or q (fp32): exactly one of them. With qn (qb only; rope_dim <= 64), each query head is
// rotated by its row's position as it is loaded and its scores scaled by its 1 / rms (an RMS norm
// without weight), instead of rms_norm_pair normalising and rotating the query before.
struct QueryNorm {
  float eps = -1.0f;  // < 0: the query is read as it is
  RopeDev rope;
};
cudaError_t attention_wgmma(const float* q, const bf16_t* qb, KeyTableDev t, const float* sinks, const int32_t* selected,
                            int64_t sel_cols, int heads, BatchDev b, StateDev st, LayerDev L, bf16_t* out, RopeDev unrope,
                            QueryNorm qn, Stream s);
// scores[r - row_begin][w] for the visible indexer keys of rows [row_begin, row_begin + n_rows);

}  // namespace deepinfer::kernels
