// Elementwise and row-wise kernels: conversions, embedding, norms, rope, hyper-connections.
#include "common.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kMaxHc = 16;

// Device copy of src/backend/random_fill.h (keep identical).
__device__ __forceinline__ uint64_t random_bits(uint64_t seed, uint64_t i) {
  uint64_t x = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

__device__ __forceinline__ float random_value(uint64_t seed, uint64_t i, float mean, float stddev) {
  const float u = __fmul_rn(static_cast<float>(random_bits(seed, i) >> 40), 1.0f / 16777216.0f);
  const float centred = __fsub_rn(__fmul_rn(2.0f, u), 1.0f);
  const float spread = __fmul_rn(stddev, 1.7320508f);
  return __fadd_rn(mean, __fmul_rn(spread, centred));
}

__global__ void fill_random_kernel(float* __restrict__ f, __nv_bfloat16* __restrict__ b, int64_t n, float mean, float stddev,
                                   uint64_t seed) {
  pdl_begin();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = random_value(seed, static_cast<uint64_t>(i), mean, stddev);
    if (f) f[i] = v;
    if (b) b[i] = __float2bfloat16_rn(v);
  }
}

__global__ void spin_kernel(int64_t ns) {
  pdl_begin();
  uint64_t t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (static_cast<int64_t>(t - t0) >= ns) break;
  }
}

__global__ void f32_to_bf16_kernel(const float* __restrict__ x, __nv_bfloat16* __restrict__ y, int64_t n, bool vec) {
  pdl_begin();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {  // 4 at a time, kU loads in flight per thread (one in flight reached ~65% of the bandwidth)
    constexpr int kU = 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    uint2* y4 = reinterpret_cast<uint2*>(y);
    const int64_t n4 = n / 4;
    for (; i < n4; i += kU * stride) {
      float4 v[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) v[u] = i + u * stride < n4 ? __ldcs(x4 + i + u * stride) : make_float4(0, 0, 0, 0);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        if (i + u * stride >= n4) break;
        const __nv_bfloat162 lo = __floats2bfloat162_rn(v[u].x, v[u].y), hi = __floats2bfloat162_rn(v[u].z, v[u].w);
        y4[i + u * stride] = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
      }
    }
  } else {
    for (; i < n; i += stride) y[i] = __float2bfloat16_rn(x[i]);
  }
}

__global__ void bf16_to_f32_kernel(const __nv_bfloat16* __restrict__ x, float* __restrict__ y, int64_t n) {
  pdl_begin();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = __bfloat162float(x[i]);
}

// grid (rows, column chunks of blockDim.x): the chunk of row r's table row, written `times` times.
__global__ void embed_kernel(const __nv_bfloat16* __restrict__ tb, const float* __restrict__ tf, int64_t vocab, int64_t cols,
                             const int32_t* __restrict__ tokens, int times, float* __restrict__ out) {
  pdl_begin();
  const int64_t r = blockIdx.x, c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const int32_t tok = tokens[r];
  float v = 0.0f;
  if (tok >= 0 && tok < vocab) v = tb ? __bfloat162float(tb[static_cast<int64_t>(tok) * cols + c]) : tf[static_cast<int64_t>(tok) * cols + c];
  float* o = out + r * cols * times + c;
  for (int i = 0; i < times; ++i) o[i * cols] = v;
}

