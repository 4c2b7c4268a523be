// Hyper-connections: the mixes of the streams (fp32, few outputs), the collapse into a sublayer's input
// with its norm, the Sinkhorn of the combination matrix, the new streams, and at decode the next
// site's mix computed with them. The tensor-core mix of many rows is hc_mix_mma.cu.
#include "common.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kMaxHc = 16;

// One step of a many-value warp sum: a lane keeps the lower (lane & off == 0) or upper H of its 2H
// values, adding its partner's copy of that half; returns the offset of the kept half.
template <int H>
__device__ __forceinline__ int halve_over_warp(float* v, int lane, int off) {
  const bool upper = lane & off;
#pragma unroll
  for (int i = 0; i < H; ++i) {
    const float keep = upper ? v[H + i] : v[i], send = upper ? v[i] : v[H + i];
    v[i] = keep + __shfl_xor_sync(kFull, send, off);
  }
  return upper ? H : 0;
}

// A lane's share of a mix over four columns (x then y, z, w) and of their sum of squares: the one
// order mix_partial_kernel and hc_post_mix_kernel both use, so either gives a row the same bits.
__device__ __forceinline__ float mix_dot4(float a, float4 w, float4 x) {
  return fmaf(w.w, x.w, fmaf(w.z, x.z, fmaf(w.y, x.y, fmaf(w.x, x.x, a))));
}
__device__ __forceinline__ float sumsq4(float a, float4 x) { return fmaf(x.w, x.w, fmaf(x.z, x.z, fmaf(x.y, x.y, fmaf(x.x, x.x, a)))); }

constexpr int kMixTileRows = 32, kMixRowsPerTask = 8, kMixOutsPerTask = 6;

// grid (row tiles of 32, column chunks of kMixChunk), 8 warps: partial[row][chunk][j] for j < n, and
// [n] the chunk's sum of squares (for the RMS norm the mixes apply). The tile's rows and the chunk of
// every weight row sit in shared memory; a warp task computes 8 rows x 6 outputs from 16-byte reads,
// so each value read feeds several products, and the chunk is long enough (4 float4 per lane) that
// the final warp reductions do not dominate. Per output, lanes sum strided columns, then the warp
// reduces: a row's value does not depend on the rest of the batch.
__global__ void __launch_bounds__(256) mix_partial_kernel(const float* __restrict__ x, int64_t rows, int64_t K,
                                                          const float* __restrict__ w, int n, int splits, bool vec,
                                                          float* __restrict__ partial) {
  pdl_begin();
  extern __shared__ float mix_smem[];
  float* xs = mix_smem;                         // [kMixTileRows][kMixChunk]
  float* ws = xs + kMixTileRows * kMixChunk;    // [n][kMixChunk]
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kMixTileRows;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * kMixChunk;
  const int len = static_cast<int>(min(static_cast<int64_t>(kMixChunk), K - k0));
  const int tile_rows = static_cast<int>(min(static_cast<int64_t>(kMixTileRows), rows - r0));
  // rows x this chunk of a row-major [*, K] matrix into shared memory, zero past K. vec (K % 4 == 0,
  // aligned): 16-byte asynchronous copies, all in flight at once.
  auto stage = [&](float* dst, const float* src, int n_rows) {
    if (vec) {
      constexpr int c4s = kMixChunk / 4;
      for (int i = threadIdx.x; i < n_rows * c4s; i += blockDim.x) {
        const int r = i / c4s, c = (i % c4s) * 4;
        cp_async16(dst + r * kMixChunk + c, src + r * K + k0 + min(c, len - 4), c < len);
      }
    } else {
      for (int i = threadIdx.x; i < n_rows * kMixChunk; i += blockDim.x) {
        const int r = i / kMixChunk, c = i % kMixChunk;
        dst[i] = c < len ? src[r * K + k0 + c] : 0.0f;
      }
    }
  };
  stage(xs, x + r0 * K, tile_rows);
  stage(ws, w, n);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row_groups = (tile_rows + kMixRowsPerTask - 1) / kMixRowsPerTask;
  const int out_groups = (n + kMixOutsPerTask - 1) / kMixOutsPerTask;
  for (int task = warp; task < row_groups * out_groups; task += 8) {
    const int ra = (task / out_groups) * kMixRowsPerTask, ja = (task % out_groups) * kMixOutsPerTask;
    float acc[kMixRowsPerTask][kMixOutsPerTask];
#pragma unroll
    for (int r = 0; r < kMixRowsPerTask; ++r)
#pragma unroll
      for (int j = 0; j < kMixOutsPerTask; ++j) acc[r][j] = 0.0f;
    for (int c = lane * 4; c < kMixChunk; c += 128) {
      const float4 zero = make_float4(0, 0, 0, 0);
      float4 xv[kMixRowsPerTask], wv[kMixOutsPerTask];
#pragma unroll
      for (int r = 0; r < kMixRowsPerTask; ++r)
        xv[r] = ra + r < tile_rows ? *reinterpret_cast<const float4*>(xs + (ra + r) * kMixChunk + c) : zero;
#pragma unroll
      for (int j = 0; j < kMixOutsPerTask; ++j) wv[j] = ja + j < n ? *reinterpret_cast<const float4*>(ws + (ja + j) * kMixChunk + c) : zero;
#pragma unroll
      for (int r = 0; r < kMixRowsPerTask; ++r)
#pragma unroll
        for (int j = 0; j < kMixOutsPerTask; ++j) acc[r][j] = mix_dot4(acc[r][j], wv[j], xv[r]);
    }
    // The 48 sums over the warp at once: each butterfly step halves the values a lane carries (it
    // keeps one half, adds its partner's copy of that half), 48 shuffles instead of 48 x 5.
    constexpr int kTask = kMixRowsPerTask * kMixOutsPerTask;
    static_assert(kTask == 48, "the halving steps below assume 48 values");
    float v[kTask];
#pragma unroll
    for (int i = 0; i < kTask; ++i) v[i] = acc[i / kMixOutsPerTask][i % kMixOutsPerTask];
    int base = halve_over_warp<24>(v, lane, 16);  // (in this order) index of v[0] among the 48
    base += halve_over_warp<12>(v, lane, 8);
    base += halve_over_warp<6>(v, lane, 4);
    base += halve_over_warp<3>(v, lane, 2);
#pragma unroll
    for (int i = 0; i < 3; ++i) v[i] += __shfl_xor_sync(kFull, v[i], 1);
    if ((lane & 1) == 0)
#pragma unroll
      for (int i = 0; i < 3; ++i) {
        const int r = (base + i) / kMixOutsPerTask, j = (base + i) % kMixOutsPerTask;
        if (ra + r < tile_rows && ja + j < n) partial[((r0 + ra + r) * splits + blockIdx.y) * (n + 1) + ja + j] = v[i];
      }
  }
  for (int r = warp; r < tile_rows; r += 8) {
    float ss = 0.0f;
    for (int c = lane * 4; c < kMixChunk; c += 128) ss = sumsq4(ss, *reinterpret_cast<const float4*>(xs + r * kMixChunk + c));
    ss = warp_sum(ss);
    if (lane == 0) partial[((r0 + r) * splits + blockIdx.y) * (n + 1) + n] = ss;
  }
}

