// Router scores and selection, token permutation, grouped expert GEMMs (bf16 tensor cores through
// WMMA, fp32 accumulation) and the weighted combine.
#include "common.cuh"

#include <mma.h>

#include <climits>

namespace deepinfer::kernels {
namespace {

constexpr int kRouteWarps = 4;
constexpr int kMaxExperts = 1024;  // 32 per lane in route

// What routing needs besides the logits.
struct RouteArgs {
  const float* bias;
  const int32_t* tid2eid;
  int64_t table_rows;
  const int32_t* tokens;
  int score, top_k;
  float scaling;
  int32_t* experts;
  float* weights;
};

// Routes row t from its logits lg (read through L2: another block may have written them), one warp;
// sc: n_exp floats of shared memory for the scores.
__device__ void route_row(const float* lg, int64_t t, int n_exp, const RouteArgs& a, float* sc) {
  const int lane = threadIdx.x & 31;
  if (a.score == static_cast<int>(ScoreFunc::kSoftmax)) {
    float mx = -INFINITY;
    for (int e = lane; e < n_exp; e += 32) mx = fmaxf(mx, __ldcg(lg + e));
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int e = lane; e < n_exp; e += 32) sum += (sc[e] = expf(__ldcg(lg + e) - mx));
    sum = warp_sum(sum);
    for (int e = lane; e < n_exp; e += 32) sc[e] /= sum;
  } else if (a.score == static_cast<int>(ScoreFunc::kSigmoid)) {
    for (int e = lane; e < n_exp; e += 32) sc[e] = sigmoidf_(__ldcg(lg + e));
  } else {
    constexpr int kBatch = 8;  // logits loaded before any is scored: one round of latency per 8
    for (int e0 = lane; e0 < n_exp; e0 += kBatch * 32) {
      float x[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) x[u] = e0 + 32 * u < n_exp ? __ldcg(lg + e0 + 32 * u) : 0.0f;
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        if (e0 + 32 * u < n_exp) sc[e0 + 32 * u] = sqrtf(x[u] > 20.0f ? x[u] : log1pf(expf(x[u])));
    }
  }
  __syncwarp();
  // Lane i (< 32) keeps the i-th choice in a register: reading the choices back from global memory,
  // one dependent load each, made this tail (one warp, after every block's gate product) the slowest
  // part of the routing launch.
  const int top_k = a.top_k;
  int32_t* chosen = a.experts + t * top_k;
  int32_t mine = 0;
  if (a.tid2eid) {
    const int32_t tok = a.tokens[t];
    for (int i = lane; i < top_k; i += 32) {
      const int32_t e = (tok >= 0 && tok < a.table_rows) ? a.tid2eid[static_cast<int64_t>(tok) * top_k + i] : 0;
      chosen[i] = e;
      if (i == lane) mine = e;
    }
  } else {
    // The lane's experts lane + 32 j with their selection bias, in registers once (the rounds below
    // read them top_k times).
    constexpr int kPerLane = kMaxExperts / 32;
    float biased[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      biased[j] = e < n_exp ? sc[e] + (a.bias ? __ldg(a.bias + e) : 0.0f) : -INFINITY;
    }
    uint32_t taken = 0;  // bit j: expert lane + 32 j
    for (int i = 0; i < top_k; ++i) {
      float best = -INFINITY;
      int best_e = INT_MAX;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int e = lane + 32 * j;
        if (e >= n_exp || (taken & (1u << j))) continue;
        const float v = biased[j];
        if (v > best || (v == best && e < best_e)) {
          best = v;
          best_e = e;
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(kFull, best, o);
        const int oe = __shfl_xor_sync(kFull, best_e, o);
        if (ov > best || (ov == best && oe < best_e)) {
          best = ov;
          best_e = oe;
        }
      }
      if (best_e == INT_MAX) best_e = 0;  // NaN scores: keep the index valid
      if ((best_e & 31) == lane) taken |= 1u << (best_e >> 5);
      if (lane == 0) chosen[i] = best_e;
      if (i == lane) mine = best_e;  // (every lane holds best_e after the reduction)
    }
  }
  // weights[i] = score(choice i) / Σ_j score(choice j) * scaling, the sum in choice order.
  auto score_of = [&](int32_t e) { return (e >= 0 && e < n_exp) ? sc[e] : 0.0f; };
  if (top_k <= 32) {
    const float own = lane < top_k ? score_of(mine) : 0.0f;
    float sum = 0.0f;
    for (int i = 0; i < top_k; ++i) sum += __shfl_sync(kFull, own, i);
    if (lane < top_k) a.weights[t * top_k + lane] = own / (sum + 1e-20f) * a.scaling;
    return;
  }
  __syncwarp();
  if (lane == 0) {
    float sum = 0.0f;
    for (int i = 0; i < top_k; ++i) sum += score_of(chosen[i]);
    for (int i = 0; i < top_k; ++i) a.weights[t * top_k + i] = score_of(chosen[i]) / (sum + 1e-20f) * a.scaling;
  }
}

// One warp per row.
__global__ void __launch_bounds__(kRouteWarps * 32) route_kernel(const float* __restrict__ logits, int64_t rows, int n_exp, RouteArgs a) {
  pdl_begin();
  extern __shared__ float smem[];
  const int warp = threadIdx.x >> 5;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= rows) return;
  route_row(logits + t * n_exp, t, n_exp, a, smem + warp * n_exp);
}

