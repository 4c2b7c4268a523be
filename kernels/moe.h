// Mixture of experts (moe.cu, moe_wgmma.cu): routing, the token permutation into expert tiles, the
// tile products, the weighted combine. Decode rows run on gemv.h's expert kernels instead.
#pragma once

#include "dequantize.h"
#include "launch.h"

namespace deepinfer::kernels {

// --- MoE (moe.cu)
enum class ScoreFunc : int { kSqrtSoftplus = 0, kSigmoid = 1, kSoftmax = 2 };
// logits [rows, n_exp] -> experts [rows, top_k] and weights [rows, top_k]. tid2eid [table_rows, top_k]:
// hash routing by token id. n_exp <= 1024.
cudaError_t route(const float* logits, int64_t rows, int n_exp, const float* bias, const int32_t* tid2eid,
                  int64_t table_rows, const int32_t* tokens, ScoreFunc score, int top_k, float scaling, int32_t* experts,
                  float* weights, Stream s);
// Decode: the gate product (x [rows, d] · gate [n_exp, d]^T, fp32, into logits [rows, n_exp]) and the
// routing in one launch, whose last block routes; counter: one unsigned, zero, left zero.
inline constexpr int kGateRouteMaxRows = 4;
bool gate_route_supported(const float* x, int64_t rows, int64_t d, const float* gate);
cudaError_t gate_route(const float* x, int64_t rows, int64_t d, const float* gate, int n_exp, const float* bias, const int32_t* tid2eid,
                       int64_t table_rows, const int32_t* tokens, ScoreFunc score, int top_k, float scaling, float* logits,
                       unsigned* counter, int32_t* experts, float* weights, Stream s);

// Token permutation for the grouped expert GEMMs. `entries` = rows * top_k.
// Rows per tile: kMoeTileRows, or kMoeBigTileRows where experts get many rows (prefill) and weight
// reuse across rows pays (K % 8 == 0 and 16-byte aligned operands: the pipelined kernel only).
inline constexpr int kMoeTileRows = 32;
inline constexpr int kMoeBigTileRows = 128;
struct MoePlan {
  int32_t* counts;      // [n_exp]   (zeroed by moe_plan)
  int32_t* local;       // [entries] rank of each entry within its expert
  int32_t* offsets;     // [n_exp + 1]
  int32_t* pos;         // [entries] row of each entry in the permuted order (-1: invalid expert)
  int4* tiles;          // [max_tiles] (expert, row begin, row end, 0)
  int32_t* n_tiles;     // [1]
  int32_t max_tiles;    // ceil(entries / tile_rows) + min(n_exp, entries)
  int32_t tile_rows = kMoeTileRows;
  int32_t* sources = nullptr;  // [entries] (optional) the input row of each permuted row: entry / top_k
  int32_t top_k = 1;
};
cudaError_t moe_plan(const int32_t* experts, int64_t entries, int n_exp, MoePlan p, Stream s);
// pos[i] = base[experts[i]] + local[i] (-1 for an invalid expert): entries into per-expert slabs
// starting at row base[e], for batched products over slabs (after moe_plan's counts).
cudaError_t moe_slab_positions(const int32_t* experts, const int32_t* local, int64_t entries, const int32_t* base, int32_t* pos,
                               Stream s);
// xperm[pos[e]] = bf16(x[e / top_k])
cudaError_t moe_gather(const float* x, int64_t d, int64_t entries, int top_k, const int32_t* pos, bf16_t* xperm,
                       Stream s);
// h = clamped SwiGLU(xperm @ w1[e]^T, xperm @ w3[e]^T) (bf16 [entries, inter]), per tile's expert:
// a cp.async pipelined kernel where K % 8 == 0 and the operands are 16-byte aligned, else (32-row
// tiles) a synchronous one.
cudaError_t moe_gate_up(const bf16_t* xperm, const bf16_t* w1, const bf16_t* w3, int64_t d, int64_t inter, float limit,
                        const int4* tiles, const int32_t* n_tiles, int max_tiles, int tile_rows, bf16_t* h, Stream s);
// y = h @ w2[e]^T (fp32 [entries, d])
cudaError_t moe_down(const bf16_t* h, const bf16_t* w2, int64_t inter, int64_t d, const int4* tiles,
                     const int32_t* n_tiles, int max_tiles, int tile_rows, float* y, Stream s);
// The same two products on Hopper's warpgroup MMA for kMoeBigTileRows tiles (moe_wgmma.cu; d and
// inter multiples of 128, an sm_90a device: wgmma_supported()). Gate/up reads its rows from x, the
// unpermuted bf16 input, through the plan's sources (no gathered copy).
cudaError_t moe_gate_up_wgmma(const bf16_t* x, const int32_t* sources, const bf16_t* w1, const bf16_t* w3, int64_t d, int64_t inter,
                              float limit, const int4* tiles, const int32_t* n_tiles, int max_tiles, bf16_t* h, Stream s);
// Down writes y in bf16 (half the bytes the combine reads; the tolerance of bf16 products holds).
cudaError_t moe_down_wgmma(const bf16_t* h, const bf16_t* w2, int64_t inter, int64_t d, const int4* tiles, const int32_t* n_tiles,
                           int max_tiles, bf16_t* y, Stream s);
// The two wgmma products with MXFP4 expert stacks (QuantizedWeight: one expert's matrix, the others
// after it): the stored bytes decoded into the tensor cores' operands in shared memory. d and inter
// multiples of 512 (a row's scales are copied 16 bytes at a time), 16-byte aligned stacks.
bool moe_wgmma_fp4_supported(const QuantizedWeight& w1, const QuantizedWeight& w3, const QuantizedWeight& w2, int64_t d, int64_t inter);
cudaError_t moe_gate_up_wgmma_fp4(const bf16_t* x, const int32_t* sources, const QuantizedWeight& w1, const QuantizedWeight& w3, int64_t d,
                                  int64_t inter, float limit, const int4* tiles, const int32_t* n_tiles, int max_tiles, bf16_t* h,
                                  Stream s);
cudaError_t moe_down_wgmma_fp4(const bf16_t* h, const QuantizedWeight& w2, int64_t inter, int64_t d, const int4* tiles,
                               const int32_t* n_tiles, int max_tiles, bf16_t* y, Stream s);
// fp32 weights and activations (the backend's fp32 reference mode): same contracts, h fp32.
cudaError_t moe_gather_f32(const float* x, int64_t d, int64_t entries, int top_k, const int32_t* pos, float* xperm, Stream s);
cudaError_t moe_gate_up_f32(const float* xperm, const float* w1, const float* w3, int64_t d, int64_t inter, float limit,
                            const int4* tiles, const int32_t* n_tiles, int max_tiles, float* h, Stream s);
cudaError_t moe_down_f32(const float* h, const float* w2, int64_t inter, int64_t d, const int4* tiles, const int32_t* n_tiles,
                         int max_tiles, float* y, Stream s);
// out[t] += Σ_i weights[t, i] * y[pos[t * top_k + i]] in i order (pos null: y[t * top_k + i]; a negative
// position: no term)
cudaError_t moe_combine(const float* y, const int32_t* pos, const float* weights, int64_t rows, int top_k, int64_t d,
                        float* out, Stream s);
cudaError_t moe_combine(const bf16_t* y, const int32_t* pos, const float* weights, int64_t rows, int top_k, int64_t d,
                        float* out, Stream s);

}  // namespace deepinfer::kernels