// One block per row: out[t * ld] = Σ x[t, :]² (the sum of squares next to a mix cuBLAS computed).
__global__ void row_sumsq_kernel(const float* __restrict__ x, int64_t K, float* __restrict__ out, int64_t ld) {
  pdl_begin();
  __shared__ float red[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * K;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < K; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss, red);
  if (threadIdx.x == 0) out[static_cast<int64_t>(blockIdx.x) * ld] = ss;
}

// A hyper-connection block's view of its row: the mix (summed over the partials in a fixed order) and
// the inverse RMS of the row's hc * d stream values, in shared memory.
__device__ void load_mix(const float* __restrict__ partial, int splits, int n_mix, int64_t t, int64_t n_values, float norm_eps,
                         float* mix, float* inv) {
  // One warp per value, lanes over the splits (a fixed summation tree); every warp issues the loads of
  // all its values before reducing any (a round of latency, not one per value).
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  constexpr int kRounds = 4;  // values per warp at once: (2 + 4) 4 + 1 = 25 of 8 warps take 4
  for (int j0 = warp; j0 <= n_mix; j0 += kRounds * nw) {
    float acc[kRounds];
#pragma unroll
    for (int i = 0; i < kRounds; ++i) {
      const int j = j0 + i * nw;
      acc[i] = 0.0f;
      if (j <= n_mix)
        for (int sp = lane; sp < splits; sp += 32) acc[i] += partial[(t * splits + sp) * (n_mix + 1) + j];
    }
#pragma unroll
    for (int i = 0; i < kRounds; ++i) {
      const float v = warp_sum(acc[i]);
      if (lane == 0 && j0 + i * nw <= n_mix) mix[j0 + i * nw] = v;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) *inv = 1.0f / sqrtf(mix[n_mix] / static_cast<float>(n_values) + norm_eps);
  __syncthreads();
}

// The weighted sum of a row's hc streams over the block's column chunks: chunk `first`, then every
// `step`-th, of blockDim.x columns (or float4s when vec). Returns the sum of squares of the values
// this thread wrote, in rms_norm_kernel's order.
__device__ __forceinline__ float collapse_columns(const float* __restrict__ s, const float* pre, int hc, int64_t d, int64_t first,
                                                  int64_t step, bool vec, float* __restrict__ out) {
  float ss = 0.0f;
  if (vec) {
    // kC of the thread's column chunks x kS streams per batch of loads (one round of latency where
    // the loop had one per load); the same sums in the same order.
    constexpr int kC = 4, kS = 4;
    const int64_t n4 = d / 4, stride = step * blockDim.x;
    for (int64_t k0 = first * blockDim.x + threadIdx.x; k0 < n4; k0 += kC * stride) {
      float4 acc[kC];
#pragma unroll
      for (int c = 0; c < kC; ++c) acc[c] = make_float4(0, 0, 0, 0);
      for (int i0 = 0; i0 < hc; i0 += kS) {
        float4 v[kC][kS];
#pragma unroll
        for (int c = 0; c < kC; ++c)
#pragma unroll
          for (int u = 0; u < kS; ++u)
            v[c][u] = k0 + c * stride < n4 && i0 + u < hc ? reinterpret_cast<const float4*>(s + (i0 + u) * d)[k0 + c * stride]
                                                          : make_float4(0, 0, 0, 0);
#pragma unroll
        for (int c = 0; c < kC; ++c)
#pragma unroll
          for (int u = 0; u < kS; ++u)
            if (i0 + u < hc) {
              const float p = pre[i0 + u];
              acc[c].x += p * v[c][u].x;
              acc[c].y += p * v[c][u].y;
              acc[c].z += p * v[c][u].z;
              acc[c].w += p * v[c][u].w;
            }
      }
#pragma unroll
      for (int c = 0; c < kC; ++c)
        if (k0 + c * stride < n4) {
          reinterpret_cast<float4*>(out)[k0 + c * stride] = acc[c];
          ss += acc[c].x * acc[c].x + acc[c].y * acc[c].y + acc[c].z * acc[c].z + acc[c].w * acc[c].w;
        }
    }
    return ss;
  }
  for (int64_t k = first * blockDim.x + threadIdx.x; k < d; k += step * blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < hc; ++i) acc += pre[i] * s[i * d + k];
    out[k] = acc;
    ss += acc * acc;
  }
  return ss;
}