// Four values of t at float4 index i (bf16 storage: eight bytes).
__device__ __forceinline__ float4 load4(const NormTensor& t, const float* p, int64_t i) {
  if (!t.bf16) return reinterpret_cast<const float4*>(p)[i];
  const uint2 u = reinterpret_cast<const uint2*>(p)[i];
  const float2 a = unpack_bf16(u.x), b = unpack_bf16(u.y);
  return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ void store4(const NormTensor& t, float* p, int64_t i, float4 v) {
  if (!t.bf16) {
    reinterpret_cast<float4*>(p)[i] = v;
    return;
  }
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  reinterpret_cast<uint2*>(p)[i] = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
}

// Four values of a group (float4 i) once its inverse RMS is known: times inv, times the weight's
// float4 i (w null: none), then rotated where positions is given and i is at or past first_pair4 (the
// float4 where the rotated channels start; rope_dim % 4 == 0, so a float4 holds two whole pairs).
__device__ __forceinline__ float4 normalised4(float4 v, float inv, const float* w, int i, int first_pair4, const RopeDev& rope,
                                              const int32_t* positions, int64_t r) {
  v = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
  if (w) {
    const float4 wv = reinterpret_cast<const float4*>(w)[i];
    v = make_float4(wv.x * v.x, wv.y * v.y, wv.z * v.z, wv.w * v.w);
  }
  if (positions && i >= first_pair4) {
    const int pair = 2 * (i - first_pair4);
    const float2 lo = rotate_pair(v.x, v.y, rope, positions[r], pair, false);
    const float2 hi = rotate_pair(v.z, v.w, rope, positions[r], pair + 1, false);
    v = make_float4(lo.x, lo.y, hi.x, hi.y);
  }
  return v;
}

// One block per (row, group) of a, then of b (blocks from first_block); four values per step when
// vec (group % 4 == 0, aligned rows; the only case for bf16 tensors). With positions, the normalised
// group (a head) is then rotated (rope.rope_dim trailing channels): in registers when vec and
// rope_dim % 4 == 0 (a thread's four values are two whole pairs), else through memory.
__global__ void rms_norm_kernel(NormTensor a, NormTensor b, int64_t first_block, float eps, int group, bool vec, RopeDev rope,
                                const int32_t* __restrict__ positions) {
  pdl_begin();
  __shared__ float red[32];
  const bool second = blockIdx.x >= first_block;
  const NormTensor t = second ? b : a;
  const float* __restrict__ w = t.weight;
  const int64_t block = blockIdx.x - (second ? first_block : 0);
  const int64_t groups_per_row = t.cols / group;
  const int64_t r = block / groups_per_row, g = block % groups_per_row;
  const int64_t elem = t.bf16 ? 2 : 4;  // bytes per value
  const float* xi = reinterpret_cast<const float*>(reinterpret_cast<const char*>(t.x) + (r * t.cols + g * group) * elem);
  float* oi = reinterpret_cast<float*>(reinterpret_cast<char*>(t.out) + (r * t.cols + g * group) * elem);
  float ss = 0.0f;
  if (vec) {
    for (int i = threadIdx.x; i < group / 4; i += blockDim.x) {
      const float4 v = load4(t, xi, i);
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  } else {
    for (int i = threadIdx.x; i < group; i += blockDim.x) ss += xi[i] * xi[i];
  }
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(group) + eps);
  const bool rotate_here = vec && positions && rope.rope_dim % 4 == 0;
  if (vec) {
    const int first_pair4 = (group - rope.rope_dim) / 4;  // the float4 index where the rotated channels start
    for (int i = threadIdx.x; i < group / 4; i += blockDim.x)
      store4(t, oi, i, normalised4(load4(t, xi, i), inv, w, i, first_pair4, rope, rotate_here ? positions : nullptr, r));
  } else {
    for (int i = threadIdx.x; i < group; i += blockDim.x) {
      const float v = xi[i] * inv;
      oi[i] = w ? w[i] * v : v;
    }
  }
  if (!positions || rotate_here) return;
  __syncthreads();  // the block's normalised values are visible to the thread that rotates them
  rotate_pairs(oi, group, rope, positions[r], false, threadIdx.x, blockDim.x);
}

// A warp per (row, group) of a, then of b (warps from first_group on), for groups of 128 kV values
// (vec): a lane holds kV float4s of its group, the sum of squares is a warp sum, and the rotation
// (rope_dim % 4 == 0) is applied in registers before the one store. Many short groups (64 heads a
// row) leave a block per group mostly scheduling; this keeps 8 groups a block.
template <int kV>
__global__ void rms_norm_warp_kernel(NormTensor a, NormTensor b, int64_t first_group, int64_t groups, float eps, RopeDev rope,
                                     const int32_t* __restrict__ positions) {
  pdl_begin();
  constexpr int kGroup = 128 * kV;
  const int lane = threadIdx.x & 31;
  const int64_t gi = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (gi >= groups) return;  // (a whole warp)
  const bool second = gi >= first_group;
  const NormTensor t = second ? b : a;
  const int64_t block = gi - (second ? first_group : 0);
  const int64_t per_row = t.cols / kGroup, r = block / per_row, g = block % per_row;
  const int64_t elem = t.bf16 ? 2 : 4;  // bytes per value
  const float* xi = reinterpret_cast<const float*>(reinterpret_cast<const char*>(t.x) + (r * t.cols + g * kGroup) * elem);
  float* oi = reinterpret_cast<float*>(reinterpret_cast<char*>(t.out) + (r * t.cols + g * kGroup) * elem);
  float4 v[kV];
  float ss = 0.0f;
#pragma unroll
  for (int u = 0; u < kV; ++u) {
    v[u] = load4(t, xi, lane + 32 * u);
    ss += v[u].x * v[u].x + v[u].y * v[u].y + v[u].z * v[u].z + v[u].w * v[u].w;
  }
  const float inv = 1.0f / sqrtf(warp_sum(ss) / static_cast<float>(kGroup) + eps);
  const int first_pair4 = (kGroup - rope.rope_dim) / 4;  // the float4 index where the rotated channels start
#pragma unroll
  for (int u = 0; u < kV; ++u) {
    const int i = lane + 32 * u;
    store4(t, oi, i, normalised4(v[u], inv, t.weight, i, first_pair4, rope, positions, r));
  }
}

__device__ __forceinline__ float as_float(float v) { return v; }
__device__ __forceinline__ float as_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store_as(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_as(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// T float, or bf16 (rotated in fp32, rounded back).
template <typename T>
__global__ void rope_kernel(T* x, int64_t rows, int64_t cols, int head_dim, RopeDev rope, const int32_t* __restrict__ positions,
                            bool inverse) {
  pdl_begin();
  const int half = rope.rope_dim / 2;
  const int64_t heads = cols / head_dim, n = rows * heads * half;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int p = static_cast<int>(i % half);
    const int64_t h = (i / half) % heads, r = i / (half * heads);
    T* xp = x + r * cols + h * head_dim + head_dim - rope.rope_dim + 2 * p;
    const float2 v = rotate_pair(as_float(xp[0]), as_float(xp[1]), rope, positions[r], p, inverse);
    store_as(xp, v.x);
    store_as(xp + 1, v.y);
  }
}

__global__ void add_kernel(float* a, const float* b, int64_t n) {
  pdl_begin();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) a[i] += b[i];
}

__global__ void gather_kernel(const float* __restrict__ x, int64_t cols, const int32_t* __restrict__ rows, float* __restrict__ out) {
  pdl_begin();
  const int64_t i = blockIdx.x;
  const float* src = x + static_cast<int64_t>(rows[i]) * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[i * cols + c] = src[c];
}

// The best (value, lowest index on a tie) and the invalid flag over a warp; every lane gets them.
__device__ __forceinline__ void warp_argmax(float& value, int32_t& index, int& bad) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(kFull, value, o);
    const int32_t j = __shfl_xor_sync(kFull, index, o);
    bad |= __shfl_xor_sync(kFull, bad, o);
    if (w > value || (w == value && j < index)) {
      value = w;
      index = j;
    }
  }
}

