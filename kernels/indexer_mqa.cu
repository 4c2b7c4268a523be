// The lightning indexer's scores on the tensor cores (the backend's bf16 mode): per row,
// score[e] = sum over heads h of relu(q_h . k_e) / sqrt(dim) * w_h / sqrt(heads), where all heads
// share each indexer key k_e, so one row's scores are a (heads x dim) by (dim x visible) product.
// One block per (row, 64 keys); four warps of 16 heads each; bf16 operands, fp32 accumulation; the
// head sum is reduced across lanes, then across warps in a fixed order (deterministic).
#include "common.cuh"
#include "mma.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kHeads = 64, kMaxDim = 128, kTile = 64, kThreads = 128;
constexpr int kLd = kMaxDim + 8;  // bf16 row stride: ldmatrix rows hit distinct banks

// grid (rows, key chunks of tiles_per_block * 64): the block stages its row's queries once, then
// scores its chunk one 64-key tile at a time.
__global__ void __launch_bounds__(kThreads) indexer_scores_mqa_kernel(const float* __restrict__ q, const float* __restrict__ weights,
                                                                     int heads, int64_t row_begin, BatchDev b, StateDev st, LayerDev L,
                                                                     int tiles_per_block, float* __restrict__ scores, int64_t ld) {
  pdl_begin();
  __shared__ __align__(16) __nv_bfloat16 Qs[kHeads * kLd];
  __shared__ __align__(16) __nv_bfloat16 Ks[kTile * kLd];
  __shared__ float ws[kHeads];
  __shared__ float part[kThreads / 32][kTile];
  __shared__ const float* kp[kTile];
  const int64_t r = row_begin + blockIdx.x;
  const int32_t visible = (b.positions[r] + 1) / L.rate;
  const int64_t chunk0 = static_cast<int64_t>(blockIdx.y) * tiles_per_block * kTile;
  if (chunk0 >= visible) return;
  const SeqInfo sq = b.seqs[b.row_seq[r]];
  const int dim = L.index_dim, d4 = dim / 4;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;

  if (tid < kHeads)
    ws[tid] = tid < heads ? weights[r * heads + tid] / sqrtf(static_cast<float>(heads)) / sqrtf(static_cast<float>(dim)) : 0.0f;
  const float* qrow = q + r * heads * dim;
  for (int idx = tid; idx < kHeads * d4; idx += kThreads) {
    const int h = idx / d4, c = (idx % d4) * 4;
    store_bf16x4(Qs + h * kLd + c, h < heads ? *reinterpret_cast<const float4*>(qrow + static_cast<int64_t>(h) * dim + c)
                                             : make_float4(0, 0, 0, 0));
  }
  for (int tile = 0; tile < tiles_per_block; ++tile) {
    const int64_t e0 = chunk0 + static_cast<int64_t>(tile) * kTile;
    if (e0 >= visible) break;
    __syncthreads();  // the previous tile's readers are done with kp, Ks and part
    if (tid < kTile) {
      const int64_t e = e0 + tid;
      kp[tid] = e < visible ? entry_ptr(b, st, L, sq, static_cast<int32_t>(e), L.index_key_offset, dim) : nullptr;
    }
    __syncthreads();
    for (int idx = tid; idx < kTile * d4; idx += kThreads) {
      const int key = idx / d4, c = (idx % d4) * 4;
      const float* kr = kp[key];
      store_bf16x4(Ks + key * kLd + c, kr ? *reinterpret_cast<const float4*>(kr + c) : make_float4(0, 0, 0, 0));
    }
    __syncthreads();

    float acc[kTile / 8][4];
#pragma unroll
    for (int i = 0; i < kTile / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    for (int k0 = 0; k0 < dim; k0 += 16) {
      uint32_t a[4];
      ldmatrix_x4(a, Qs + (warp * 16 + (lane & 15)) * kLd + k0 + (lane >> 4) * 8);
#pragma unroll
      for (int np = 0; np < kTile / 16; ++np) {
        uint32_t bk[4];
        ldmatrix_x4(bk, Ks + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * kLd + k0 + ((lane >> 3) & 1) * 8);
        mma_bf16(acc[2 * np], a, bk[0], bk[1]);
        mma_bf16(acc[2 * np + 1], a, bk[2], bk[3]);
      }
    }
    const float wa = ws[warp * 16 + g], wb = ws[warp * 16 + g + 8];
#pragma unroll
    for (int nt = 0; nt < kTile / 8; ++nt) {
      float v0 = fmaxf(acc[nt][0], 0.0f) * wa + fmaxf(acc[nt][2], 0.0f) * wb;
      float v1 = fmaxf(acc[nt][1], 0.0f) * wa + fmaxf(acc[nt][3], 0.0f) * wb;
#pragma unroll
      for (int o = 4; o < 32; o <<= 1) {
        v0 += __shfl_xor_sync(kFull, v0, o);
        v1 += __shfl_xor_sync(kFull, v1, o);
      }
      if (g == 0) {
        part[warp][nt * 8 + 2 * t4] = v0;
        part[warp][nt * 8 + 2 * t4 + 1] = v1;
      }
    }
    __syncthreads();
    if (tid < kTile && e0 + tid < visible)
      scores[static_cast<int64_t>(blockIdx.x) * ld + e0 + tid] = ((part[0][tid] + part[1][tid]) + part[2][tid]) + part[3][tid];
  }
}

}  // namespace

bool indexer_scores_mqa_supported(int heads, const StateDev& st, const LayerDev& L) {
  return heads >= 1 && heads <= kHeads && L.index_dim >= 16 && L.index_dim <= kMaxDim && L.index_dim % 16 == 0 &&
         st.block_floats % 4 == 0 && L.index_key_offset % 4 == 0 && reinterpret_cast<uintptr_t>(st.blocks) % 16 == 0;
}

cudaError_t indexer_scores_mqa(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows, int64_t max_visible,
                               BatchDev b, StateDev st, LayerDev L, float* scores, int64_t ld, cudaStream_t s) {
  if (n_rows <= 0 || max_visible <= 0) return cudaSuccess;
  if (!indexer_scores_mqa_supported(heads, st, L) || reinterpret_cast<uintptr_t>(q) % 16 != 0) return cudaErrorInvalidValue;
  // 64+ rows: 8 tiles per block, so that each row's queries are staged 8x less often; small batches
  // keep one tile per block to spread over the GPU.
  const int64_t tiles = (max_visible + kTile - 1) / kTile;
  const int per_block = n_rows >= 64 ? 8 : 1;
  const int64_t chunks = (tiles + per_block - 1) / per_block;
  if (chunks > 65535 || n_rows > 2147483647) return cudaErrorInvalidValue;
  launch(indexer_scores_mqa_kernel, dim3(static_cast<unsigned>(n_rows), static_cast<unsigned>(chunks)), kThreads, 0, s)(
      q, weights, heads, row_begin, b, st, L, per_block, scores, ld);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
