// The lightning indexer's scores on Hopper's warpgroup MMA (prefill): the scores of
// indexer_scores_mqa (kernels/indexer.cu), score[e] = sum over heads h of relu(q_h . k_e) / sqrt(dim)
// * w_h / sqrt(heads), with the keys read from a bf16 table of the forward's index keys
// (key_table.cu, kIndexer).
//
// One block per (4 rows, chunk of 64-key tiles), a warpgroup per row: the warpgroup stages its row's
// 64 heads in the 128-byte swizzled layout once, and per key tile (cp.async from the table, loaded
// once for the four rows) multiplies S = Q K^T as m64n64k16 products; relu, the head weights and the
// sum over heads follow as in indexer_scores_mqa (lanes, then the row's four warps in a fixed order).
// Rows of two sequences in one block (a packed batch's boundary) take a pass each over their own keys.
#include "common.cuh"
#include "mma.cuh"
#include "wgmma.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kRows = 4, kHeads = 64, kTile = 64, kThreads = kRows * 128;
constexpr uint32_t kAtom = 8192;  // one 64-wide column block of a 64-row tile

template <int kCols>  // index_dim / 64
constexpr size_t smem_bytes() {
  return 1024 /* alignment */ + (kRows + 1) * kCols * kAtom + sizeof(float) * (kRows * kHeads + kRows * 4 * kTile) +
         sizeof(const __nv_bfloat16*) * kTile;
}

#if defined(DI_WGMMA)
// The block's head weights, ws[kHeads j + h] for its row j, with 1 / sqrt(heads) and 1 / sqrt(dim)
// folded in (0 past the heads and the rows).
template <int kCols>
__device__ __forceinline__ void load_head_weights(float* ws, const float* __restrict__ weights, int heads, int64_t row_begin, int64_t i0,
                                                  int64_t n_rows, int tid) {
  constexpr int dim = kCols * 64;
  for (int i = tid; i < kRows * kHeads; i += kThreads) {
    const int j = i / kHeads, h = i % kHeads;
    ws[i] = h < heads && i0 + j < n_rows
                ? weights[(row_begin + i0 + j) * heads + h] / sqrtf(static_cast<float>(heads)) / sqrtf(static_cast<float>(dim))
                : 0.0f;
  }
}

// Warpgroup wg's query row `row` (its 64 heads x dim) to bf16 into its kCols column blocks of Qs (zeros
// past the heads, or for a row past the launch's), every load of a thread in flight at once. (The row's
// address is formed here, next to its loads: so the compiler folds it as it did inside the kernel.)
template <int kCols>
__device__ __forceinline__ void stage_query_row(unsigned char* Qs, const float* q, int64_t row, int heads, bool row_valid, int wg, int wt) {
  constexpr int dim = kCols * 64;
  const float* qrow = q + row * heads * dim;
  constexpr int kChunks = kHeads * kCols * 8 / 128, kBatch = 4;  // 16-byte bf16 chunks a thread, 4 at a time
#pragma unroll
  for (int u0 = 0; u0 < kChunks; u0 += kBatch) {
    float4 v[2 * kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int idx = (u0 + u) * 128 + wt, h = idx / (kCols * 8), c = idx % (kCols * 8);
      const bool live = row_valid && h < heads;
      const float* src = qrow + static_cast<int64_t>(h) * dim + 8 * c;
      v[2 * u] = live ? *reinterpret_cast<const float4*>(src) : make_float4(0, 0, 0, 0);
      v[2 * u + 1] = live ? *reinterpret_cast<const float4*>(src + 4) : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int idx = (u0 + u) * 128 + wt, h = idx / (kCols * 8), c = idx % (kCols * 8);
      const uint4 packed = make_uint4(pack_bf16(v[2 * u].x, v[2 * u].y), pack_bf16(v[2 * u].z, v[2 * u].w),
                                      pack_bf16(v[2 * u + 1].x, v[2 * u + 1].y), pack_bf16(v[2 * u + 1].z, v[2 * u + 1].w));
      *reinterpret_cast<uint4*>(Qs + (wg * kCols + (c >> 3)) * kAtom + swizzle128(h, c & 7)) = packed;
    }
  }
}

