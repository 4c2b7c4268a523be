// The lightning indexer's scores on the tensor cores (the backend's bf16 mode): per row,
// score[e] = sum over heads h of relu(q_h . k_e) / sqrt(dim) * w_h / sqrt(heads), where all heads
// share each indexer key k_e, so one row's scores are a (heads x dim) by (dim x visible) product.
// One block per (R rows, chunk of 64-key tiles); four warps of 16 heads per row; bf16 operands, fp32
// accumulation; the head sum is reduced across lanes, then across a row's warps in a fixed order
// (deterministic, the same for every R). R = 4 for prefill: the rows of one sequence see the same
// keys, so a key tile is loaded and converted once for four rows (at 32K context the key loads,
// not the products, were the kernel's cost).
#include "common.cuh"
#include "mma.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kHeads = 64, kMaxDim = 128, kTile = 64;
constexpr int kLd = kMaxDim + 8;  // bf16 row stride: ldmatrix rows hit distinct banks


constexpr size_t smem_bytes(int R) {
  return sizeof(__nv_bfloat16) * static_cast<size_t>((R + 1) * kHeads) * kLd + sizeof(float) * (R * kHeads + 4 * R * kTile) +
         sizeof(const float*) * kTile;
}

// grid (row groups of R, key chunks of tiles_per_block * 64): the block stages its rows' queries
// once, then scores its chunk one 64-key tile at a time. Rows of different sequences (a packed
// batch's boundary) do not share keys: each then gets its own pass over the tile.
template <int R>
__global__ void __launch_bounds__(R * 128) indexer_scores_mqa_kernel(const float* __restrict__ q, const float* __restrict__ weights,
                                                                    int heads, int64_t row_begin, int64_t n_rows, BatchDev b, StateDev st,
                                                                    LayerDev L, int tiles_per_block, float* __restrict__ scores,
                                                                    int64_t ld) {
  pdl_begin();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* Qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);            // [R * kHeads][kLd]
  __nv_bfloat16* Ks = Qs + R * kHeads * kLd;                         // [kTile][kLd]
  auto* ws = reinterpret_cast<float*>(Ks + kTile * kLd);             // [R * kHeads]
  float* part = ws + R * kHeads;                                      // [4 R][kTile]
  auto* kp = reinterpret_cast<const float**>(part + 4 * R * kTile);  // [kTile]
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * R;          // the block's first row of this launch
  int32_t vis[R], seq[R];
  bool shared;
  const int32_t vis_max = rows_visible(b, L, row_begin, i0, n_rows, vis, seq, shared);
  const int64_t chunk0 = static_cast<int64_t>(blockIdx.y) * tiles_per_block * kTile;
  if (chunk0 >= vis_max) return;
  const int dim = L.index_dim, d4 = dim / 4;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;

  for (int i = tid; i < R * kHeads; i += blockDim.x) {
    const int j = i / kHeads, h = i % kHeads;
    ws[i] = h < heads && i0 + j < n_rows
                ? weights[(row_begin + i0 + j) * heads + h] / sqrtf(static_cast<float>(heads)) / sqrtf(static_cast<float>(dim))
                : 0.0f;
  }
  // The queries to bf16, kBatch loads in flight per thread before any is stored (a round of
  // latency per batch, not per load).
  constexpr int kBatch = R == 1 ? 8 : 4;
  for (int idx0 = tid; idx0 < R * kHeads * d4; idx0 += kBatch * blockDim.x) {
    float4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int idx = idx0 + u * blockDim.x, jh = idx / d4, j = jh / kHeads, h = jh % kHeads, c = (idx % d4) * 4;
      const float* qrow = q + (row_begin + i0 + j) * heads * dim;
      v[u] = idx < R * kHeads * d4 && h < heads && i0 + j < n_rows ? *reinterpret_cast<const float4*>(qrow + static_cast<int64_t>(h) * dim + c)
                                                                   : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int idx = idx0 + u * blockDim.x;
      if (idx < R * kHeads * d4) store_bf16x4(Qs + (idx / d4) * kLd + (idx % d4) * 4, v[u]);
    }
  }
  const int passes = shared ? 1 : R;
  for (int tile = 0; tile < tiles_per_block; ++tile) {
    const int64_t e0 = chunk0 + static_cast<int64_t>(tile) * kTile;
    if (e0 >= vis_max) break;
    for (int p = 0; p < passes; ++p) {
      const int32_t kvis = shared ? vis_max : vis[p];  // the keys of row p's sequence (all rows' when shared)
      if (e0 >= kvis) continue;                       // (uniform over the block)
      __syncthreads();  // the previous tile's readers are done with kp, Ks and part
      if (tid < kTile) {
        const int64_t e = e0 + tid;
        kp[tid] = e < kvis ? entry_ptr(b, st, L, b.seqs[seq[shared ? 0 : p]], static_cast<int32_t>(e), L.index_key_offset, dim) : nullptr;
      }
      __syncthreads();
      for (int idx0 = tid; idx0 < kTile * d4; idx0 += kBatch * blockDim.x) {  // the keys, batched as the queries
        float4 v[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int idx = idx0 + u * blockDim.x;
          const float* kr = idx < kTile * d4 ? kp[idx / d4] : nullptr;
          v[u] = kr ? *reinterpret_cast<const float4*>(kr + (idx % d4) * 4) : make_float4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int idx = idx0 + u * blockDim.x;
          if (idx < kTile * d4) store_bf16x4(Ks + (idx / d4) * kLd + (idx % d4) * 4, v[u]);
        }
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
          part[warp * kTile + nt * 8 + 2 * t4] = v0;
          part[warp * kTile + nt * 8 + 2 * t4 + 1] = v1;
        }
      }
      __syncthreads();
      if (tid < R * kTile) {
        const int j = tid / kTile, key = tid % kTile;
        const float* pj = part + 4 * j * kTile + key;
        if ((shared || j == p) && e0 + key < vis[j])
          scores[(i0 + j) * ld + e0 + key] = ((pj[0] + pj[kTile]) + pj[2 * kTile]) + pj[3 * kTile];
      }
    }
  }
}