constexpr int kGateShares = 4;                        // column shares per expert
constexpr int kGateExpertsPerBlock = 8 / kGateShares;  // blocks of 8 warps
constexpr int kGateLoads = 8;                          // 16-byte weight loads in flight per lane

// Decode (rows <= R): the router's fp32 gate product, lg[r][e] = x[r] · gate[e], a warp per (expert,
// column share), shares added in order; then the last block to finish routes the rows (route_row),
// one warp per row, and resets the counter. d % 4 == 0, rows 16-byte aligned.
template <int R>
__global__ void __launch_bounds__(256) gate_route_kernel(const float* __restrict__ x, int rows, int64_t d, const float* __restrict__ gate,
                                                         int n_exp, float* logits, unsigned* counter, RouteArgs a) {
  __shared__ float part[8][R];
  __shared__ float sc[R][kMaxExperts];
  __shared__ bool last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int e = blockIdx.x * kGateExpertsPerBlock + warp / kGateShares, share = warp % kGateShares;
  const int64_t n4 = d / 4, first = share * 32 + lane, step = 32 * kGateShares;
  const float4* w = reinterpret_cast<const float4*>(gate + static_cast<int64_t>(min(e, n_exp - 1)) * d);
  for (int64_t c = first; c < n4 && c < first + kGateLoads * step; c += step) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(w + c));
  pdl_begin();
  float acc[R] = {};
  if (e < n_exp) {
    for (int64_t c0 = first; c0 < n4; c0 += kGateLoads * step) {
      float4 wv[kGateLoads];
#pragma unroll
      for (int u = 0; u < kGateLoads; ++u) wv[u] = c0 + u * step < n4 ? __ldg(w + c0 + u * step) : make_float4(0, 0, 0, 0);
      float4 xv1[R == 1 ? kGateLoads : 1];  // one row: its activations loaded with the weights, not one by one
      if constexpr (R == 1) {
#pragma unroll
        for (int u = 0; u < kGateLoads; ++u)
          xv1[u] = c0 + u * step < n4 ? __ldg(reinterpret_cast<const float4*>(x) + c0 + u * step) : make_float4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kGateLoads; ++u) {
        if (c0 + u * step >= n4) break;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float4 xv = R == 1 ? xv1[u] : __ldg(reinterpret_cast<const float4*>(x + min(r, rows - 1) * d) + c0 + u * step);
          float v = acc[r];
          v = fmaf(wv[u].x, xv.x, v);
          v = fmaf(wv[u].y, xv.y, v);
          v = fmaf(wv[u].z, xv.z, v);
          acc[r] = fmaf(wv[u].w, xv.w, v);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float v = warp_sum(acc[r]);
    if (lane == 0) part[warp][r] = v;
  }
  __syncthreads();
  if (threadIdx.x < kGateExpertsPerBlock * R) {
    const int g = threadIdx.x / R, r = threadIdx.x % R, ex = blockIdx.x * kGateExpertsPerBlock + g;
    if (ex < n_exp && r < rows) {
      float v = 0.0f;
      for (int i = 0; i < kGateShares; ++i) v += part[g * kGateShares + i][r];
      logits[static_cast<int64_t>(r) * n_exp + ex] = v;
    }
  }
  __threadfence();  // the logits are visible before the count says so
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (warp < rows) route_row(logits + static_cast<int64_t>(warp) * n_exp, warp, n_exp, a, sc[warp]);
  if (threadIdx.x == 0) *counter = 0;
}

__global__ void moe_count_kernel(const int32_t* __restrict__ experts, int64_t entries, int n_exp, int32_t* counts,
                                 int32_t* __restrict__ local) {
  pdl_begin();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < entries; i += stride) {
    const int32_t e = experts[i];
    local[i] = (e >= 0 && e < n_exp) ? atomicAdd(&counts[e], 1) : -1;
  }
}