// The key tile e0 .. + kTile of table sequence `seq` (kvis keys) into Ks: the key rows into kp (null
// past the keys), then 64 keys x dim by cp.async into the swizzled layout. On return the tile has
// landed for the whole block, visible to the tensor cores.
template <int kCols>
__device__ __forceinline__ void load_key_tile(unsigned char* Ks, const __nv_bfloat16** kp, const __nv_bfloat16* table,
                                              const int32_t* seq_first, int32_t seq, int64_t e0, int32_t kvis, int tid) {
  constexpr int dim = kCols * 64;
  __syncthreads();  // the previous tile's readers are done with kp, Ks and part
  if (tid < kTile) {
    const int64_t e = e0 + tid;
    kp[tid] = e < kvis ? table + (static_cast<int64_t>(seq_first[seq]) + e) * dim : nullptr;
  }
  __syncthreads();
#pragma unroll
  for (int u = 0; u < kTile * kCols * 8 / kThreads; ++u) {  // 64 keys x dim: 16-byte chunks into the swizzled tile
    const int idx = u * kThreads + tid, key = idx / (kCols * 8), c = idx % (kCols * 8);
    const __nv_bfloat16* src = kp[key];
    cp_async16(Ks + (c >> 3) * kAtom + swizzle128(key, c & 7),
               src ? static_cast<const void*>(src + 8 * c) : static_cast<const void*>(table), src != nullptr);
  }
  cp_async_commit();
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();  // the tile has landed (everyone's copies)
}

// Warpgroup wg's S = Q K^T over the landed key tile (m64n64k16 products; s in the accumulator layout:
// heads 16 warp + g, + 8, keys 8 j + 2 t4 + {0, 1} of n8 tile j).
template <int kCols>
__device__ __forceinline__ void tile_products(float (&s)[32], uint32_t q_addr, uint32_t k_addr, int wg) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kCols * 4; ++ks) {
    const uint32_t col = (ks >> 2) * kAtom + (ks & 3) * 32;
    wgmma_m64n64k16_ss(s, smem_desc(q_addr + wg * kCols * kAtom + col, 16, 1024), smem_desc(k_addr + col, 16, 1024), ks > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  fence_operands(s);
}
#endif

template <int kCols>
__global__ void __launch_bounds__(kThreads, 2) indexer_scores_wgmma_kernel(const float* __restrict__ q, const float* __restrict__ weights,
                                                                       int heads, int64_t row_begin, int64_t n_rows, BatchDev b, LayerDev L,
                                                                       KeyTableDev t, int tiles_per_block, float* __restrict__ scores,
                                                                       int64_t ld) {
  pdl_begin();
#if defined(DI_WGMMA)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* Qs = smem_raw + ((1024 - (raw & 1023)) & 1023);  // [kRows][kCols column blocks][64 heads x 128 B]
  unsigned char* Ks = Qs + kRows * kCols * kAtom;                  // [kCols column blocks][64 keys x 128 B]
  auto* ws = reinterpret_cast<float*>(Ks + kCols * kAtom);         // [kRows * kHeads]: the head weights
  float* part = ws + kRows * kHeads;                                // [kRows][4 warps][kTile]: head sums a warp
  auto* kp = reinterpret_cast<const __nv_bfloat16**>(part + kRows * 4 * kTile);  // [kTile]: key rows, null past the keys
  const uint32_t q_addr = static_cast<uint32_t>(__cvta_generic_to_shared(Qs)), k_addr = q_addr + kRows * kCols * kAtom;

  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kRows;  // the block's first row of this launch
  int32_t vis[kRows], seq[kRows];
  bool shared;
  const int32_t vis_max = rows_visible(b, L, row_begin, i0, n_rows, vis, seq, shared);
  const int64_t chunk0 = static_cast<int64_t>(blockIdx.y) * tiles_per_block * kTile;
  if (chunk0 >= vis_max) return;
  const int tid = threadIdx.x, wg = tid >> 7, wt = tid & 127, lane = tid & 31, warp = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const bool row_valid = i0 + wg < n_rows;

  load_head_weights<kCols>(ws, weights, heads, row_begin, i0, n_rows, tid);
  stage_query_row<kCols>(Qs, q, row_begin + i0 + wg, heads, row_valid, wg, wt);

  const auto* table = reinterpret_cast<const __nv_bfloat16*>(t.rows);
  const int passes = shared ? 1 : kRows;
  for (int tile = 0; tile < tiles_per_block; ++tile) {
    const int64_t e0 = chunk0 + static_cast<int64_t>(tile) * kTile;
    if (e0 >= vis_max) break;
    for (int p = 0; p < passes; ++p) {
      int32_t vis_p = 0, seq_p = seq[0];  // row p's (selected without indexing the arrays: they stay in registers)
#pragma unroll
      for (int j = 0; j < kRows; ++j)
        if (j == p) vis_p = vis[j], seq_p = seq[j];
      const int32_t kvis = shared ? vis_max : vis_p;  // the keys of row p's sequence (all rows' when shared)
      if (e0 >= kvis) continue;                      // (uniform over the block)
      load_key_tile<kCols>(Ks, kp, table, t.seq_first, shared ? seq[0] : seq_p, e0, kvis, tid);
      if ((shared || wg == p) && row_valid) {  // (uniform over the warpgroup)
        float s[32];
        tile_products<kCols>(s, q_addr, k_addr, wg);
        // Heads 16 warp + g, + 8 of the row; keys 8 j + 2 t4 + {0, 1}: the warp's head sum per key.
        const float wa = ws[wg * kHeads + warp * 16 + g], wb = ws[wg * kHeads + warp * 16 + g + 8];
#pragma unroll
        for (int j = 0; j < kTile / 8; ++j) {
          float v0 = fmaxf(s[4 * j], 0.0f) * wa + fmaxf(s[4 * j + 2], 0.0f) * wb;
          float v1 = fmaxf(s[4 * j + 1], 0.0f) * wa + fmaxf(s[4 * j + 3], 0.0f) * wb;
#pragma unroll
          for (int o = 4; o < 32; o <<= 1) {
            v0 += __shfl_xor_sync(kFull, v0, o);
            v1 += __shfl_xor_sync(kFull, v1, o);
          }
          if (g == 0) {
            part[(wg * 4 + warp) * kTile + 8 * j + 2 * t4] = v0;
            part[(wg * 4 + warp) * kTile + 8 * j + 2 * t4 + 1] = v1;
          }
        }
      }
      __syncthreads();
      if (tid < kRows * kTile) {
        const int j = tid / kTile, key = tid % kTile;
        const float* pj = part + 4 * j * kTile + key;
        int32_t vis_j = 0;
#pragma unroll
        for (int i = 0; i < kRows; ++i)
          if (i == j) vis_j = vis[i];
        if ((shared || j == p) && i0 + j < n_rows && e0 + key < vis_j)
          scores[(i0 + j) * ld + e0 + key] = ((pj[0] + pj[kTile]) + pj[2 * kTile]) + pj[3 * kTile];
      }
    }
  }
#else
  __trap();  // built without sm_90a: wgmma_supported() kept the backend from launching this
#endif
}

template <int kCols>
cudaError_t launch_scores(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows, int64_t chunks, BatchDev b,
                          LayerDev L, KeyTableDev t, int per_block, float* scores, int64_t ld, Stream s) {
  constexpr size_t smem = smem_bytes<kCols>();
  const int64_t groups = (n_rows + kRows - 1) / kRows;
  launch(indexer_scores_wgmma_kernel<kCols>, dim3(static_cast<unsigned>(groups), static_cast<unsigned>(chunks)), kThreads, smem, s)(
      q, weights, heads, row_begin, n_rows, b, L, t, per_block, scores, ld);
  return cudaGetLastError();
}

}  // namespace