// out (d values, written by this block with collapse_columns from column 0, step 1) times the inverse
// RMS of the row (the block's sum of squares) and w: rms_norm_kernel's arithmetic. Each thread
// rescales the values it wrote itself.
__device__ __forceinline__ void normalise_collapsed(float ss, int64_t d, const float* __restrict__ w, float eps, bool vec, float* out,
                                                    float* red) {
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  if (vec) {
    constexpr int kC = 4;  // chunks loaded before any is written back
    const int64_t n4 = d / 4;
    for (int64_t k0 = threadIdx.x; k0 < n4; k0 += kC * blockDim.x) {
      float4 v[kC], wv[kC];
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        const int64_t k = k0 + c * blockDim.x;
        v[c] = k < n4 ? reinterpret_cast<const float4*>(out)[k] : make_float4(0, 0, 0, 0);
        wv[c] = k < n4 ? reinterpret_cast<const float4*>(w)[k] : make_float4(0, 0, 0, 0);
      }
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        const int64_t k = k0 + c * blockDim.x;
        const float4 x = make_float4(v[c].x * inv, v[c].y * inv, v[c].z * inv, v[c].w * inv);
        if (k < n4) reinterpret_cast<float4*>(out)[k] = make_float4(wv[c].x * x.x, wv[c].y * x.y, wv[c].z * x.z, wv[c].w * x.w);
      }
    }
    return;
  }
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) out[k] = w[k] * (out[k] * inv);
}

// Sinkhorn normalisation of one row's n x n combination matrix. Sums run in the reference's order (j,
// then i ascending), so every element is divided by the value the serial loop would use.
//
// Small matrices (n * n <= 32) in one warp's registers: lane e holds element (e / n, e % n) and
// gathers its row or column by shuffles (every lane of the warp takes part). Returns its element.
// N > 0: n known at compile time (V4's 4), so that each row's or column's shuffles issue together
// (the iterations are a serial chain: its length is the kernel's).
template <int N>
__device__ float sinkhorn_warp(float logit, int n_rt, int iters, float eps) {
  const int n = N > 0 ? N : n_rt;
  const int e = threadIdx.x & 31, i = e / n, j = e % n;
  float mx = -INFINITY;
#pragma unroll
  for (int k = 0; k < n; ++k) mx = fmaxf(mx, __shfl_sync(kFull, logit, i * n + k));
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < n; ++k) sum += expf(__shfl_sync(kFull, logit, i * n + k) - mx);
  float v = expf(logit - mx) / sum + eps;  // softmax of the row, then + eps
  for (int it = 0; it < iters; ++it) {
    if (it > 0) {
      float r = 0.0f;
#pragma unroll
      for (int k = 0; k < n; ++k) r += __shfl_sync(kFull, v, i * n + k);
      v = v / (r + eps);
    }
    float c = 0.0f;
#pragma unroll
    for (int k = 0; k < n; ++k) c += __shfl_sync(kFull, v, k * n + j);
    v = v / (c + eps);
  }
  return v;
}

