// Element-wise kernels: conversions between fp32 and bf16, synthetic weights, the embedding, sums,
// gathers, the greedy argmax, the clamped SwiGLU; and the one-time device setup (prepare_device).
#include "common.cuh"

#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>

namespace deepinfer::kernels {
namespace {

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

// A thread per stored byte: one E4M3 value, or two E2M1 values (element 2i low, 2i + 1 high).
__global__ void fill_random_stored_kernel(uint8_t* __restrict__ values, int64_t bytes, bool mxfp4, float mean, float stddev, uint64_t seed,
                                          float inv_scale) {
  pdl_begin();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes; i += stride) {
    if (!mxfp4) {
      values[i] = static_cast<uint8_t>(
          __nv_cvt_float_to_fp8(random_value(seed, static_cast<uint64_t>(i), mean, stddev) * inv_scale, __NV_SATFINITE, __NV_E4M3));
      continue;
    }
    uint32_t byte = 0;
    for (int h = 0; h < 2; ++h) {
      const float v = random_value(seed, static_cast<uint64_t>(2 * i + h), mean, stddev) * inv_scale, m = fabsf(v);
      const uint32_t code = (m > 0.25f) + (m > 0.75f) + (m > 1.25f) + (m > 1.75f) + (m > 2.5f) + (m > 3.5f) + (m > 5.0f);
      byte |= (code | (v < 0.0f ? 8u : 0u)) << (4 * h);
    }
    values[i] = static_cast<uint8_t>(byte);
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

}  // namespace

cudaError_t prepare_device(bool wgmma) {
  int dev = 0, max_smem = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (e != cudaSuccess) return e;
  const size_t m = static_cast<size_t>(max_smem);
  for (auto prepare :
       {prepare_hyper_connection, prepare_hc_mix_mma, prepare_attention_mma, prepare_indexer_mma, prepare_moe, prepare_tile_linear})
    if ((e = prepare(m)) != cudaSuccess) return e;
  if (wgmma)
    for (auto prepare : {prepare_attention_wgmma, prepare_indexer_wgmma, prepare_moe_wgmma})
      if ((e = prepare(m)) != cudaSuccess) return e;
  return cudaSuccess;
}

cudaError_t f32_to_bf16(const float* x, bf16_t* y, int64_t n, Stream s) {
  if (n <= 0) return cudaSuccess;
  const bool vec = (n % 4) == 0 && aligned16(x) && reinterpret_cast<uintptr_t>(y) % 8 == 0;
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

cudaError_t fill_random_stored(uint8_t* values, uint8_t* scales, int64_t n_scales, bool mxfp4, int64_t n, float mean, float stddev,
                               uint64_t seed, Stream s) {
  if (n <= 0) return cudaSuccess;
  if (!values || !scales || n_scales <= 0 || (mxfp4 && n % 2 != 0) || !(stddev >= 0.0f)) return cudaErrorInvalidValue;
  const float amax = std::fabs(mean) + 1.7320508f * stddev, max = mxfp4 ? 6.0f : 448.0f;
  const int e = amax > 0.0f ? std::clamp(static_cast<int>(std::ceil(std::log2(amax / max))), -127, 127) : 0;
  cudaError_t err = cudaMemsetAsync(scales, 127 + e, static_cast<size_t>(n_scales), s.id);
  if (err != cudaSuccess) return err;
  const int64_t bytes = mxfp4 ? n / 2 : n;
  const unsigned b = blocks_for(bytes, 256);
  launch(fill_random_stored_kernel, b > 8192 ? 8192 : b, 256, 0, s)(values, bytes, mxfp4, mean, stddev, seed, std::ldexp(1.0f, -e));
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
  const bool vec = n % 4 == 0 && aligned16(g) && aligned16(u) && reinterpret_cast<uintptr_t>(h) % 8 == 0;
  unsigned b = blocks_for(vec ? n / 4 : n, 256);
  launch(swiglu_bf16_kernel, b > 8192 ? 8192 : b, 256, 0, s)(g, u, n, limit, vec, reinterpret_cast<__nv_bfloat16*>(h));
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