cudaError_t prepare_indexer_wgmma(size_t device_max) {
  const cudaError_t e = allow_smem<indexer_scores_wgmma_kernel<1>>(smem_bytes<1>(), device_max);
  return e == cudaSuccess ? allow_smem<indexer_scores_wgmma_kernel<2>>(smem_bytes<2>(), device_max) : e;
}

bool indexer_scores_wgmma_supported(int heads, const LayerDev& L) {
  return heads >= 1 && heads <= kHeads && (L.index_dim == 64 || L.index_dim == 128) && L.rate > 0;
}

cudaError_t indexer_scores_wgmma(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows, int64_t max_visible,
                                 BatchDev b, LayerDev L, KeyTableDev t, float* scores, int64_t ld, Stream s) {
  if (n_rows <= 0 || max_visible <= 0) return cudaSuccess;
  if (!indexer_scores_wgmma_supported(heads, L) || !t.rows || !t.seq_first || !aligned16(q)) return cudaErrorInvalidValue;
  constexpr int kPerBlock = 8;  // key tiles a block: each row's queries staged once for 512 keys
  const int64_t tiles = (max_visible + kTile - 1) / kTile, chunks = (tiles + kPerBlock - 1) / kPerBlock;
  if (chunks > 65535 || n_rows > 2147483647) return cudaErrorInvalidValue;
  return L.index_dim == 128 ? launch_scores<2>(q, weights, heads, row_begin, n_rows, chunks, b, L, t, kPerBlock, scores, ld, s)
                            : launch_scores<1>(q, weights, heads, row_begin, n_rows, chunks, b, L, t, kPerBlock, scores, ld, s);
}

}  // namespace deepinfer::kernels