// Larger ones in shared memory, one thread per element (n * n <= blockDim.x); every thread of the
// block calls it.
__device__ void sinkhorn_block(float* c, int n, int iters, float eps) {
  const int e = threadIdx.x, i = e / n, j = e % n;
  const bool own = e < n * n;
  float v = 0.0f;
  if (own) {
    float mx = -INFINITY;
    for (int k = 0; k < n; ++k) mx = fmaxf(mx, c[i * n + k]);
    float sum = 0.0f;
    for (int k = 0; k < n; ++k) sum += expf(c[i * n + k] - mx);
    v = expf(c[e] - mx) / sum + eps;
  }
  __syncthreads();
  if (own) c[e] = v;
  __syncthreads();
  for (int it = 0; it < iters; ++it) {
    if (it > 0) {  // rows
      if (own) {
        float sum = 0.0f;
        for (int k = 0; k < n; ++k) sum += c[i * n + k];
        v = c[e] / (sum + eps);
      }
      __syncthreads();
      if (own) c[e] = v;
      __syncthreads();
    }
    if (own) {  // columns
      float sum = 0.0f;
      for (int k = 0; k < n; ++k) sum += c[k * n + j];
      v = c[e] / (sum + eps);
    }
    __syncthreads();
    if (own) c[e] = v;
    __syncthreads();
  }
}

// grid (rows, column blocks): with one column block (many rows) each block does its whole row; with
// more (decode), the last block writes post and comb (the Sinkhorn, a serial chain) while the others
// collapse their columns. With norm_w (the sublayer's norm weight) one block collapses the whole row
// and normalises it. comb_elsewhere (whole rows): hc_post_comb_kernel wrote post and comb, and pre
// into the row's first partials; this kernel only collapses. blockDim.x >= kMaxHc * kMaxHc.
__global__ void hc_pre_kernel(const float* __restrict__ streams, const float* __restrict__ partial, int splits, int hc, int64_t d,
                              const float* __restrict__ base, const float* __restrict__ scale, int iters, float eps,
                              float norm_eps, const float* __restrict__ norm_w, bool vec, bool comb_elsewhere,
                              float* __restrict__ collapsed, float* __restrict__ post, float* __restrict__ comb) {
  pdl_begin();
  __shared__ float m[(2 + kMaxHc) * kMaxHc + 1];
  __shared__ float inv;
  __shared__ float red[32];
  __shared__ float pre[kMaxHc];
  __shared__ float c[kMaxHc * kMaxHc];
  const int64_t t = blockIdx.x;
  const int n = hc, nn = n * n;
  const int tid = threadIdx.x;
  const bool whole_row = gridDim.y == 1;
  if (comb_elsewhere) {  // hc_post_comb_kernel left pre in the row's first partials
    if (tid < n) pre[tid] = partial[t * splits * ((2 + n) * n + 1) + tid];
    __syncthreads();
    const float ss = collapse_columns(streams + t * n * d, pre, n, d, 0, 1, vec, collapsed + t * d);
    if (norm_w) normalise_collapsed(ss, d, norm_w, norm_eps, vec, collapsed + t * d, red);
    return;
  }
  load_mix(partial, splits, (2 + n) * n, t, n * d, norm_eps, m, &inv);
  // post and comb: the Sinkhorn is one warp's serial chain. Where one block does the whole row, warp 0
  // runs it after the barrier that publishes `pre`, so the other warps' collapse loads go out at once.
  auto post_and_comb = [&] {
    if (tid < n) post[t * n + tid] = 2.0f * sigmoidf_(m[n + tid] * inv * scale[1] + base[n + tid]);
    auto logit = [&](int e) { return m[2 * n + e] * inv * scale[2] + base[2 * n + e]; };
    if (nn <= 32) {
      if (tid < 32) {
        const float l = tid < nn ? logit(tid) : 0.0f;
        const float v = n == 4 ? sinkhorn_warp<4>(l, n, iters, eps) : sinkhorn_warp<0>(l, n, iters, eps);
        if (tid < nn) comb[t * nn + tid] = v;
      }
    } else {  // (a block-wide Sinkhorn: every thread calls this)
      if (tid < nn) c[tid] = logit(tid);
      __syncthreads();  // (sinkhorn_block reads other threads' entries first thing)
      sinkhorn_block(c, n, iters, eps);
      if (tid < nn) comb[t * nn + tid] = c[tid];
    }
  };
  if (!whole_row && blockIdx.y == gridDim.y - 1) {
    post_and_comb();
    return;
  }
  if (tid < n) pre[tid] = sigmoidf_(m[tid] * inv * scale[0] + base[tid]) + eps;
  __syncthreads();
  if (whole_row && (nn > 32 || tid < 32)) post_and_comb();
  const int64_t col_blocks = whole_row ? 1 : gridDim.y - 1;
  const float ss = collapse_columns(streams + t * n * d, pre, n, d, blockIdx.y, col_blocks, vec, collapsed + t * d);
  if (norm_w) normalise_collapsed(ss, d, norm_w, norm_eps, vec, collapsed + t * d, red);  // (col_blocks is 1)
}

