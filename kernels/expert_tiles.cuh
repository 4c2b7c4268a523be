// The expert tile products (moe.cu's grouped expert GEMMs) as templates, shared with the dense
// products of the batch-invariant mode (tile_linear.cu): bf16 tensor cores through WMMA with fp32
// accumulation (a synchronous kernel, a cp.async pipelined one) and the fp32 variant. A translation
// unit that launches one raises its shared-memory limit itself (each has its own copy of a kernel).
#pragma once

#include "common.cuh"

#include <mma.h>

namespace deepinfer::kernels {

constexpr int kBM = kMoeTileRows, kBN = 64, kBK = 32, kLds = kBK + 8, kCld = kBN + 4;

// 8 bf16 of row `src` (null: out of range) from column k into shared memory, zero-filled past K.
__device__ __forceinline__ void load8(__nv_bfloat16* dst, const __nv_bfloat16* src, int64_t k, int64_t K, bool vec) {
  if (!src) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  } else if (vec && k + 8 <= K) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src + k);
  } else {
#pragma unroll
    for (int q = 0; q < 8; ++q) dst[q] = k + q < K ? src[k + q] : __float2bfloat16_rn(0.0f);
  }
}

// The rows [r0, r1) a block computes and the expert e whose weights it reads: a tile of the MoE plan,
// or (a dense product: tiles null) rows blockIdx.x * rows_per_block ... of group blockIdx.z / k_splits,
// whose input and output start e * K and e * N columns in. False: no tile for this block.
struct BlockRows {
  int e, r0, r1;
  int64_t a_off, y_off;
};
__device__ __forceinline__ bool block_rows(const int4* __restrict__ tiles, const int32_t* __restrict__ n_tiles, int64_t dense_rows,
                                           int rows_per_block, int64_t K, int64_t N, BlockRows& b, int k_splits = 1) {
  if (tiles) {
    if (static_cast<int>(blockIdx.x) >= *n_tiles) return false;
    const int4 t = tiles[blockIdx.x];
    b = {t.x, t.y, t.z, 0, 0};
    return true;
  }
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int e = static_cast<int>(blockIdx.z) / k_splits;
  b = {e, static_cast<int>(r0), static_cast<int>(min(dense_rows, r0 + rows_per_block)), e * K, e * N};
  return r0 < dense_rows;
}

// grid (tiles, N / kBN): C[rows of the tile, n0 .. n0 + kBN) = A[rows] @ W[e]^T for one (kGateUp: two) weight(s).
// A's rows are lda apart, Y's ldy (H's N); a dense product (tiles null) has dense_rows rows.
template <bool kGateUp>
__global__ void __launch_bounds__(128)
    moe_gemm_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ W0, const __nv_bfloat16* __restrict__ W1,
                    int64_t K, int64_t N, float limit, const int4* __restrict__ tiles, const int32_t* __restrict__ n_tiles,
                    int64_t dense_rows, int64_t lda, int64_t ldy, __nv_bfloat16* __restrict__ H, float* __restrict__ Y) {
  pdl_begin();
  using namespace nvcuda;
  constexpr int NW = kGateUp ? 2 : 1;
  __shared__ __align__(128) __nv_bfloat16 As[kBM * kLds];
  __shared__ __align__(128) __nv_bfloat16 Bs[NW][kBN * kLds];
  __shared__ __align__(128) float Cs[NW][kBM * kCld];
  BlockRows br;
  if (!block_rows(tiles, n_tiles, dense_rows, kBM, K, N, br)) return;
  const int e = br.e, r0 = br.r0, r1 = br.r1;
  A += br.a_off;
  if constexpr (!kGateUp) Y += br.y_off;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int tid = threadIdx.x, warp = tid >> 5, wm = warp >> 1, wn = warp & 1;
  const bool vec = (K % 8) == 0 && lda % 8 == 0;
  const __nv_bfloat16* Wb[NW];
  Wb[0] = W0 + static_cast<int64_t>(e) * N * K;
  if constexpr (kGateUp) Wb[NW - 1] = W1 + static_cast<int64_t>(e) * N * K;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[NW][2];
#pragma unroll
  for (int w = 0; w < NW; ++w)
#pragma unroll
    for (int f = 0; f < 2; ++f) wmma::fill_fragment(acc[w][f], 0.0f);

  const int a_row = tid >> 2, a_col = (tid & 3) * 8;
  const __nv_bfloat16* a_src = (r0 + a_row < r1) ? A + static_cast<int64_t>(r0 + a_row) * lda : nullptr;
  for (int64_t k0 = 0; k0 < K; k0 += kBK) {
    load8(As + a_row * kLds + a_col, a_src, k0 + a_col, K, vec);
#pragma unroll
    for (int w = 0; w < NW; ++w)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int idx = tid + 128 * j, row = idx >> 2, col = (idx & 3) * 8;
        const __nv_bfloat16* src = (n0 + row < N) ? Wb[w] + (n0 + row) * K : nullptr;
        load8(Bs[w] + row * kLds + col, src, k0 + col, K, vec);
      }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> af;
      wmma::load_matrix_sync(af, As + wm * 16 * kLds + kk, kLds);
#pragma unroll
      for (int w = 0; w < NW; ++w)
#pragma unroll
        for (int f = 0; f < 2; ++f) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> bfr;
          wmma::load_matrix_sync(bfr, Bs[w] + (wn * 32 + f * 16) * kLds + kk, kLds);
          wmma::mma_sync(acc[w][f], af, bfr, acc[w][f]);
        }
    }
    __syncthreads();
  }