// One block: offsets = exclusive scan of counts; tiles of tile_rows rows per expert.
__global__ void moe_plan_kernel(const int32_t* __restrict__ counts, int n_exp, int tile_rows, int32_t* __restrict__ offsets,
                                int4* __restrict__ tiles, int32_t* __restrict__ n_tiles) {
  pdl_begin();
  __shared__ int red[33];
  int row_carry = 0, tile_carry = 0;
  for (int base = 0; base < n_exp; base += blockDim.x) {
    const int e = base + threadIdx.x;
    const int c = e < n_exp ? counts[e] : 0;
    const int nt = (c + tile_rows - 1) / tile_rows;
    int rows_total, tiles_total;
    const int row0 = row_carry + block_exclusive_scan(c, red, &rows_total);
    const int tile0 = tile_carry + block_exclusive_scan(nt, red, &tiles_total);
    if (e < n_exp) {
      offsets[e] = row0;
      for (int k = 0; k < nt; ++k) {
        const int b = row0 + k * tile_rows;
        tiles[tile0 + k] = make_int4(e, b, min(b + tile_rows, row0 + c), 0);
      }
    }
    row_carry += rows_total;
    tile_carry += tiles_total;
  }
  if (threadIdx.x == 0) {
    offsets[n_exp] = row_carry;
    *n_tiles = tile_carry;
  }
}

__global__ void moe_pos_kernel(const int32_t* __restrict__ experts, int64_t entries, const int32_t* __restrict__ offsets,
                               const int32_t* __restrict__ local, int top_k, int32_t* __restrict__ pos, int32_t* __restrict__ sources) {
  pdl_begin();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < entries; i += stride) {
    const int32_t p = local[i] >= 0 ? offsets[experts[i]] + local[i] : -1;
    pos[i] = p;
    if (sources && p >= 0) sources[p] = static_cast<int32_t>(i / top_k);
  }
}

__global__ void moe_slab_kernel(const int32_t* __restrict__ experts, int64_t entries, const int32_t* __restrict__ local,
                                const int32_t* __restrict__ base, int32_t* __restrict__ pos) {
  pdl_begin();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < entries; i += stride)
    pos[i] = local[i] >= 0 ? base[experts[i]] + local[i] : -1;
}