// Prefill: pre, post and comb of 8 rows a block, a warp a row (hc * hc <= 32: sinkhorn_warp), so
// that hc_pre_kernel's blocks only collapse: a block that also summed the mix and ran the Sinkhorn
// (a serial chain of shuffles) lived as long as the chain, not its loads. The mix values are summed
// over the partials and the inverse RMS taken as load_mix does, pre, post and comb as hc_pre_kernel
// does: the same values. pre goes to the row's first n partials (read; no longer needed) for the
// collapse.
constexpr int kPostCombValues = 36;  // mix values and the sum of squares: (2 + hc) hc + 1, hc <= 5
__global__ void __launch_bounds__(256) hc_post_comb_kernel(float* partial, int splits, int hc, int64_t rows, int64_t d,
                                                           const float* __restrict__ base, const float* __restrict__ scale, int iters,
                                                           float eps, float norm_eps, float* __restrict__ post,
                                                           float* __restrict__ comb) {
  pdl_begin();
  const int lane = threadIdx.x & 31;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (t >= rows) return;  // (a whole warp: nothing below syncs the block)
  const int n = hc, nn = n * n, n_mix = (2 + n) * n, values = n_mix + 1;
  float acc[kPostCombValues];
#pragma unroll
  for (int i = 0; i < kPostCombValues; ++i) acc[i] = 0.0f;
  for (int sp = lane; sp < splits; sp += 32) {  // every load of the row's values out before any sum
    const float* p = partial + (t * splits + sp) * (n_mix + 1);
#pragma unroll
    for (int i = 0; i < kPostCombValues; ++i)
      if (i < values) acc[i] += p[i];
  }
  float pre_raw = 0.0f, post_raw = 0.0f, logit_raw = 0.0f, ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kPostCombValues; ++i) {
    if (i >= values) break;
    const float v = warp_sum(acc[i]);
    if (i < n && lane == i) pre_raw = v;
    if (i >= n && i < 2 * n && lane == i - n) post_raw = v;
    if (i >= 2 * n && i < 2 * n + nn && lane == i - 2 * n) logit_raw = v;
    if (i == values - 1) ss = v;
  }
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(static_cast<int64_t>(n) * d) + norm_eps);
  if (lane < n) partial[t * splits * (n_mix + 1) + lane] = sigmoidf_(pre_raw * inv * scale[0] + base[lane]) + eps;
  if (lane < n) post[t * n + lane] = 2.0f * sigmoidf_(post_raw * inv * scale[1] + base[n + lane]);
  const float l = lane < nn ? logit_raw * inv * scale[2] + base[2 * n + lane] : 0.0f;
  const float v = n == 4 ? sinkhorn_warp<4>(l, n, iters, eps) : sinkhorn_warp<0>(l, n, iters, eps);
  if (lane < nn) comb[t * nn + lane] = v;
}

// The terms of a new stream's sum, rounded the same way wherever they are taken (a product, then
// fused multiply-adds: no contraction left to the compiler's choice).
__device__ __forceinline__ float4 post_times4(float p, float4 v) {
  return make_float4(__fmul_rn(p, v.x), __fmul_rn(p, v.y), __fmul_rn(p, v.z), __fmul_rn(p, v.w));
}
__device__ __forceinline__ void add_times4(float4& acc, float c, float4 s) {
  acc.x = fmaf(c, s.x, acc.x);
  acc.y = fmaf(c, s.y, acc.y);
  acc.z = fmaf(c, s.z, acc.z);
  acc.w = fmaf(c, s.w, acc.w);
}

// Columns x0 .. x0 + 3 of new stream k of one row: post_k out + Σ_j comb[j][k] stream_j, in the reference's
// order (post * out, then j ascending). s: the row's hc streams, c: its comb, out_row: the sublayer output.
__device__ __forceinline__ float4 new_stream4(const float* __restrict__ s, const float* __restrict__ c, float p,
                                              const float* __restrict__ out_row, int hc, int k, int64_t d, int64_t x0) {
  const float4 v = *reinterpret_cast<const float4*>(out_row + x0);
  float4 acc = post_times4(p, v);
  for (int j = 0; j < hc; ++j) add_times4(acc, c[j * hc + k], *reinterpret_cast<const float4*>(s + j * d + x0));
  return acc;
}

// grid (rows * hc, column chunks): block (t, k) writes stream k of row t; four columns per thread
// when d % 4 == 0 (vec). The sum runs in the reference's order: post * out, then j ascending.
__global__ void hc_post_kernel(const float* __restrict__ streams, const float* __restrict__ out, const float* __restrict__ post,
                               const float* __restrict__ comb, int hc, int64_t d, bool vec, float* __restrict__ ns) {
  pdl_begin();
  const int64_t tk = blockIdx.x, t = tk / hc;
  const int k = static_cast<int>(tk % hc);
  const float* s = streams + t * hc * d;
  const float* c = comb + t * hc * hc;
  const float p = post[tk];
  float* o = ns + tk * d;
  const int64_t x0 = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * (vec ? 4 : 1);
  if (x0 >= d) return;
  if (vec) {
    *reinterpret_cast<float4*>(o + x0) = new_stream4(s, c, p, out + t * d, hc, k, d, x0);
  } else {
    float acc = __fmul_rn(p, out[t * d + x0]);
    for (int j = 0; j < hc; ++j) acc = fmaf(c[j * hc + k], s[j * d + x0], acc);
    o[x0] = acc;
  }
}