#pragma unroll
  for (int w = 0; w < NW; ++w)
#pragma unroll
    for (int f = 0; f < 2; ++f) wmma::store_matrix_sync(Cs[w] + wm * 16 * kCld + wn * 32 + f * 16, acc[w][f], kCld, wmma::mem_row_major);
  __syncthreads();
  for (int idx = tid; idx < kBM * kBN; idx += 128) {
    const int r = idx / kBN, c = idx % kBN;
    const int64_t row = r0 + r, col = n0 + c;
    if (row >= r1 || col >= N) continue;
    if constexpr (kGateUp) {
      H[row * N + col] = __float2bfloat16_rn(swiglu_clamped(Cs[0][r * kCld + c], Cs[1][r * kCld + c], limit));
    } else {
      Y[row * ldy + col] = Cs[0][r * kCld + c];
    }
  }
}

// --- v2: the same tiles, operands streamed through a kStages-deep cp.async pipeline (16-byte copies,
// zero-filled past the matrix) so that each multiprocessor keeps tens of KB of weight loads in
// flight: decode is bound by reading expert weights, and v1's synchronous loads left the memory
// system idle between k-steps.
constexpr int kV2BK = 64, kV2Lds = kV2BK + 8, kStages = 4;

// Tile shapes: kRows (32 for decode-sized groups, kMoeBigTileRows for prefill) x kBN columns; warps
// arranged kWarpsM x 2, each owning 16 * kFragM rows x 32 columns (two 16-wide fragments).
template <int kRows>
struct V2Shape {
  static constexpr int kWarpsM = kRows == 32 ? 2 : 4;
  static constexpr int kThreads = kWarpsM * 2 * 32;
  static constexpr int kFragM = kRows / kWarpsM / 16;
};

template <bool kGateUp, int kRows, int kCols>
constexpr int v2_stage_elems() {
  return kRows * kV2Lds + (kGateUp ? 2 : 1) * kCols * kV2Lds;
}
template <bool kGateUp, int kRows, int kCols>
constexpr size_t v2_smem_bytes() {
  return sizeof(__nv_bfloat16) * static_cast<size_t>(kStages) * v2_stage_elems<kGateUp, kRows, kCols>();
}