// One block per row. Each thread keeps the best (value, lowest index) of its strided columns and
// whether it saw a NaN or +inf; each warp, then the first warp over the warps' results, reduces.
__global__ void argmax_kernel(const float* __restrict__ x, int64_t cols, int32_t* __restrict__ out) {
  pdl_begin();
  __shared__ float best_value[32];
  __shared__ int32_t best_index[32];
  __shared__ int invalid[32];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  float value = -INFINITY;
  int32_t index = INT32_MAX;
  int bad = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = row[c];
    bad |= !(v < INFINITY);
    if (v > value) {  // columns grow along a thread's walk: the first maximum keeps a tie
      value = v;
      index = static_cast<int32_t>(c);
    }
  }
  warp_argmax(value, index, bad);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) {
    best_value[warp] = value;
    best_index[warp] = index;
    invalid[warp] = bad;
  }
  __syncthreads();
  if (warp != 0) return;
  value = lane < warps ? best_value[lane] : -INFINITY;
  index = lane < warps ? best_index[lane] : INT32_MAX;
  bad = lane < warps ? invalid[lane] : 0;
  warp_argmax(value, index, bad);
  if (lane == 0) out[blockIdx.x] = bad ? -2 : value == -INFINITY ? -1 : index;
}

__global__ void swiglu_kernel(float* g, const float* __restrict__ u, int64_t n, float limit) {
  pdl_begin();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) g[i] = swiglu_clamped(g[i], u[i], limit);
}

