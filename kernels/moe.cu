// Router scores and selection, token permutation, grouped expert GEMMs (bf16 tensor cores through
// WMMA, fp32 accumulation) and the weighted combine.
#include "common.cuh"
#include "expert_tiles.cuh"

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
      const int32_t p = pos ? pos[t * top_k + i] : static_cast<int32_t>(t * top_k + i);
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
      const int32_t p = pos ? pos[t * top_k + i] : static_cast<int32_t>(t * top_k + i);
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
  return rows >= 1 && rows <= kGateRouteMaxRows && d > 0 && d % 4 == 0 && aligned16(x) && aligned16(gate);
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
  const bool vec = d % 4 == 0 && aligned16(x) && reinterpret_cast<uintptr_t>(xperm) % 8 == 0;
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
      xperm, w1, w3, d, inter, limit, tiles, n_tiles, h, nullptr);
  return cudaGetLastError();
}

cudaError_t moe_down_f32(const float* h, const float* w2, int64_t inter, int64_t d, const int4* tiles, const int32_t* n_tiles,
                         int max_tiles, float* y, Stream s) {
  if (max_tiles <= 0) return cudaSuccess;
  const int64_t nb = (d + 63) / 64;
  if (nb > 65535) return cudaErrorInvalidValue;
  launch(moe_gemm_f32_kernel<false>, dim3(static_cast<unsigned>(max_tiles), static_cast<unsigned>(nb)), 128, 0, s)(
      h, w2, nullptr, inter, d, 0.0f, tiles, n_tiles, nullptr, y);
  return cudaGetLastError();
}

namespace {
template <typename T>
cudaError_t launch_moe_combine(const T* y, const int32_t* pos, const float* weights, int64_t rows, int top_k, int64_t d, float* out,
                               Stream s) {
  if (rows <= 0 || d <= 0) return cudaSuccess;
  const bool vec = d % 4 == 0 && reinterpret_cast<uintptr_t>(y) % (4 * sizeof(T)) == 0 && aligned16(out);
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

}  // namespace deepinfer::kernels