constexpr int kPostMixThreads = 128, kPostMixCols = 4 * kPostMixThreads;

// grid (rows, column chunks), HC streams: thread x writes columns 4x .. 4x + 3 of every new stream
// of its row from one read of the old ones (hc_post_kernel's blocks, one per new stream, read each old
// one HC times through L2, which then bounds the kernel). The same sums in the same order.
template <int HC>
__global__ void __launch_bounds__(256) hc_post_rows_kernel(const float* __restrict__ streams, const float* __restrict__ out,
                                                           const float* __restrict__ post, const float* __restrict__ comb, int64_t d,
                                                           float* __restrict__ ns) {
  pdl_begin();
  const int64_t t = blockIdx.x, x0 = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * 4;
  if (x0 >= d) return;
  const float* s = streams + t * HC * d;
  float4 sj[HC];
#pragma unroll
  for (int j = 0; j < HC; ++j) sj[j] = *reinterpret_cast<const float4*>(s + j * d + x0);
  const float4 v = *reinterpret_cast<const float4*>(out + t * d + x0);
  const float* c = comb + t * HC * HC;
#pragma unroll
  for (int k = 0; k < HC; ++k) {
    float4 acc = post_times4(post[t * HC + k], v);
#pragma unroll
    for (int j = 0; j < HC; ++j) add_times4(acc, c[j * HC + k], sj[j]);
    *reinterpret_cast<float4*>(ns + (t * HC + k) * d + x0) = acc;
  }
}

// Decode: hc_post_kernel's new streams (four columns per thread), and the mix the next hc_pre /
// hc_head takes of them, as mix_partial's partials: block (t hc + k, c) owns columns [c 512, c 512
// + 512) of stream k of row t, split k chunks + c of the row's hc d values (d % 4 == 0, aligned).
// The block's new values go to shared memory; then, per output, lane l sums columns 4 l + 128 i (i =
// 0..3) with mix_dot4 and the warp adds the lanes (warp_sum's tree: halve_over_warp's pairs), as
// mix_partial_kernel sums a chunk: where d % 512 == 0 the chunks are the same and so are the bits
// (hc_post_mix_is_mix_partial). The mix weights do not depend on earlier kernels: with N (= n) known
// at compile time each warp's are in registers before pdl_begin(); else read after it.
template <int N>
__global__ void __launch_bounds__(kPostMixThreads)
    hc_post_mix_kernel(const float* __restrict__ streams, const float* __restrict__ out, const float* __restrict__ post,
                       const float* __restrict__ comb, int hc, int64_t d, float* __restrict__ ns, const float* __restrict__ w, int n_rt,
                       float* __restrict__ partial) {
  constexpr int kWarps = kPostMixThreads / 32, kSteps = kMixChunk / 128;  // a lane's float4s of a chunk
  static_assert(kPostMixCols == kMixChunk, "a block's columns are one chunk of mix_partial's");
  __shared__ __align__(16) float vs[kPostMixCols];
  const int n = N > 0 ? N : n_rt;
  const int64_t tk = blockIdx.x, t = tk / hc;
  const int k = static_cast<int>(tk % hc);
  const int64_t K = hc * d, c0 = static_cast<int64_t>(blockIdx.y) * kPostMixCols, x0 = c0 + threadIdx.x * 4;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* wc = w + k * d + c0;         // this block's columns of mix weight row 0
  const auto weight4 = [&](int j, int i) {  // row j's float4 at this lane's step i (zero past d)
    const int c = 4 * lane + 128 * i;
    return c0 + c < d ? *reinterpret_cast<const float4*>(wc + j * K + c) : make_float4(0, 0, 0, 0);
  };
  constexpr int kHeld = N > 0 ? (N + kWarps - 1) / kWarps : 1;  // outputs warp + kWarps m of this warp
  float4 held[kHeld][kSteps];
  if constexpr (N > 0) {
#pragma unroll
    for (int m = 0; m < kHeld; ++m)
#pragma unroll
      for (int i = 0; i < kSteps; ++i) held[m][i] = warp + kWarps * m < N ? weight4(warp + kWarps * m, i) : make_float4(0, 0, 0, 0);
  }
  pdl_begin();
  float4 v = make_float4(0, 0, 0, 0);
  if (x0 < d) {
    v = new_stream4(streams + t * K, comb + t * hc * hc, post[tk], out + t * d, hc, k, d, x0);
    *reinterpret_cast<float4*>(ns + tk * d + x0) = v;
  }
  *reinterpret_cast<float4*>(vs + 4 * threadIdx.x) = v;
  __syncthreads();
  const int64_t chunks = (d + kPostMixCols - 1) / kPostMixCols, splits = hc * chunks;
  float* pr = partial + (t * splits + k * chunks + blockIdx.y) * (n + 1);
  const auto output = [&](int j, const float4* wj) {  // j == n: the sum of squares
    float a = 0.0f;
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const float4 x = *reinterpret_cast<const float4*>(vs + 4 * lane + 128 * i);
      a = j == n ? sumsq4(a, x) : mix_dot4(a, wj ? wj[i] : weight4(j, i), x);
    }
    a = warp_sum(a);
    if (lane == 0) pr[j] = a;
  };
  if constexpr (N > 0) {
#pragma unroll
    for (int m = 0; m <= kHeld; ++m)
      if (warp + kWarps * m <= N) output(warp + kWarps * m, held[m < kHeld ? m : 0]);
  } else {
    for (int j = warp; j <= n; j += kWarps) output(j, nullptr);
  }
}