// grid (tiles, N / kCols); K % 8 == 0 and 16-byte aligned operands. kCols 64, or 32 for small
// batches (twice the blocks: the weight stream spreads over every multiprocessor).
// kChunked (dense products of the batch-invariant mode): each output sums K in chunks of
// kChunkTiles k-tiles, each chunk's mma steps from zero, the chunks added in order; a block sums
// them itself (k_splits 1) or computes chunk blockIdx.z % k_splits alone into Y's part of that chunk
// (chunk c's rows start c * dense_rows * ldy in; f32_chunk_sum_kernel adds them in order): the same
// bits either way, so a few rows can spread over the chunks' blocks.
constexpr int kChunkTiles = 8;  // of kV2BK = 64: 512 of K
template <bool kGateUp, int kRows, int kCols, bool kChunked = false>
__global__ void __launch_bounds__(V2Shape<kRows>::kThreads)
    moe_gemm_v2_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ W0, const __nv_bfloat16* __restrict__ W1,
                       int64_t K, int64_t N, float limit, const int4* __restrict__ tiles, const int32_t* __restrict__ n_tiles,
                       int64_t dense_rows, int64_t lda, int64_t ldy, __nv_bfloat16* __restrict__ H, float* __restrict__ Y, int k_splits) {
  pdl_begin();
  using namespace nvcuda;
  using Sh = V2Shape<kRows>;
  static_assert(!kChunked || !kGateUp, "chunked sums are the dense products'");
  constexpr int NW = kGateUp ? 2 : 1, T = Sh::kThreads, FM = Sh::kFragM, FN = kCols / 32, CLD = kCols + 4;
  constexpr int kAElems = kRows * kV2Lds, kBElems = kCols * kV2Lds, kStage = v2_stage_elems<kGateUp, kRows, kCols>();
  static_assert(sizeof(float) * NW * kRows * CLD <= sizeof(__nv_bfloat16) * kStages * kStage, "epilogue fits the pipeline buffers");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* sm = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  BlockRows br;
  if (!block_rows(tiles, n_tiles, dense_rows, kRows, K, N, br, k_splits)) return;
  const int e = br.e, r0 = br.r0, r1 = br.r1;
  A += br.a_off;
  if constexpr (!kGateUp) Y += br.y_off;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kCols;
  const int tid = threadIdx.x, warp = tid >> 5, wm = warp >> 1, wn = warp & 1;
  const __nv_bfloat16* Wb[NW];
  Wb[0] = W0 + static_cast<int64_t>(e) * N * K;
  if constexpr (kGateUp) Wb[NW - 1] = W1 + static_cast<int64_t>(e) * N * K;

  int kt_begin = 0, ktiles = static_cast<int>((K + kV2BK - 1) / kV2BK);  // this block's k-tiles: [kt_begin, ktiles)
  if (kChunked && k_splits > 1) {
    const int c = static_cast<int>(blockIdx.z) % k_splits;
    kt_begin = c * kChunkTiles;
    ktiles = min(ktiles, kt_begin + kChunkTiles);
    Y += static_cast<int64_t>(c) * dense_rows * ldy;
  }
  auto load_stage = [&](int stage, int kt) {
    __nv_bfloat16* As = sm + stage * kStage;
    __nv_bfloat16* Bs = As + kAElems;
    const int64_t k0 = static_cast<int64_t>(kt) * kV2BK;
#pragma unroll
    for (int j = 0; j < (kRows * kV2BK / 8) / T; ++j) {  // A: kRows x 64 in 16-byte pieces
      const int idx = tid + T * j, row = idx >> 3, col = (idx & 7) * 8;
      const bool valid = r0 + row < r1 && k0 + col < K;
      cp_async16(As + row * kV2Lds + col, valid ? A + static_cast<int64_t>(r0 + row) * lda + k0 + col : A, valid);
    }
#pragma unroll
    for (int w = 0; w < NW; ++w)
#pragma unroll
      for (int j = 0; j < (kCols * kV2BK / 8) / T; ++j) {  // W: kCols x 64
        const int idx = tid + T * j, row = idx >> 3, col = (idx & 7) * 8;
        const bool valid = n0 + row < N && k0 + col < K;
        cp_async16(Bs + w * kBElems + row * kV2Lds + col, valid ? Wb[w] + (n0 + row) * K + k0 + col : Wb[w], valid);
      }
  };

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][NW][FN];
#pragma unroll
  for (int fm = 0; fm < FM; ++fm)
#pragma unroll
    for (int w = 0; w < NW; ++w)
#pragma unroll
      for (int f = 0; f < FN; ++f) wmma::fill_fragment(acc[fm][w][f], 0.0f);

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> total[kChunked ? FM : 1][NW][kChunked ? FN : 1];
  bool first_chunk = true;

