// Dense products whose outputs do not depend on the number of rows (the batch-invariant mode's,
// tile_linear.h): the expert tile kernels (expert_tiles.cuh) over one "expert" per group, their sums
// over K cut into fixed chunks; and fp32 products summed in a fixed order.
#include "common.cuh"
#include "expert_tiles.cuh"
#include "moe.h"
#include "tile_linear.h"

#include <algorithm>
#include <climits>

namespace deepinfer::kernels {
namespace {

// --- fp32 products in a fixed order per output (batch-invariant mode's fp32 weights: the router
// gate, small matrices). K is cut into chunks of kF32Chunk by K alone; a thread sums its outputs'
// products over a chunk in k order (fmaf), and the chunks' sums are added in chunk order. Chunks
// spread a few rows (decode) over many blocks; tiles of 64 x 64 outputs (4 x 4 a thread) serve many.
constexpr int kF32Tile = 64, kF32Step = 16, kF32Chunk = 256;
int f32_chunks(int64_t K) { return static_cast<int>((K + kF32Chunk - 1) / kF32Chunk); }

// grid (row tiles, column tiles, groups * chunks): out [rows, ldo] (a chunk's: chunk * rows * ldo
// further) = the chunk's sums; group g reads x + g * K and w + g * N * K, writes out + g * N.
__global__ void __launch_bounds__(256)
    f32_chunk_kernel(const float* __restrict__ X, int64_t rows, int64_t K, int64_t ldx, const float* __restrict__ W, int64_t N, int chunks,
                     float* __restrict__ out, int64_t ldo) {
  pdl_begin();
  __shared__ float Xs[kF32Step][kF32Tile + 4];
  __shared__ float Ws[kF32Step][kF32Tile + 4];
  const int g = static_cast<int>(blockIdx.z) / chunks, chunk = static_cast<int>(blockIdx.z) % chunks;
  X += g * K;
  W += g * N * K;
  out += g * N + static_cast<int64_t>(chunk) * rows * ldo;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kF32Tile, n0 = static_cast<int64_t>(blockIdx.y) * kF32Tile;
  const int64_t k_begin = static_cast<int64_t>(chunk) * kF32Chunk, k_end = min(K, k_begin + kF32Chunk);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kF32Step) {
    for (int i = threadIdx.x; i < kF32Tile * kF32Step; i += 256) {
      const int r = i / kF32Step, kk = i % kF32Step;
      const int64_t gk = k0 + kk;
      const bool in_k = gk < k_end;
      Xs[kk][r] = in_k && r0 + r < rows ? X[(r0 + r) * ldx + gk] : 0.0f;
      Ws[kk][r] = in_k && n0 + r < N ? W[(n0 + r) * K + gk] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kF32Step; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = Xs[kk][ty * 4 + i], b[i] = Ws[kk][tx * 4 + i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t r = r0 + ty * 4 + i, c = n0 + tx * 4 + j;
      if (r < rows && c < N) out[r * ldo + c] = acc[i][j];
    }
}

// y[r, c] = the chunks' sums of (r, c) added in chunk order; part [chunks][rows][cols].
__global__ void f32_chunk_sum_kernel(const float* __restrict__ part, int64_t rows, int64_t cols, int chunks, float* __restrict__ y,
                                     int64_t ldy) {
  pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  float v = part[i];
  for (int c = 1; c < chunks; ++c) v += part[static_cast<int64_t>(c) * rows * cols + i];
  y[(i / cols) * ldy + i % cols] = v;
}

// --- dense products on the tile kernels (batch-invariant mode): every output sums K in chunks of 512,
// each chunk the same 16x16x16 mma steps from zero (zero-filled past K), the chunks in order, whatever
// the tile shape and whether one block or one per chunk sums them: the tile rows, column widths
// and chunk blocks chosen here by the row count change no bit of a row's result.

// tile_linear's shape: rows per tile, narrow (32-column) blocks, and the chunks of K computed by
// blocks of their own (few blocks otherwise: a decode step's rows).
struct TileLinearShape {
  int tile_rows;
  bool narrow;
  int k_splits;
};
TileLinearShape tile_linear_shape(int64_t rows, int64_t k, int64_t n, int groups) {
  TileLinearShape t;
  t.tile_rows = rows >= 4 * kMoeBigTileRows ? kMoeBigTileRows : kMoeTileRows;
  const int64_t tiles = (rows + t.tile_rows - 1) / t.tile_rows;
  t.narrow = t.tile_rows == kMoeTileRows && narrow_columns(static_cast<int>(std::min<int64_t>(tiles * groups, INT32_MAX)), n);
  const int64_t blocks = tiles * groups * ((n + (t.narrow ? 31 : kBN - 1)) / (t.narrow ? 32 : kBN));
  const int64_t chunks = ((k + kV2BK - 1) / kV2BK + kChunkTiles - 1) / kChunkTiles;
  t.k_splits = blocks < 2 * 132 && chunks > 1 ? static_cast<int>(chunks) : 1;
  return t;
}

}  // namespace

int64_t tile_linear_scratch(int64_t rows, int64_t k, int64_t n, int groups) {
  const TileLinearShape t = tile_linear_shape(rows, k, n, groups);
  return t.k_splits > 1 ? rows * n * groups * t.k_splits : 0;
}

cudaError_t tile_linear(const bf16_t* x, int64_t rows, int64_t k, int64_t ldx, const bf16_t* w, int64_t n, int groups, float* y,
                        int64_t ldy, float* part, Stream s) {
  if (rows <= 0 || n <= 0 || groups <= 0) return cudaSuccess;
  const auto* a = reinterpret_cast<const __nv_bfloat16*>(x);
  const auto* b = reinterpret_cast<const __nv_bfloat16*>(w);
  if (!v2_usable(x, w, nullptr, k) || ldx % 8 != 0) {  // (the synchronous kernel: its own sums, by the shape alone)
    const int64_t tiles = (rows + kMoeTileRows - 1) / kMoeTileRows, nb = (n + kBN - 1) / kBN;
    if (tiles > INT32_MAX || nb > 65535 || groups > 65535) return cudaErrorInvalidValue;
    launch(moe_gemm_kernel<false>, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(nb), static_cast<unsigned>(groups)), 128, 0, s)(
        a, b, nullptr, k, n, 0.0f, nullptr, nullptr, rows, ldx, ldy, nullptr, y);
    return cudaGetLastError();
  }
  const TileLinearShape t = tile_linear_shape(rows, k, n, groups);
  const int64_t tiles = (rows + t.tile_rows - 1) / t.tile_rows, nb = (n + (t.narrow ? 31 : kBN - 1)) / (t.narrow ? 32 : kBN);
  if (tiles > INT32_MAX || nb > 65535 || static_cast<int64_t>(groups) * t.k_splits > 65535 || (t.k_splits > 1 && !part))
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(nb), static_cast<unsigned>(groups * t.k_splits));
  float* out = t.k_splits > 1 ? part : y;
  const int64_t ldo = t.k_splits > 1 ? n * groups : ldy;
  cudaError_t e;
  if (t.tile_rows == kMoeBigTileRows)
    e = launch_moe_v2<false, kMoeBigTileRows, kBN, true>(grid, s, a, b, nullptr, k, n, 0.0f, nullptr, nullptr, nullptr, out, rows, ldx, ldo,
                                                         t.k_splits);
  else if (t.narrow)
    e = launch_moe_v2<false, kMoeTileRows, 32, true>(grid, s, a, b, nullptr, k, n, 0.0f, nullptr, nullptr, nullptr, out, rows, ldx, ldo,
                                                     t.k_splits);
  else
    e = launch_moe_v2<false, kMoeTileRows, kBN, true>(grid, s, a, b, nullptr, k, n, 0.0f, nullptr, nullptr, nullptr, out, rows, ldx, ldo,
                                                      t.k_splits);
  if (e != cudaSuccess || t.k_splits == 1) return e;
  launch(f32_chunk_sum_kernel, blocks_for(rows * n * groups, 256), 256, 0, s)(part, rows, n * groups, t.k_splits, y, ldy);
  return cudaGetLastError();
}