// grid (rows, column chunks), as hc_pre_kernel without the Sinkhorn.
__global__ void hc_head_kernel(const float* __restrict__ streams, const float* __restrict__ partial, int splits, int hc, int64_t d,
                               const float* __restrict__ base, const float* __restrict__ scale, float eps, float norm_eps,
                               const float* __restrict__ norm_w, bool vec, float* __restrict__ out) {
  pdl_begin();
  __shared__ float m[kMaxHc + 1];
  __shared__ float inv;
  __shared__ float pre[kMaxHc];
  __shared__ float red[32];
  const int64_t t = blockIdx.x;
  load_mix(partial, splits, hc, t, hc * d, norm_eps, m, &inv);
  if (threadIdx.x < hc) pre[threadIdx.x] = sigmoidf_(m[threadIdx.x] * inv * scale[0] + base[threadIdx.x]) + eps;
  __syncthreads();
  const float ss = collapse_columns(streams + t * hc * d, pre, hc, d, blockIdx.y, gridDim.y, vec, out + t * d);
  if (norm_w) normalise_collapsed(ss, d, norm_w, norm_eps, vec, out + t * d, red);  // (gridDim.y is 1)
}

}  // namespace

cudaError_t prepare_hyper_connection(size_t device_max) {
  // (the largest n: up to 192 KB)
  return allow_smem<mix_partial_kernel>(sizeof(float) * (kMixTileRows + kMixMaxOut) * kMixChunk, device_max);
}

int mix_splits(int64_t K) { return static_cast<int>((K + kMixChunk - 1) / kMixChunk); }

cudaError_t mix_partial(const float* x, int64_t rows, int64_t K, const float* w, int n, float* partial, Stream s) {
  if (rows <= 0 || K <= 0 || n <= 0) return cudaSuccess;
  if (n > kMixMaxOut) return cudaErrorInvalidValue;
  const int splits = mix_splits(K);
  const int64_t tiles = (rows + kMixTileRows - 1) / kMixTileRows;
  if (splits > 65535 || tiles > 2147483647) return cudaErrorInvalidValue;
  const bool vec = K % 4 == 0 && aligned16(x) && aligned16(w);
  // (tensor cores: three bf16 terms per value, not the FMA kernel's sums; batch-invariant launches
  // take the FMA kernel whatever the rows, whose sums hc_post_mix's decode steps repeat)
  if (rows >= kMixMmaMinRows && !s.invariant && n <= kMixMmaMaxOut && vec) return mix_partial_mma(x, rows, K, w, n, splits, partial, s);
  const size_t smem = sizeof(float) * (kMixTileRows + n) * kMixChunk;
  launch(mix_partial_kernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)), 256, smem, s)(x, rows, K, w, n, splits, vec,
                                                                                                         partial);
  return cudaGetLastError();
}

cudaError_t row_sumsq(const float* x, int64_t rows, int64_t K, float* out, int64_t ld, Stream s) {
  if (rows <= 0) return cudaSuccess;
  if (rows > 2147483647) return cudaErrorInvalidValue;
  launch(row_sumsq_kernel, static_cast<unsigned>(rows), 256, 0, s)(x, K, out, ld);
  return cudaGetLastError();
}

namespace {
// The grid of hc_pre / hc_head: a block per row when rows alone fill the GPU (prefill); else the
// row's columns spread over blocks of 256 threads (four columns each when vec), + 1 for hc_pre's
// Sinkhorn.
constexpr int64_t kHcManyRows = 264;
// With whole_rows (a normalised collapse) one block collapses each row, next to the Sinkhorn's.
dim3 hc_grid(int64_t rows, int64_t d, bool vec, bool sinkhorn_block, bool whole_rows = false) {
  if (rows >= kHcManyRows) return dim3(static_cast<unsigned>(rows), 1);
  const int64_t per_block = 256 * (vec ? 4 : 1);
  const int64_t col_blocks = whole_rows ? 1 : (d + per_block - 1) / per_block;
  return dim3(static_cast<unsigned>(rows), static_cast<unsigned>(col_blocks + (sinkhorn_block ? 1 : 0)));
}
bool hc_shape_ok(int64_t rows, int hc, int64_t d, int splits, bool vec) {
  return hc >= 1 && hc <= kMaxHc && splits >= 1 && rows <= 2147483647 && hc_grid(rows, d, vec, true).y <= 65535;
}
}  // namespace