#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (kt_begin + st < ktiles) load_stage(st, kt_begin + st);
    cp_async_commit();
  }
  for (int kt = kt_begin; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();  // stage kt has landed (this thread's copies)
    __syncthreads();               // ... everyone's; and everyone is done with the stage refilled next
    const int nk = kt + kStages - 1;
    if (nk < ktiles) load_stage((nk - kt_begin) % kStages, nk);
    cp_async_commit();
    const __nv_bfloat16* As = sm + ((kt - kt_begin) % kStages) * kStage;
    const __nv_bfloat16* Bs = As + kAElems;
#pragma unroll
    for (int kk = 0; kk < kV2BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> af[FM];
#pragma unroll
      for (int fm = 0; fm < FM; ++fm) wmma::load_matrix_sync(af[fm], As + (wm * FM + fm) * 16 * kV2Lds + kk, kV2Lds);
#pragma unroll
      for (int w = 0; w < NW; ++w)
#pragma unroll
        for (int f = 0; f < FN; ++f) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> bfr;
          wmma::load_matrix_sync(bfr, Bs + w * kBElems + (wn * (kCols / 2) + f * 16) * kV2Lds + kk, kV2Lds);
#pragma unroll
          for (int fm = 0; fm < FM; ++fm) wmma::mma_sync(acc[fm][w][f], af[fm], bfr, acc[fm][w][f]);
        }
    }
    if constexpr (kChunked) {
      if ((kt + 1) % kChunkTiles == 0 || kt + 1 == ktiles) {  // a chunk ends: into the total, in order
#pragma unroll
        for (int fm = 0; fm < FM; ++fm)
#pragma unroll
          for (int f = 0; f < FN; ++f) {
#pragma unroll
            for (int i = 0; i < acc[fm][0][f].num_elements; ++i)
              total[fm][0][f].x[i] = first_chunk ? acc[fm][0][f].x[i] : total[fm][0][f].x[i] + acc[fm][0][f].x[i];
            wmma::fill_fragment(acc[fm][0][f], 0.0f);
          }
        first_chunk = false;
      }
    }
  }
  if constexpr (kChunked) {
#pragma unroll
    for (int fm = 0; fm < FM; ++fm)
#pragma unroll
      for (int f = 0; f < FN; ++f) acc[fm][0][f] = total[fm][0][f];
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline buffers become the epilogue's
  float* Cs = reinterpret_cast<float*>(smem_raw);
#pragma unroll
  for (int fm = 0; fm < FM; ++fm)
#pragma unroll
    for (int w = 0; w < NW; ++w)
#pragma unroll
      for (int f = 0; f < FN; ++f)
        wmma::store_matrix_sync(Cs + w * kRows * CLD + (wm * FM + fm) * 16 * CLD + wn * (kCols / 2) + f * 16, acc[fm][w][f], CLD,
                                wmma::mem_row_major);
  __syncthreads();
  for (int idx = tid; idx < kRows * kCols; idx += T) {
    const int r = idx / kCols, c = idx % kCols;
    const int64_t row = r0 + r, col = n0 + c;
    if (row >= r1 || col >= N) continue;
    if constexpr (kGateUp) {
      H[row * N + col] = __float2bfloat16_rn(swiglu_clamped(Cs[r * CLD + c], Cs[kRows * CLD + r * CLD + c], limit));
    } else {
      Y[row * ldy + col] = Cs[r * CLD + c];
    }
  }
}

template <bool kGateUp, int kRows, int kCols = kBN, bool kChunked = false>
cudaError_t launch_moe_v2(dim3 grid, Stream s, const __nv_bfloat16* A, const __nv_bfloat16* W0, const __nv_bfloat16* W1, int64_t K,
                          int64_t N, float limit, const int4* tiles, const int32_t* n_tiles, __nv_bfloat16* H, float* Y,
                          int64_t dense_rows = 0, int64_t lda = 0, int64_t ldy = 0, int k_splits = 1) {
  constexpr size_t smem = v2_smem_bytes<kGateUp, kRows, kCols>();
  launch(moe_gemm_v2_kernel<kGateUp, kRows, kCols, kChunked>, grid, V2Shape<kRows>::kThreads, smem, s)(
      A, W0, W1, K, N, limit, tiles, n_tiles, dense_rows, lda > 0 ? lda : K, ldy > 0 ? ldy : N, H, Y, k_splits);
  return cudaGetLastError();
}

// Few tiles (small decode batches): 32-column blocks, so that ~4 blocks per multiprocessor stream
// weights instead of 1-2.
inline bool narrow_columns(int max_tiles, int64_t N) { return static_cast<int64_t>(max_tiles) * ((N + kBN - 1) / kBN) < 4 * 132; }

inline bool v2_usable(const void* a, const void* w0, const void* w1, int64_t K) {
  auto al = [](const void* p) { return p == nullptr || aligned16(p); };  // (null: not read)
  return K % 8 == 0 && al(a) && al(w0) && al(w1);
}

// fp32 variant for the backend's fp32 reference mode: one output column per thread, plain FMAs.
template <bool kGateUp>
__global__ void __launch_bounds__(128)
    moe_gemm_f32_kernel(const float* __restrict__ A, const float* __restrict__ W0, const float* __restrict__ W1, int64_t K, int64_t N,
                        float limit, const int4* __restrict__ tiles, const int32_t* __restrict__ n_tiles, float* __restrict__ H,
                        float* __restrict__ Y) {
  pdl_begin();
  BlockRows br;
  if (!block_rows(tiles, n_tiles, 0, kBM, K, N, br)) return;
  const int64_t col = static_cast<int64_t>(blockIdx.y) * 64 + (threadIdx.x & 63);
  if (col >= N) return;
  const float* w0 = W0 + (static_cast<int64_t>(br.e) * N + col) * K;
  const float* w1 = kGateUp ? W1 + (static_cast<int64_t>(br.e) * N + col) * K : nullptr;
  for (int64_t r = br.r0 + (threadIdx.x >> 6); r < br.r1; r += 2) {
    const float* a = A + r * K;
    float g = 0.0f, u = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      g += a[k] * w0[k];
      if constexpr (kGateUp) u += a[k] * w1[k];
    }
    if constexpr (kGateUp) {
      H[r * N + col] = swiglu_clamped(g, u, limit);
    } else {
      Y[r * N + col] = g;
    }
  }
}

}  // namespace deepinfer::kernels