// One block per entry; four columns per step when vec (d % 4 == 0, aligned rows).
__global__ void moe_gather_kernel(const float* __restrict__ x, int64_t d, int top_k, const int32_t* __restrict__ pos, bool vec,
                                  __nv_bfloat16* __restrict__ xperm) {
  pdl_begin();
  const int64_t i = blockIdx.x;
  const int32_t p = pos[i];
  if (p < 0) return;
  const float* src = x + (i / top_k) * d;
  __nv_bfloat16* dst = xperm + static_cast<int64_t>(p) * d;
  if (vec) {
    for (int64_t c = threadIdx.x; c < d / 4; c += blockDim.x) {
      const float4 v = reinterpret_cast<const float4*>(src)[c];
      const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
      uint2 u;
      u.x = *reinterpret_cast<const uint32_t*>(&lo);
      u.y = *reinterpret_cast<const uint32_t*>(&hi);
      reinterpret_cast<uint2*>(dst)[c] = u;
    }
    return;
  }
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) dst[c] = __float2bfloat16_rn(src[c]);
}

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
// or (a dense product: tiles null) rows blockIdx.x * rows_per_block ... of group blockIdx.z, whose
// input and output start e * K and e * N columns in. False: no tile for this block.
struct BlockRows {
  int e, r0, r1;
  int64_t a_off, y_off;
};
__device__ __forceinline__ bool block_rows(const int4* __restrict__ tiles, const int32_t* __restrict__ n_tiles, int64_t dense_rows,
                                           int rows_per_block, int64_t K, int64_t N, BlockRows& b) {
  if (tiles) {
    if (static_cast<int>(blockIdx.x) >= *n_tiles) return false;
    const int4 t = tiles[blockIdx.x];
    b = {t.x, t.y, t.z, 0, 0};
    return true;
  }
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int e = static_cast<int>(blockIdx.z);
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
    for (int f = 0; f < 2; ++f)
      wmma::store_matrix_sync(Cs[w] + wm * 16 * kCld + wn * 32 + f * 16, acc[w][f], kCld, wmma::mem_row_major);
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
template <bool kGateUp, int kRows, int kCols>
__global__ void __launch_bounds__(V2Shape<kRows>::kThreads)
    moe_gemm_v2_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ W0, const __nv_bfloat16* __restrict__ W1,
                       int64_t K, int64_t N, float limit, const int4* __restrict__ tiles, const int32_t* __restrict__ n_tiles,
                       int64_t dense_rows, int64_t lda, int64_t ldy, __nv_bfloat16* __restrict__ H, float* __restrict__ Y) {
  pdl_begin();
  using namespace nvcuda;
  using Sh = V2Shape<kRows>;
  constexpr int NW = kGateUp ? 2 : 1, T = Sh::kThreads, FM = Sh::kFragM, FN = kCols / 32, CLD = kCols + 4;
  constexpr int kAElems = kRows * kV2Lds, kBElems = kCols * kV2Lds, kStage = v2_stage_elems<kGateUp, kRows, kCols>();
  static_assert(sizeof(float) * NW * kRows * CLD <= sizeof(__nv_bfloat16) * kStages * kStage, "epilogue fits the pipeline buffers");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* sm = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  BlockRows br;
  if (!block_rows(tiles, n_tiles, dense_rows, kRows, K, N, br)) return;
  const int e = br.e, r0 = br.r0, r1 = br.r1;
  A += br.a_off;
  if constexpr (!kGateUp) Y += br.y_off;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kCols;
  const int tid = threadIdx.x, warp = tid >> 5, wm = warp >> 1, wn = warp & 1;
  const __nv_bfloat16* Wb[NW];
  Wb[0] = W0 + static_cast<int64_t>(e) * N * K;
  if constexpr (kGateUp) Wb[NW - 1] = W1 + static_cast<int64_t>(e) * N * K;

  const int ktiles = static_cast<int>((K + kV2BK - 1) / kV2BK);
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

#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < ktiles) load_stage(st, st);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();  // stage kt has landed (this thread's copies)
    __syncthreads();               // ... everyone's; and everyone is done with the stage refilled next
    const int nk = kt + kStages - 1;
    if (nk < ktiles) load_stage(nk % kStages, nk);
    cp_async_commit();
    const __nv_bfloat16* As = sm + (kt % kStages) * kStage;
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

template <bool kGateUp, int kRows, int kCols = kBN>
cudaError_t launch_moe_v2(dim3 grid, Stream s, const __nv_bfloat16* A, const __nv_bfloat16* W0, const __nv_bfloat16* W1, int64_t K,
                          int64_t N, float limit, const int4* tiles, const int32_t* n_tiles, __nv_bfloat16* H, float* Y,
                          int64_t dense_rows = 0, int64_t lda = 0, int64_t ldy = 0) {
  constexpr size_t smem = v2_smem_bytes<kGateUp, kRows, kCols>();
  launch(moe_gemm_v2_kernel<kGateUp, kRows, kCols>, grid, V2Shape<kRows>::kThreads, smem, s)(
      A, W0, W1, K, N, limit, tiles, n_tiles, dense_rows, lda > 0 ? lda : K, ldy > 0 ? ldy : N, H, Y);
  return cudaGetLastError();
}

// Few tiles (small decode batches): 32-column blocks, so that ~4 blocks per multiprocessor stream
// weights instead of 1-2.
bool narrow_columns(int max_tiles, int64_t N) { return static_cast<int64_t>(max_tiles) * ((N + kBN - 1) / kBN) < 4 * 132; }

bool v2_usable(const void* a, const void* w0, const void* w1, int64_t K) {
  auto al = [](const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return K % 8 == 0 && al(a) && al(w0) && al(w1);
}

// fp32 variant for the backend's fp32 reference mode: one output column per thread, plain FMAs.
template <bool kGateUp>
__global__ void __launch_bounds__(128)
    moe_gemm_f32_kernel(const float* __restrict__ A, const float* __restrict__ W0, const float* __restrict__ W1, int64_t K, int64_t N,
                        float limit, const int4* __restrict__ tiles, const int32_t* __restrict__ n_tiles, int64_t dense_rows, int64_t lda,
                        int64_t ldy, float* __restrict__ H, float* __restrict__ Y) {
  pdl_begin();
  BlockRows br;
  if (!block_rows(tiles, n_tiles, dense_rows, kBM, K, N, br)) return;
  A += br.a_off;
  if constexpr (!kGateUp) Y += br.y_off;
  const int64_t col = static_cast<int64_t>(blockIdx.y) * 64 + (threadIdx.x & 63);
  if (col >= N) return;
  const float* w0 = W0 + (static_cast<int64_t>(br.e) * N + col) * K;
  const float* w1 = kGateUp ? W1 + (static_cast<int64_t>(br.e) * N + col) * K : nullptr;
  for (int64_t r = br.r0 + (threadIdx.x >> 6); r < br.r1; r += 2) {
    const float* a = A + r * lda;
    float g = 0.0f, u = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      g += a[k] * w0[k];
      if constexpr (kGateUp) u += a[k] * w1[k];
    }
    if constexpr (kGateUp) {
      H[r * N + col] = swiglu_clamped(g, u, limit);
    } else {
      Y[r * ldy + col] = g;
    }
  }
}

__global__ void moe_gather_f32_kernel(const float* __restrict__ x, int64_t d, int top_k, const int32_t* __restrict__ pos,
                                      float* __restrict__ xperm) {
  pdl_begin();
  const int64_t i = blockIdx.x;
  const int32_t p = pos[i];
  if (p < 0) return;
  const float* src = x + (i / top_k) * d;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) xperm[static_cast<int64_t>(p) * d + c] = src[c];
}