cudaError_t tile_gate_up(const bf16_t* x, int64_t rows, int64_t d, const bf16_t* w1, const bf16_t* w3, int64_t inter, float limit,
                         bf16_t* h, Stream s) {
  if (rows <= 0 || inter <= 0) return cudaSuccess;
  const auto* a = reinterpret_cast<const __nv_bfloat16*>(x);
  const auto* g = reinterpret_cast<const __nv_bfloat16*>(w1);
  const auto* u = reinterpret_cast<const __nv_bfloat16*>(w3);
  auto* hb = reinterpret_cast<__nv_bfloat16*>(h);
  if (!v2_usable(x, w1, w3, d)) {
    const int64_t tiles = (rows + kMoeTileRows - 1) / kMoeTileRows, nb = (inter + kBN - 1) / kBN;
    if (tiles > INT32_MAX || nb > 65535) return cudaErrorInvalidValue;
    launch(moe_gemm_kernel<true>, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(nb)), 128, 0, s)(
        a, g, u, d, inter, limit, nullptr, nullptr, rows, d, inter, hb, nullptr);
    return cudaGetLastError();
  }
  const TileLinearShape t = tile_linear_shape(rows, d, inter, 1);  // (one block sums all of K: no chunks)
  const int64_t tiles = (rows + t.tile_rows - 1) / t.tile_rows, nb = (inter + (t.narrow ? 31 : kBN - 1)) / (t.narrow ? 32 : kBN);
  if (tiles > INT32_MAX || nb > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(nb));
  if (t.tile_rows == kMoeBigTileRows)
    return launch_moe_v2<true, kMoeBigTileRows>(grid, s, a, g, u, d, inter, limit, nullptr, nullptr, hb, nullptr, rows, d, inter);
  if (t.narrow)
    return launch_moe_v2<true, kMoeTileRows, 32>(grid, s, a, g, u, d, inter, limit, nullptr, nullptr, hb, nullptr, rows, d, inter);
  return launch_moe_v2<true, kMoeTileRows>(grid, s, a, g, u, d, inter, limit, nullptr, nullptr, hb, nullptr, rows, d, inter);
}