// Four values per step when vec (n % 4 == 0, aligned).
__global__ void swiglu_bf16_kernel(const float* __restrict__ g, const float* __restrict__ u, int64_t n, float limit, bool vec,
                                   __nv_bfloat16* __restrict__ h) {
  pdl_begin();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if (vec) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n / 4; i += stride) {
      const float4 a = reinterpret_cast<const float4*>(g)[i], b = reinterpret_cast<const float4*>(u)[i];
      const __nv_bfloat162 lo = __floats2bfloat162_rn(swiglu_clamped(a.x, b.x, limit), swiglu_clamped(a.y, b.y, limit));
      const __nv_bfloat162 hi = __floats2bfloat162_rn(swiglu_clamped(a.z, b.z, limit), swiglu_clamped(a.w, b.w, limit));
      uint2 o;
      o.x = *reinterpret_cast<const uint32_t*>(&lo);
      o.y = *reinterpret_cast<const uint32_t*>(&hi);
      reinterpret_cast<uint2*>(h)[i] = o;
    }
    return;
  }
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    h[i] = __float2bfloat16_rn(swiglu_clamped(g[i], u[i], limit));
}

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
        for (int j = 0; j < kMixOutsPerTask; ++j) {
          float a = acc[r][j];
          a = fmaf(wv[j].x, xv[r].x, a);
          a = fmaf(wv[j].y, xv[r].y, a);
          a = fmaf(wv[j].z, xv[r].z, a);
          acc[r][j] = fmaf(wv[j].w, xv[r].w, a);
        }
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
    for (int c = lane * 4; c < kMixChunk; c += 128) {
      const float4 v = *reinterpret_cast<const float4*>(xs + r * kMixChunk + c);
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
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
// The mix weights do not depend on earlier kernels: with N (= n) known at compile time they are
// all in registers before pdl_begin(); else read after it, kBatch at a time.
template <int N>
__global__ void __launch_bounds__(kPostMixThreads) hc_post_mix_kernel(const float* __restrict__ streams, const float* __restrict__ out,
                                                                      const float* __restrict__ post, const float* __restrict__ comb,
                                                                      int hc, int64_t d, float* __restrict__ ns,
                                                                      const float* __restrict__ w, int n_rt, float* __restrict__ partial) {
  __shared__ float red[kPostMixThreads / 32][kMixMaxOut + 1];
  const int n = N > 0 ? N : n_rt;
  const int64_t tk = blockIdx.x, t = tk / hc;
  const int k = static_cast<int>(tk % hc);
  const int64_t K = hc * d, x0 = static_cast<int64_t>(blockIdx.y) * kPostMixCols + threadIdx.x * 4;
  const bool live = x0 < d;
  const float* wc = w + k * d + x0;  // this thread's columns of mix weight row 0
  constexpr int kHeld = N > 0 ? N : 1;
  float4 held[kHeld];
  if constexpr (N > 0) {
#pragma unroll
    for (int j = 0; j < N; ++j) held[j] = live ? *reinterpret_cast<const float4*>(wc + j * K) : make_float4(0, 0, 0, 0);
  }
  pdl_begin();
  float4 v = make_float4(0, 0, 0, 0);
  if (live) {
    v = new_stream4(streams + t * K, comb + t * hc * hc, post[tk], out + t * d, hc, k, d, x0);
    *reinterpret_cast<float4*>(ns + tk * d + x0) = v;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  auto dot = [&](const float4& a) { return a.x * v.x + a.y * v.y + a.z * v.z + a.w * v.w; };
  if constexpr (N > 0) {
#pragma unroll
    for (int j = 0; j <= N; ++j) {  // output N: the sum of squares
      const float sum = warp_sum(dot(j < N ? held[j] : v));
      if (lane == 0) red[warp][j] = sum;
    }
  } else {
    constexpr int kBatch = 8;  // weight loads in flight per thread
    for (int j0 = 0; j0 <= n; j0 += kBatch) {
      float dots[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int j = j0 + i;
        float4 wv = make_float4(0, 0, 0, 0);
        if (j < n && live) wv = *reinterpret_cast<const float4*>(wc + j * K);
        dots[i] = dot(j == n ? v : wv);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const float sum = warp_sum(dots[i]);
        if (lane == 0 && j0 + i <= n) red[warp][j0 + i] = sum;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x <= n) {
    float sum = 0.0f;
    for (int i = 0; i < kPostMixThreads / 32; ++i) sum += red[i][threadIdx.x];
    const int64_t chunks = (d + kPostMixCols - 1) / kPostMixCols, splits = hc * chunks;
    partial[(t * splits + k * chunks + blockIdx.y) * (n + 1) + threadIdx.x] = sum;
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

cudaError_t prepare_device(bool wgmma) {
  int dev = 0, max_smem = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (e != cudaSuccess) return e;
  const size_t m = static_cast<size_t>(max_smem);
  for (auto prepare : {prepare_hyper_connection, prepare_hc_mix_mma, prepare_attention_mma, prepare_indexer_mma, prepare_moe})
    if ((e = prepare(m)) != cudaSuccess) return e;
  if (wgmma)
    for (auto prepare : {prepare_attention_wgmma, prepare_indexer_wgmma, prepare_moe_wgmma})
      if ((e = prepare(m)) != cudaSuccess) return e;
  return cudaSuccess;
}

cudaError_t f32_to_bf16(const float* x, bf16_t* y, int64_t n, Stream s) {
  if (n <= 0) return cudaSuccess;
  const bool vec = (n % 4) == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0;
  const unsigned b = blocks_for(vec ? n / 4 : n, 256);
  launch(f32_to_bf16_kernel, b > 4096 ? 4096 : b, 256, 0, s)(x, reinterpret_cast<__nv_bfloat16*>(y), n, vec);
  return cudaGetLastError();
}

cudaError_t bf16_to_f32(const bf16_t* x, float* y, int64_t n, Stream s) {
  if (n <= 0) return cudaSuccess;
  const unsigned b = blocks_for(n, 256);
  launch(bf16_to_f32_kernel, b > 4096 ? 4096 : b, 256, 0, s)(reinterpret_cast<const __nv_bfloat16*>(x), y, n);
  return cudaGetLastError();
}

cudaError_t fill_random(float* f32, bf16_t* b16, int64_t n, float mean, float stddev, uint64_t seed, Stream s) {
  if (n <= 0 || (!f32 && !b16)) return cudaSuccess;
  const unsigned b = blocks_for(n, 256);
  launch(fill_random_kernel, b > 8192 ? 8192 : b, 256, 0, s)(f32, reinterpret_cast<__nv_bfloat16*>(b16), n, mean, stddev, seed);
  return cudaGetLastError();
}

cudaError_t spin(int64_t ns, Stream s) {
  if (ns <= 0) return cudaSuccess;
  launch(spin_kernel, 1, 1, 0, s)(ns);
  return cudaGetLastError();
}

cudaError_t embed(const bf16_t* table_b16, const float* table_f32, int64_t vocab, int64_t cols, const int32_t* tokens,
                  int64_t rows, int times, float* out, Stream s) {
  if (rows <= 0 || cols <= 0 || times <= 0) return cudaSuccess;
  const int64_t chunks = (cols + 255) / 256;
  if (rows > 2147483647 || chunks > 65535) return cudaErrorInvalidValue;
  launch(embed_kernel, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(chunks)), 256, 0, s)(
      reinterpret_cast<const __nv_bfloat16*>(table_b16), table_f32, vocab, cols, tokens, times, out);
  return cudaGetLastError();
}

cudaError_t rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t cols, int group, float* out,
                     Stream s, const RopeDev* rope, const int32_t* positions) {
  return rms_norm_pair(NormTensor{x, weight, cols, out}, NormTensor{}, eps, rows, group, s, rope, positions);
}

cudaError_t rms_norm_pair(const NormTensor& a, const NormTensor& b, float eps, int64_t rows, int group, Stream s, const RopeDev* rope,
                          const int32_t* positions) {
  if (rows <= 0 || group <= 0 || a.cols % group != 0 || b.cols % group != 0) return rows <= 0 ? cudaSuccess : cudaErrorInvalidValue;
  const int64_t first = rows * (a.cols / group), blocks = first + rows * (b.cols / group);
  if (blocks == 0) return cudaSuccess;
  const int threads = group >= 2048 ? 256 : group >= 256 ? 128 : group >= 64 ? 64 : 32;
  auto al = [](const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  auto vec_ok = [&](const NormTensor& t) { return t.cols % 4 == 0 && al(t.x) && al(t.weight) && al(t.out); };
  const bool vec = group % 4 == 0 && vec_ok(a) && vec_ok(b);
  // bf16 storage: four values per step, rotated in registers
  if ((a.bf16 || b.bf16) && (!vec || (rope && rope->rope_dim % 4 != 0))) return cudaErrorInvalidValue;
  const RopeDev r = rope ? *rope : RopeDev{};
  const int32_t* pos = rope ? positions : nullptr;
  // A warp per group where there are many (prefill); a decode step's few groups spread over more
  // multiprocessors as a block each (measured: 23 vs 28 us for a step's four q + kv norms).
  if (blocks >= 4096 && vec && group % 128 == 0 && (!rope || rope->rope_dim % 4 == 0)) {
    const unsigned warp_blocks = static_cast<unsigned>((blocks + 7) / 8);
    switch (group / 128) {
      case 1: launch(rms_norm_warp_kernel<1>, warp_blocks, 256, 0, s)(a, b, first, blocks, eps, r, pos); return cudaGetLastError();
      case 2: launch(rms_norm_warp_kernel<2>, warp_blocks, 256, 0, s)(a, b, first, blocks, eps, r, pos); return cudaGetLastError();
      case 4: launch(rms_norm_warp_kernel<4>, warp_blocks, 256, 0, s)(a, b, first, blocks, eps, r, pos); return cudaGetLastError();
      case 8: launch(rms_norm_warp_kernel<8>, warp_blocks, 256, 0, s)(a, b, first, blocks, eps, r, pos); return cudaGetLastError();
      default: break;  // (other sizes: a block per group)
    }
  }
  launch(rms_norm_kernel, static_cast<unsigned>(blocks), threads, 0, s)(a, b, first, eps, group, vec, r, pos);
  return cudaGetLastError();
}

namespace {
template <typename T>
cudaError_t launch_rope(T* x, int64_t rows, int64_t cols, int head_dim, RopeDev r, const int32_t* positions, bool inverse, Stream s) {
  const int64_t n = rows * (cols / head_dim) * (r.rope_dim / 2);
  if (n <= 0) return cudaSuccess;
  unsigned b = blocks_for(n, 256);
  launch(rope_kernel<T>, b > 8192 ? 8192 : b, 256, 0, s)(x, rows, cols, head_dim, r, positions, inverse);
  return cudaGetLastError();
}
}  // namespace

cudaError_t rope(float* x, int64_t rows, int64_t cols, int head_dim, RopeDev r, const int32_t* positions, bool inverse,
                 Stream s) {
  return launch_rope(x, rows, cols, head_dim, r, positions, inverse, s);
}

cudaError_t rope_bf16(bf16_t* x, int64_t rows, int64_t cols, int head_dim, RopeDev r, const int32_t* positions, bool inverse,
                      Stream s) {
  return launch_rope(reinterpret_cast<__nv_bfloat16*>(x), rows, cols, head_dim, r, positions, inverse, s);
}

cudaError_t add(float* a, const float* b, int64_t n, Stream s) {
  if (n <= 0) return cudaSuccess;
  unsigned g = blocks_for(n, 256);
  launch(add_kernel, g > 8192 ? 8192 : g, 256, 0, s)(a, b, n);
  return cudaGetLastError();
}

cudaError_t gather_rows(const float* x, int64_t cols, const int32_t* rows, int64_t n, float* out, Stream s) {
  if (n <= 0 || cols <= 0) return cudaSuccess;
  launch(gather_kernel, static_cast<unsigned>(n), 256, 0, s)(x, cols, rows, out);
  return cudaGetLastError();
}

cudaError_t argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out, Stream s) {
  if (rows <= 0) return cudaSuccess;
  launch(argmax_kernel, static_cast<unsigned>(rows), 1024, 0, s)(x, cols, out);
  return cudaGetLastError();
}

cudaError_t swiglu(float* g, const float* u, int64_t n, float limit, Stream s) {
  if (n <= 0) return cudaSuccess;
  unsigned b = blocks_for(n, 256);
  launch(swiglu_kernel, b > 8192 ? 8192 : b, 256, 0, s)(g, u, n, limit);
  return cudaGetLastError();
}

cudaError_t swiglu_bf16(const float* g, const float* u, int64_t n, float limit, bf16_t* h, Stream s) {
  if (n <= 0) return cudaSuccess;
  const bool vec = n % 4 == 0 && reinterpret_cast<uintptr_t>(g) % 16 == 0 && reinterpret_cast<uintptr_t>(u) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(h) % 8 == 0;
  unsigned b = blocks_for(vec ? n / 4 : n, 256);
  launch(swiglu_bf16_kernel, b > 8192 ? 8192 : b, 256, 0, s)(g, u, n, limit, vec, reinterpret_cast<__nv_bfloat16*>(h));
  return cudaGetLastError();
}

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
  const bool vec = K % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  if (rows >= kMixMmaMinRows && n <= kMixMmaMaxOut && vec) return mix_partial_mma(x, rows, K, w, n, splits, partial, s);
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
  const bool vec = d % 4 == 0 && reinterpret_cast<uintptr_t>(streams) % 16 == 0 && reinterpret_cast<uintptr_t>(collapsed) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(norm_weight) % 16 == 0;
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
  auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = d % 4 == 0 && al(streams) && al(out) && al(new_streams);
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

cudaError_t hc_post_mix(const float* streams, const float* out, const float* post, const float* comb, int64_t rows, int hc, int64_t d,
                        float* new_streams, const float* w, int n, float* partial, Stream s) {
  if (rows <= 0 || hc <= 0 || d <= 0) return cudaSuccess;
  auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const int64_t chunks = (d + kPostMixCols - 1) / kPostMixCols;
  if (d % 4 != 0 || !al(streams) || !al(out) || !al(new_streams) || !al(w) || n < 1 || n > kMixMaxOut || chunks > 65535 ||
      rows * hc > 2147483647)
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
  const bool vec = d % 4 == 0 && reinterpret_cast<uintptr_t>(streams) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(norm_weight) % 16 == 0;
  if (!hc_shape_ok(rows, hc, d, splits, vec)) return cudaErrorInvalidValue;
  launch(hc_head_kernel, hc_grid(rows, d, vec, false, norm_weight != nullptr), 256, 0, s)(streams, partial, splits, hc, d, base, scale, eps,
                                                                                         norm_eps, norm_weight, vec, out);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