// Four consecutive values of y as floats (fp32, or bf16: the wgmma down product's output).
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 load4(const __nv_bfloat16* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  const float2 a = unpack_bf16(u.x), b = unpack_bf16(u.y);
  return make_float4(a.x, a.y, b.x, b.y);
}

// grid (rows, column chunks of 256 threads): one column per thread (four when vec: d % 4 == 0,
// aligned rows), so that a small batch still spreads its loads over many blocks.
template <typename T>
__global__ void moe_combine_kernel(const T* __restrict__ y, const int32_t* __restrict__ pos, const float* __restrict__ weights,
                                   int top_k, int64_t d, bool vec, float* __restrict__ out) {
  pdl_begin();
  const int64_t t = blockIdx.x;
  if (vec) {
    const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
    if (c >= d / 4) return;
    float4 acc = reinterpret_cast<const float4*>(out + t * d)[c];
    for (int i = 0; i < top_k; ++i) {
      const int32_t p = pos[t * top_k + i];
      if (p < 0) continue;
      const float wt = weights[t * top_k + i];
      const float4 v = load4(y + static_cast<int64_t>(p) * d + 4 * c);
      acc.x += v.x * wt;
      acc.y += v.y * wt;
      acc.z += v.z * wt;
      acc.w += v.w * wt;
    }
    reinterpret_cast<float4*>(out + t * d)[c] = acc;
    return;
  }
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c < d) {
    float acc = out[t * d + c];
    for (int i = 0; i < top_k; ++i) {
      const int32_t p = pos[t * top_k + i];
      if (p >= 0) acc += static_cast<float>(y[static_cast<int64_t>(p) * d + c]) * weights[t * top_k + i];
    }
    out[t * d + c] = acc;
  }
}

}  // namespace

cudaError_t prepare_moe(size_t device_max) {
  cudaError_t e = allow_smem<moe_gemm_v2_kernel<true, kMoeTileRows, 32>>(v2_smem_bytes<true, kMoeTileRows, 32>(), device_max);
  if (e == cudaSuccess) e = allow_smem<moe_gemm_v2_kernel<true, kMoeTileRows, kBN>>(v2_smem_bytes<true, kMoeTileRows, kBN>(), device_max);
  if (e == cudaSuccess) e = allow_smem<moe_gemm_v2_kernel<true, kMoeBigTileRows, kBN>>(v2_smem_bytes<true, kMoeBigTileRows, kBN>(), device_max);
  if (e == cudaSuccess) e = allow_smem<moe_gemm_v2_kernel<false, kMoeTileRows, 32>>(v2_smem_bytes<false, kMoeTileRows, 32>(), device_max);
  if (e == cudaSuccess) e = allow_smem<moe_gemm_v2_kernel<false, kMoeTileRows, kBN>>(v2_smem_bytes<false, kMoeTileRows, kBN>(), device_max);
  if (e == cudaSuccess)
    e = allow_smem<moe_gemm_v2_kernel<false, kMoeBigTileRows, kBN>>(v2_smem_bytes<false, kMoeBigTileRows, kBN>(), device_max);
  return e;
}

cudaError_t route(const float* logits, int64_t rows, int n_exp, const float* bias, const int32_t* tid2eid, int64_t table_rows,
                  const int32_t* tokens, ScoreFunc score, int top_k, float scaling, int32_t* experts, float* weights,
                  Stream s) {
  if (rows <= 0) return cudaSuccess;
  if (n_exp <= 0 || n_exp > kMaxExperts || top_k <= 0 || (!tid2eid && top_k > n_exp)) return cudaErrorInvalidValue;
  const size_t smem = sizeof(float) * kRouteWarps * n_exp;
  const RouteArgs a{bias, tid2eid, table_rows, tokens, static_cast<int>(score), top_k, scaling, experts, weights};
  launch(route_kernel, blocks_for(rows, kRouteWarps), kRouteWarps * 32, smem, s)(logits, rows, n_exp, a);
  return cudaGetLastError();
}

bool gate_route_supported(const float* x, int64_t rows, int64_t d, const float* gate) {
  auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return rows >= 1 && rows <= kGateRouteMaxRows && d > 0 && d % 4 == 0 && al(x) && al(gate);
}