cudaError_t hc_pre(const float* streams, float* partial, int splits, int64_t rows, int hc, int64_t d, const float* base,
                   const float* scale, int sinkhorn_iters, float eps, float norm_eps, const float* norm_weight, float* collapsed,
                   float* post, float* comb, Stream s) {
  if (rows <= 0 || d <= 0) return cudaSuccess;
  const bool vec = d % 4 == 0 && aligned16(streams) && aligned16(collapsed) && aligned16(norm_weight);
  if (!hc_shape_ok(rows, hc, d, splits, vec)) return cudaErrorInvalidValue;
  const dim3 grid = hc_grid(rows, d, vec, true, norm_weight != nullptr);
  const int iters = sinkhorn_iters < 1 ? 1 : sinkhorn_iters;
  const bool split = grid.y == 1 && hc * hc <= 32;  // (whole rows: prefill)
  if (split)
    launch(hc_post_comb_kernel, static_cast<unsigned>((rows + 7) / 8), 256, 0, s)(partial, splits, hc, rows, d, base, scale, iters, eps,
                                                                                  norm_eps, post, comb);
  launch(hc_pre_kernel, grid, 256, 0, s)(streams, partial, splits, hc, d, base, scale, iters, eps, norm_eps, norm_weight, vec, split,
                                         collapsed, post, comb);
  return cudaGetLastError();
}

cudaError_t hc_post(const float* streams, const float* out, const float* post, const float* comb, int64_t rows, int hc,
                    int64_t d, float* new_streams, Stream s) {
  if (rows <= 0 || hc <= 0 || d <= 0) return cudaSuccess;
  const bool vec = d % 4 == 0 && aligned16(streams) && aligned16(out) && aligned16(new_streams);
  const int64_t chunks = (d / (vec ? 4 : 1) + 255) / 256;
  if (chunks > 65535 || rows * hc > 2147483647) return cudaErrorInvalidValue;
  if (vec && hc == 4) {
    launch(hc_post_rows_kernel<4>, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(chunks)), 256, 0, s)(streams, out, post, comb, d,
                                                                                                            new_streams);
    return cudaGetLastError();
  }
  launch(hc_post_kernel, dim3(static_cast<unsigned>(rows * hc), static_cast<unsigned>(chunks)), 256, 0, s)(streams, out, post, comb, hc, d,
                                                                                                        vec, new_streams);
  return cudaGetLastError();
}

int hc_post_mix_splits(int hc, int64_t d) { return static_cast<int>(hc * ((d + kPostMixCols - 1) / kPostMixCols)); }

bool hc_post_mix_is_mix_partial(int64_t d) { return d % kMixChunk == 0; }

cudaError_t hc_post_mix(const float* streams, const float* out, const float* post, const float* comb, int64_t rows, int hc, int64_t d,
                        float* new_streams, const float* w, int n, float* partial, Stream s) {
  if (rows <= 0 || hc <= 0 || d <= 0) return cudaSuccess;
  const int64_t chunks = (d + kPostMixCols - 1) / kPostMixCols;
  if (d % 4 != 0 || !aligned16(streams) || !aligned16(out) || !aligned16(new_streams) || !aligned16(w) || n < 1 || n > kMixMaxOut ||
      chunks > 65535 || rows * hc > 2147483647)
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(rows * hc), static_cast<unsigned>(chunks));
  if (n == 24)  // hc 4: (2 + 4) 4 mixes
    launch(hc_post_mix_kernel<24>, grid, kPostMixThreads, 0, s)(streams, out, post, comb, hc, d, new_streams, w, n, partial);
  else
    launch(hc_post_mix_kernel<0>, grid, kPostMixThreads, 0, s)(streams, out, post, comb, hc, d, new_streams, w, n, partial);
  return cudaGetLastError();
}

cudaError_t hc_head(const float* streams, const float* partial, int splits, int64_t rows, int hc, int64_t d, const float* base,
                    const float* scale, float eps, float norm_eps, const float* norm_weight, float* out, Stream s) {
  if (rows <= 0 || d <= 0) return cudaSuccess;
  const bool vec = d % 4 == 0 && aligned16(streams) && aligned16(out) && aligned16(norm_weight);
  if (!hc_shape_ok(rows, hc, d, splits, vec)) return cudaErrorInvalidValue;
  launch(hc_head_kernel, hc_grid(rows, d, vec, false, norm_weight != nullptr), 256, 0, s)(streams, partial, splits, hc, d, base, scale, eps,
                                                                                         norm_eps, norm_weight, vec, out);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
