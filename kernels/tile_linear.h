// Dense products whose outputs do not depend on the number of rows: the batch-invariant mode's
// products (tile_linear.cu on the expert tile kernels; the wgmma ones in moe_wgmma.cu).
#pragma once

#include "launch.h"

namespace deepinfer::kernels {

// y[g] [rows, n] (rows ldy apart; y + g * n) = x[g] [rows, k] (rows ldx apart; x + g * k) @ w[g]^T,
// w [groups, n, k] contiguous; fp32 accumulation. Each output sums K in chunks of 512 (a chunk's
// mma.sync steps from zero, the chunks added in order), so a few rows spread their chunks over blocks
// of their own, into part (tile_linear_scratch floats; null where that is 0), and many rows sum them
// in one block, to the same bits. (K % 8 != 0 or unaligned operands: the synchronous kernel, whole K.)
cudaError_t tile_linear(const bf16_t* x, int64_t rows, int64_t k, int64_t ldx, const bf16_t* w, int64_t n, int groups, float* y,
                        int64_t ldy, float* part, Stream s);
int64_t tile_linear_scratch(int64_t rows, int64_t k, int64_t n, int groups);
// The same on Hopper's wgmma (the expert kernel over 128-row tiles; sm_90a: wgmma_supported()), where
// k % 64 == 0, n % 128 == 0 and the operands are 16-byte aligned: its own sums, also independent of
// the row count. Where the product has few column blocks, K is summed in up to 4 chunks in order (by
// the shape alone): one row tile runs them as blocks of their own into part
// (tile_linear_wgmma_scratch floats; null where that is 0), more tiles sum them in one block.
bool tile_linear_wgmma_supported(int64_t k, int64_t ldx, int64_t n, int64_t ldy, const bf16_t* x, const bf16_t* w, const float* y);
cudaError_t tile_linear_wgmma(const bf16_t* x, int64_t rows, int64_t k, int64_t ldx, const bf16_t* w, int64_t n, int groups, float* y,
                              int64_t ldy, float* part, Stream s);
int64_t tile_linear_wgmma_scratch(int64_t rows, int64_t k, int64_t n, int groups);
// y[r, c] (rows ldy apart) = part[0][r][c] + part[1][r][c] + ... in chunk order; part [chunks][rows][cols].
cudaError_t sum_chunks(const float* part, int64_t rows, int64_t cols, int chunks, float* y, int64_t ldy, Stream s);
// tile_gate_up's product on wgmma (d % 64 == 0, inter % 64 == 0, 16-byte aligned operands).
cudaError_t tile_gate_up_wgmma(const bf16_t* x, int64_t rows, int64_t d, const bf16_t* w1, const bf16_t* w3, int64_t inter, float limit,
                               bf16_t* h, Stream s);
// h [rows, inter] (bf16) = clamped SwiGLU(x @ w1^T, x @ w3^T), x [rows, d] contiguous.
cudaError_t tile_gate_up(const bf16_t* x, int64_t rows, int64_t d, const bf16_t* w1, const bf16_t* w3, int64_t inter, float limit,
                         bf16_t* h, Stream s);
// fp32 weights and activations, each output summed in an order that depends on k alone (fmaf over
// fixed chunks of k, the chunks added in order). part: tile_linear_f32_scratch floats (null if 0).
cudaError_t tile_linear_f32(const float* x, int64_t rows, int64_t k, int64_t ldx, const float* w, int64_t n, int groups, float* y,
                            int64_t ldy, float* part, Stream s);
int64_t tile_linear_f32_scratch(int64_t rows, int64_t k, int64_t n, int groups);

}  // namespace deepinfer::kernels