cudaError_t gate_route(const float* x, int64_t rows, int64_t d, const float* gate, int n_exp, const float* bias, const int32_t* tid2eid,
                       int64_t table_rows, const int32_t* tokens, ScoreFunc score, int top_k, float scaling, float* logits,
                       unsigned* counter, int32_t* experts, float* weights, Stream s) {
  if (rows <= 0) return cudaSuccess;
  if (!gate_route_supported(x, rows, d, gate) || n_exp <= 0 || n_exp > kMaxExperts || top_k <= 0 || (!tid2eid && top_k > n_exp))
    return cudaErrorInvalidValue;
  const RouteArgs a{bias, tid2eid, table_rows, tokens, static_cast<int>(score), top_k, scaling, experts, weights};
  const unsigned grid = static_cast<unsigned>((n_exp + kGateExpertsPerBlock - 1) / kGateExpertsPerBlock);
  const int r = static_cast<int>(rows);
  if (r == 1)
    launch(gate_route_kernel<1>, grid, 256, 0, s)(x, r, d, gate, n_exp, logits, counter, a);
  else if (r == 2)
    launch(gate_route_kernel<2>, grid, 256, 0, s)(x, r, d, gate, n_exp, logits, counter, a);
  else
    launch(gate_route_kernel<4>, grid, 256, 0, s)(x, r, d, gate, n_exp, logits, counter, a);
  return cudaGetLastError();
}

cudaError_t moe_plan(const int32_t* experts, int64_t entries, int n_exp, MoePlan p, Stream s) {
  if (entries <= 0) return cudaSuccess;
  if (p.tile_rows != kMoeTileRows && p.tile_rows != kMoeBigTileRows) return cudaErrorInvalidValue;
  cudaError_t e = cudaMemsetAsync(p.counts, 0, sizeof(int32_t) * n_exp, s.id);
  if (e != cudaSuccess) return e;
  unsigned g = blocks_for(entries, 256);
  launch(moe_count_kernel, g > 4096 ? 4096 : g, 256, 0, s)(experts, entries, n_exp, p.counts, p.local);
  launch(moe_plan_kernel, 1, 1024, 0, s)(p.counts, n_exp, p.tile_rows, p.offsets, p.tiles, p.n_tiles);
  launch(moe_pos_kernel, g > 4096 ? 4096 : g, 256, 0, s)(experts, entries, p.offsets, p.local, p.top_k, p.pos, p.sources);
  return cudaGetLastError();
}

cudaError_t moe_slab_positions(const int32_t* experts, const int32_t* local, int64_t entries, const int32_t* base, int32_t* pos,
                               Stream s) {
  if (entries <= 0) return cudaSuccess;
  const unsigned g = blocks_for(entries, 256);
  launch(moe_slab_kernel, g > 4096 ? 4096 : g, 256, 0, s)(experts, entries, local, base, pos);
  return cudaGetLastError();
}

cudaError_t moe_gather(const float* x, int64_t d, int64_t entries, int top_k, const int32_t* pos, bf16_t* xperm,
                       Stream s) {
  if (entries <= 0) return cudaSuccess;
  const bool vec = d % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(xperm) % 8 == 0;
  launch(moe_gather_kernel, static_cast<unsigned>(entries), 256, 0, s)(x, d, top_k, pos, vec, reinterpret_cast<__nv_bfloat16*>(xperm));
  return cudaGetLastError();
}

cudaError_t moe_gate_up(const bf16_t* xperm, const bf16_t* w1, const bf16_t* w3, int64_t d, int64_t inter, float limit,
                        const int4* tiles, const int32_t* n_tiles, int max_tiles, int tile_rows, bf16_t* h, Stream s) {
  if (max_tiles <= 0) return cudaSuccess;
  const int64_t nb = (inter + kBN - 1) / kBN;
  if (nb > 65535) return cudaErrorInvalidValue;
  dim3 grid(static_cast<unsigned>(max_tiles), static_cast<unsigned>(nb));
  const auto* x = reinterpret_cast<const __nv_bfloat16*>(xperm);
  const auto* a = reinterpret_cast<const __nv_bfloat16*>(w1);
  const auto* b = reinterpret_cast<const __nv_bfloat16*>(w3);
  auto* hb = reinterpret_cast<__nv_bfloat16*>(h);
  const bool v2 = v2_usable(xperm, w1, w3, d);
  if (tile_rows == kMoeBigTileRows) {
    if (!v2) return cudaErrorInvalidValue;
    return launch_moe_v2<true, kMoeBigTileRows>(grid, s, x, a, b, d, inter, limit, tiles, n_tiles, hb, nullptr);
  }
  if (tile_rows != kMoeTileRows) return cudaErrorInvalidValue;
  if (v2 && narrow_columns(max_tiles, inter))
    return launch_moe_v2<true, kMoeTileRows, 32>(dim3(grid.x, static_cast<unsigned>((inter + 31) / 32)), s, x, a, b, d, inter, limit, tiles,
                                                 n_tiles, hb, nullptr);
  if (v2) return launch_moe_v2<true, kMoeTileRows>(grid, s, x, a, b, d, inter, limit, tiles, n_tiles, hb, nullptr);
  launch(moe_gemm_kernel<true>, grid, 128, 0, s)(x, a, b, d, inter, limit, tiles, n_tiles, 0, d, inter, hb, nullptr);
  return cudaGetLastError();
}