cudaError_t tile_linear_f32(const float* x, int64_t rows, int64_t k, int64_t ldx, const float* w, int64_t n, int groups, float* y,
                            int64_t ldy, float* part, Stream s) {
  if (rows <= 0 || n <= 0 || groups <= 0) return cudaSuccess;
  const int chunks = f32_chunks(k);
  const int64_t tiles = (rows + kF32Tile - 1) / kF32Tile, nb = (n + kF32Tile - 1) / kF32Tile;
  if (tiles > INT32_MAX || nb > 65535 || static_cast<int64_t>(groups) * chunks > 65535 || (chunks > 1 && !part))
    return cudaErrorInvalidValue;
  launch(f32_chunk_kernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(nb), static_cast<unsigned>(groups * chunks)), 256, 0,
         s)(x, rows, k, ldx, w, n, chunks, chunks > 1 ? part : y, chunks > 1 ? n * groups : ldy);
  if (chunks == 1) return cudaGetLastError();
  return sum_chunks(part, rows, n * groups, chunks, y, ldy, s);
}

cudaError_t sum_chunks(const float* part, int64_t rows, int64_t cols, int chunks, float* y, int64_t ldy, Stream s) {
  launch(f32_chunk_sum_kernel, blocks_for(rows * cols, 256), 256, 0, s)(part, rows, cols, chunks, y, ldy);
  return cudaGetLastError();
}

int64_t tile_linear_f32_scratch(int64_t rows, int64_t k, int64_t n, int groups) {
  const int chunks = f32_chunks(k);
  return chunks > 1 ? rows * n * groups * chunks : 0;
}

cudaError_t prepare_tile_linear(size_t device_max) {
  cudaError_t e = allow_smem<moe_gemm_v2_kernel<false, kMoeTileRows, 32, true>>(v2_smem_bytes<false, kMoeTileRows, 32>(), device_max);
  if (e == cudaSuccess)
    e = allow_smem<moe_gemm_v2_kernel<false, kMoeTileRows, kBN, true>>(v2_smem_bytes<false, kMoeTileRows, kBN>(), device_max);
  if (e == cudaSuccess)
    e = allow_smem<moe_gemm_v2_kernel<false, kMoeBigTileRows, kBN, true>>(v2_smem_bytes<false, kMoeBigTileRows, kBN>(), device_max);
  if (e == cudaSuccess) e = allow_smem<moe_gemm_v2_kernel<true, kMoeTileRows, 32>>(v2_smem_bytes<true, kMoeTileRows, 32>(), device_max);
  if (e == cudaSuccess) e = allow_smem<moe_gemm_v2_kernel<true, kMoeTileRows, kBN>>(v2_smem_bytes<true, kMoeTileRows, kBN>(), device_max);
  if (e == cudaSuccess)
    e = allow_smem<moe_gemm_v2_kernel<true, kMoeBigTileRows, kBN>>(v2_smem_bytes<true, kMoeBigTileRows, kBN>(), device_max);
  return e;
}

}  // namespace deepinfer::kernels