template <int R>
cudaError_t launch_scores(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows, int64_t chunks,
                          BatchDev b, StateDev st, LayerDev L, int per_block, float* scores, int64_t ld, Stream s) {
  const int64_t groups = (n_rows + R - 1) / R;
  launch(indexer_scores_mqa_kernel<R>, dim3(static_cast<unsigned>(groups), static_cast<unsigned>(chunks)), R * 128, smem_bytes(R), s)(
      q, weights, heads, row_begin, n_rows, b, st, L, per_block, scores, ld);
  return cudaGetLastError();
}

}  // namespace

cudaError_t prepare_indexer_mma(size_t device_max) {
  const cudaError_t e = allow_smem<indexer_scores_mqa_kernel<1>>(smem_bytes(1), device_max);
  return e == cudaSuccess ? allow_smem<indexer_scores_mqa_kernel<4>>(smem_bytes(4), device_max) : e;
}

bool indexer_scores_mqa_supported(int heads, const StateDev& st, const LayerDev& L) {
  return heads >= 1 && heads <= kHeads && L.index_dim >= 16 && L.index_dim <= kMaxDim && L.index_dim % 16 == 0 &&
         st.block_floats % 4 == 0 && L.index_key_offset % 4 == 0 && reinterpret_cast<uintptr_t>(st.blocks) % 16 == 0;
}

cudaError_t indexer_scores_mqa(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows, int64_t max_visible,
                               BatchDev b, StateDev st, LayerDev L, float* scores, int64_t ld, Stream s) {
  if (n_rows <= 0 || max_visible <= 0) return cudaSuccess;
  if (!indexer_scores_mqa_supported(heads, st, L) || reinterpret_cast<uintptr_t>(q) % 16 != 0) return cudaErrorInvalidValue;
  // 64+ rows: 8 tiles per block, so that each row's queries are staged 8x less often; and where the
  // sequences average 4+ rows (prefill chunks), 4 rows per block, each key tile loaded once for them
  // (decode rows are each their own sequence's: a block of them would pass over every row's keys).
  // Small batches keep one row and one tile per block to spread over the GPU.
  const int64_t tiles = (max_visible + kTile - 1) / kTile;
  const bool many = n_rows >= 64;
  const int per_block = many ? 8 : 1;
  const int64_t chunks = (tiles + per_block - 1) / per_block;
  if (chunks > 65535 || n_rows > 2147483647) return cudaErrorInvalidValue;
  return many && b.rows >= 4 * static_cast<int64_t>(b.n_seqs) ? launch_scores<4>(q, weights, heads, row_begin, n_rows, chunks, b, st, L, per_block, scores, ld, s)
              : launch_scores<1>(q, weights, heads, row_begin, n_rows, chunks, b, st, L, per_block, scores, ld, s);
}

}  // namespace deepinfer::kernels