cudaError_t moe_down(const bf16_t* h, const bf16_t* w2, int64_t inter, int64_t d, const int4* tiles, const int32_t* n_tiles,
                     int max_tiles, int tile_rows, float* y, Stream s) {
  if (max_tiles <= 0) return cudaSuccess;
  const int64_t nb = (d + kBN - 1) / kBN;
  if (nb > 65535) return cudaErrorInvalidValue;
  dim3 grid(static_cast<unsigned>(max_tiles), static_cast<unsigned>(nb));
  const auto* hb = reinterpret_cast<const __nv_bfloat16*>(h);
  const auto* w = reinterpret_cast<const __nv_bfloat16*>(w2);
  const bool v2 = v2_usable(h, w2, nullptr, inter);
  if (tile_rows == kMoeBigTileRows) {
    if (!v2) return cudaErrorInvalidValue;
    return launch_moe_v2<false, kMoeBigTileRows>(grid, s, hb, w, nullptr, inter, d, 0.0f, tiles, n_tiles, nullptr, y);
  }
  if (tile_rows != kMoeTileRows) return cudaErrorInvalidValue;
  if (v2 && narrow_columns(max_tiles, d))
    return launch_moe_v2<false, kMoeTileRows, 32>(dim3(grid.x, static_cast<unsigned>((d + 31) / 32)), s, hb, w, nullptr, inter, d, 0.0f,
                                                  tiles, n_tiles, nullptr, y);
  if (v2) return launch_moe_v2<false, kMoeTileRows>(grid, s, hb, w, nullptr, inter, d, 0.0f, tiles, n_tiles, nullptr, y);
  launch(moe_gemm_kernel<false>, grid, 128, 0, s)(hb, w, nullptr, inter, d, 0.0f, tiles, n_tiles, 0, inter, d, nullptr, y);
  return cudaGetLastError();
}

cudaError_t moe_gather_f32(const float* x, int64_t d, int64_t entries, int top_k, const int32_t* pos, float* xperm, Stream s) {
  if (entries <= 0) return cudaSuccess;
  launch(moe_gather_f32_kernel, static_cast<unsigned>(entries), 256, 0, s)(x, d, top_k, pos, xperm);
  return cudaGetLastError();
}

cudaError_t moe_gate_up_f32(const float* xperm, const float* w1, const float* w3, int64_t d, int64_t inter, float limit,
                            const int4* tiles, const int32_t* n_tiles, int max_tiles, float* h, Stream s) {
  if (max_tiles <= 0) return cudaSuccess;
  const int64_t nb = (inter + 63) / 64;
  if (nb > 65535) return cudaErrorInvalidValue;
  launch(moe_gemm_f32_kernel<true>, dim3(static_cast<unsigned>(max_tiles), static_cast<unsigned>(nb)), 128, 0, s)(
      xperm, w1, w3, d, inter, limit, tiles, n_tiles, 0, d, inter, h, nullptr);
  return cudaGetLastError();
}

cudaError_t moe_down_f32(const float* h, const float* w2, int64_t inter, int64_t d, const int4* tiles, const int32_t* n_tiles,
                         int max_tiles, float* y, Stream s) {
  if (max_tiles <= 0) return cudaSuccess;
  const int64_t nb = (d + 63) / 64;
  if (nb > 65535) return cudaErrorInvalidValue;
  launch(moe_gemm_f32_kernel<false>, dim3(static_cast<unsigned>(max_tiles), static_cast<unsigned>(nb)), 128, 0, s)(
      h, w2, nullptr, inter, d, 0.0f, tiles, n_tiles, 0, inter, d, nullptr, y);
  return cudaGetLastError();
}

namespace {
template <typename T>
cudaError_t launch_moe_combine(const T* y, const int32_t* pos, const float* weights, int64_t rows, int top_k, int64_t d, float* out,
                               Stream s) {
  if (rows <= 0 || d <= 0) return cudaSuccess;
  const bool vec = d % 4 == 0 && reinterpret_cast<uintptr_t>(y) % (4 * sizeof(T)) == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const int64_t chunks = (d / (vec ? 4 : 1) + 255) / 256;
  if (chunks > 65535) return cudaErrorInvalidValue;
  launch(moe_combine_kernel<T>, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(chunks)), 256, 0, s)(y, pos, weights, top_k, d, vec,
                                                                                                            out);
  return cudaGetLastError();
}
}  // namespace

cudaError_t moe_combine(const float* y, const int32_t* pos, const float* weights, int64_t rows, int top_k, int64_t d,
                        float* out, Stream s) {
  return launch_moe_combine(y, pos, weights, rows, top_k, d, out, s);
}

