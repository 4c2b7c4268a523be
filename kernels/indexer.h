// The lightning indexer's scores (indexer.cu: fp32 and mma.sync; indexer_wgmma.cu) and the top-k
// of each row (indexer.cu).
#pragma once

#include "launch.h"
#include "key_table.h"

namespace deepinfer::kernels {

// max_visible bounds the visible count of those rows.
cudaError_t indexer_scores(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows,
                           int64_t max_visible, BatchDev b, StateDev st, LayerDev L, float* scores, int64_t ld,
                           Stream s);
// The same scores on the tensor cores (bf16 operands, fp32 accumulation)
// for up to 64 heads of index_dim 16..128 (a multiple of 16). q 16-byte aligned. 64+ rows of
// sequences averaging 4+ rows (prefill chunks) are scored 4 rows a block (each key tile loaded once
// for them), others a row a block.
bool indexer_scores_mqa_supported(int heads, const StateDev& st, const LayerDev& L);
cudaError_t indexer_scores_mqa(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows, int64_t max_visible,
                               BatchDev b, StateDev st, LayerDev L, float* scores, int64_t ld, Stream s);
// The same scores on Hopper's warpgroup MMA from a kIndexer key table (kernels/indexer_wgmma.cu):
// prefill rows (sequences of 4+ rows), up to 64 heads of index_dim 64 or 128 (on a device where
// wgmma_supported()).
bool indexer_scores_wgmma_supported(int heads, const LayerDev& L);
cudaError_t indexer_scores_wgmma(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows, int64_t max_visible,
                                 BatchDev b, LayerDev L, KeyTableDev t, float* scores, int64_t ld, Stream s);
// Top k of each row's visible scores (ties: lower index first), in index order, -1 padded. k <= 4096.
// Rows of up to 16 K entries are held in registers; longer ones are read from memory every pass.
cudaError_t topk_rows(const float* scores, int64_t ld, int64_t row_begin, int64_t n_rows, int rate, BatchDev b, int k,
                      int32_t* out, Stream s);

}  // namespace deepinfer::kernels