cudaError_t moe_combine(const bf16_t* y, const int32_t* pos, const float* weights, int64_t rows, int top_k, int64_t d,
                        float* out, Stream s) {
  return launch_moe_combine(reinterpret_cast<const __nv_bfloat16*>(y), pos, weights, rows, top_k, d, out, s);
}

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

// --- dense products on the tile kernels (batch-invariant mode): every output is the same sequence of
// 16x16x16 mma steps over K (zero-filled past it) whatever the tile shape, so the tile rows and
// column widths chosen here by the row count change no bit of a row's result.

cudaError_t tile_linear(const bf16_t* x, int64_t rows, int64_t k, int64_t ldx, const bf16_t* w, int64_t n, int groups, float* y,
                        int64_t ldy, Stream s) {
  if (rows <= 0 || n <= 0 || groups <= 0) return cudaSuccess;
  const auto* a = reinterpret_cast<const __nv_bfloat16*>(x);
  const auto* b = reinterpret_cast<const __nv_bfloat16*>(w);
  const bool v2 = v2_usable(x, w, nullptr, k) && ldx % 8 == 0;
  const int tile_rows = v2 && rows >= 4 * kMoeBigTileRows ? kMoeBigTileRows : kMoeTileRows;
  const int64_t tiles = (rows + tile_rows - 1) / tile_rows;
  const bool narrow = v2 && tile_rows == kMoeTileRows && narrow_columns(static_cast<int>(tiles) * groups, n);
  const int64_t nb = (n + (narrow ? 31 : kBN - 1)) / (narrow ? 32 : kBN);
  if (tiles > INT32_MAX || nb > 65535 || groups > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(nb), static_cast<unsigned>(groups));
  if (!v2) {
    launch(moe_gemm_kernel<false>, grid, 128, 0, s)(a, b, nullptr, k, n, 0.0f, nullptr, nullptr, rows, ldx, ldy, nullptr, y);
    return cudaGetLastError();
  }
  if (tile_rows == kMoeBigTileRows)
    return launch_moe_v2<false, kMoeBigTileRows>(grid, s, a, b, nullptr, k, n, 0.0f, nullptr, nullptr, nullptr, y, rows, ldx, ldy);
  if (narrow)
    return launch_moe_v2<false, kMoeTileRows, 32>(grid, s, a, b, nullptr, k, n, 0.0f, nullptr, nullptr, nullptr, y, rows, ldx, ldy);
  return launch_moe_v2<false, kMoeTileRows>(grid, s, a, b, nullptr, k, n, 0.0f, nullptr, nullptr, nullptr, y, rows, ldx, ldy);
}

cudaError_t tile_gate_up(const bf16_t* x, int64_t rows, int64_t d, const bf16_t* w1, const bf16_t* w3, int64_t inter, float limit,
                         bf16_t* h, Stream s) {
  if (rows <= 0 || inter <= 0) return cudaSuccess;
  const auto* a = reinterpret_cast<const __nv_bfloat16*>(x);
  const auto* g = reinterpret_cast<const __nv_bfloat16*>(w1);
  const auto* u = reinterpret_cast<const __nv_bfloat16*>(w3);
  auto* hb = reinterpret_cast<__nv_bfloat16*>(h);
  const bool v2 = v2_usable(x, w1, w3, d);
  const int tile_rows = v2 && rows >= 4 * kMoeBigTileRows ? kMoeBigTileRows : kMoeTileRows;
  const int64_t tiles = (rows + tile_rows - 1) / tile_rows;
  const bool narrow = v2 && tile_rows == kMoeTileRows && narrow_columns(static_cast<int>(tiles), inter);
  const int64_t nb = (inter + (narrow ? 31 : kBN - 1)) / (narrow ? 32 : kBN);
  if (tiles > INT32_MAX || nb > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(nb));
  if (!v2) {
    launch(moe_gemm_kernel<true>, grid, 128, 0, s)(a, g, u, d, inter, limit, nullptr, nullptr, rows, d, inter, hb, nullptr);
    return cudaGetLastError();
  }
  if (tile_rows == kMoeBigTileRows)
    return launch_moe_v2<true, kMoeBigTileRows>(grid, s, a, g, u, d, inter, limit, nullptr, nullptr, hb, nullptr, rows, d, inter);
  if (narrow)
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
  const int64_t total = rows * n * groups;
  launch(f32_chunk_sum_kernel, blocks_for(total, 256), 256, 0, s)(part, rows, n * groups, chunks, y, ldy);
  return cudaGetLastError();
}

int64_t tile_linear_f32_scratch(int64_t rows, int64_t k, int64_t n, int groups) {
  const int chunks = f32_chunks(k);
  return chunks > 1 ? rows * n * groups * chunks : 0;
}

}  // namespace deepinfer::kernels
