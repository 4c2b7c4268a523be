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
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = random_value(seed, static_cast<uint64_t>(i), mean, stddev);
    if (f) f[i] = v;
    if (b) b[i] = __float2bfloat16_rn(v);
  }
}

__global__ void spin_kernel(int64_t ns) {
  uint64_t t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (static_cast<int64_t>(t - t0) >= ns) break;
  }
}

__global__ void f32_to_bf16_kernel(const float* __restrict__ x, __nv_bfloat16* __restrict__ y, int64_t n, bool vec) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {  // 4 at a time
    const float4* x4 = reinterpret_cast<const float4*>(x);
    __nv_bfloat162* y2 = reinterpret_cast<__nv_bfloat162*>(y);
    for (; i < n / 4; i += stride) {
      float4 v = x4[i];
      y2[2 * i] = __floats2bfloat162_rn(v.x, v.y);
      y2[2 * i + 1] = __floats2bfloat162_rn(v.z, v.w);
    }
  } else {
    for (; i < n; i += stride) y[i] = __float2bfloat16_rn(x[i]);
  }
}

__global__ void embed_kernel(const __nv_bfloat16* __restrict__ tb, const float* __restrict__ tf, int64_t vocab, int64_t cols,
                             const int32_t* __restrict__ tokens, float* __restrict__ out) {
  const int64_t r = blockIdx.x;
  const int32_t tok = tokens[r];
  float* o = out + r * cols;
  const bool valid = tok >= 0 && tok < vocab;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = 0.0f;
    if (valid) v = tb ? __bfloat162float(tb[static_cast<int64_t>(tok) * cols + c]) : tf[static_cast<int64_t>(tok) * cols + c];
    o[c] = v;
  }
}

__global__ void repeat_kernel(const float* __restrict__ x, int64_t rows, int64_t cols, int times, float* __restrict__ out) {
  const int64_t n = rows * cols * times, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / (cols * times), c = i % cols;
    out[i] = x[r * cols + c];
  }
}

// One block per (row, group); four values per step when vec (group % 4 == 0, aligned rows).
__global__ void rms_norm_kernel(const float* x, const float* __restrict__ w, float eps, int64_t cols, int group, bool vec, float* out) {
  __shared__ float red[32];
  const int64_t groups_per_row = cols / group;
  const int64_t r = blockIdx.x / groups_per_row, g = blockIdx.x % groups_per_row;
  const float* xi = x + r * cols + g * group;
  float* oi = out + r * cols + g * group;
  float ss = 0.0f;
  if (vec) {
    for (int i = threadIdx.x; i < group / 4; i += blockDim.x) {
      const float4 v = reinterpret_cast<const float4*>(xi)[i];
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  } else {
    for (int i = threadIdx.x; i < group; i += blockDim.x) ss += xi[i] * xi[i];
  }
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(group) + eps);
  if (vec) {
    for (int i = threadIdx.x; i < group / 4; i += blockDim.x) {
      float4 v = reinterpret_cast<const float4*>(xi)[i];
      v = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
      if (w) {
        const float4 wv = reinterpret_cast<const float4*>(w)[i];
        v = make_float4(wv.x * v.x, wv.y * v.y, wv.z * v.z, wv.w * v.w);
      }
      reinterpret_cast<float4*>(oi)[i] = v;
    }
    return;
  }
  for (int i = threadIdx.x; i < group; i += blockDim.x) {
    const float v = xi[i] * inv;
    oi[i] = w ? w[i] * v : v;
  }
}

__global__ void rope_kernel(float* x, int64_t rows, int64_t cols, int head_dim, RopeDev rope, const int32_t* __restrict__ positions,
                            bool inverse) {
  const int half = rope.rope_dim / 2;
  const int64_t heads = cols / head_dim, n = rows * heads * half;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int p = static_cast<int>(i % half);
    const int64_t h = (i / half) % heads, r = i / (half * heads);
    float* xp = x + r * cols + h * head_dim + head_dim - rope.rope_dim + 2 * p;
    const float angle = static_cast<float>(positions[r]) * rope.inv_freq[p];
    const float c = cosf(angle) * rope.attention_factor;
    float sn = sinf(angle) * rope.attention_factor;
    if (inverse) sn = -sn;
    const float x0 = xp[0], x1 = xp[1];
    xp[0] = x0 * c - x1 * sn;
    xp[1] = x1 * c + x0 * sn;
  }
}

__global__ void add_kernel(float* a, const float* b, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) a[i] += b[i];
}

__global__ void gather_kernel(const float* __restrict__ x, int64_t cols, const int32_t* __restrict__ rows, float* __restrict__ out) {
  const int64_t i = blockIdx.x;
  const float* src = x + static_cast<int64_t>(rows[i]) * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[i * cols + c] = src[c];
}

__global__ void swiglu_kernel(float* g, const float* __restrict__ u, int64_t n, float limit) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float a = fminf(g[i], limit);
    const float b = fminf(fmaxf(u[i], -limit), limit);
    g[i] = a / (1.0f + expf(-a)) * b;
  }
}

__global__ void swiglu_bf16_kernel(const float* __restrict__ g, const float* __restrict__ u, int64_t n, float limit,
                                   __nv_bfloat16* __restrict__ h) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float a = fminf(g[i], limit);
    const float b = fminf(fmaxf(u[i], -limit), limit);
    h[i] = __float2bfloat16_rn(a / (1.0f + expf(-a)) * b);
  }
}

constexpr int kMixChunk = 256, kMixMaxOut = 64, kMixTileRows = 32, kMixRowsPerTask = 4, kMixOutsPerTask = 6;

// grid (row tiles of 32, column chunks of kMixChunk), 8 warps: partial[row][chunk][j]. The tile's
// rows and the chunk of every weight row sit in shared memory; a warp task computes 4 rows x 6
// outputs, so each value read feeds several products. Per output, lanes sum strided columns, then
// the warp reduces: a row's value does not depend on the rest of the batch.
__global__ void __launch_bounds__(256) mix_partial_kernel(const float* __restrict__ x, int64_t rows, int64_t K,
                                                          const float* __restrict__ w, int n, int splits, bool vec,
                                                          float* __restrict__ partial) {
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
    for (int c = lane; c < kMixChunk; c += 32) {
      float xv[kMixRowsPerTask], wv[kMixOutsPerTask];
#pragma unroll
      for (int r = 0; r < kMixRowsPerTask; ++r) xv[r] = ra + r < tile_rows ? xs[(ra + r) * kMixChunk + c] : 0.0f;
#pragma unroll
      for (int j = 0; j < kMixOutsPerTask; ++j) wv[j] = ja + j < n ? ws[(ja + j) * kMixChunk + c] : 0.0f;
#pragma unroll
      for (int r = 0; r < kMixRowsPerTask; ++r)
#pragma unroll
        for (int j = 0; j < kMixOutsPerTask; ++j) acc[r][j] += wv[j] * xv[r];
    }
#pragma unroll
    for (int r = 0; r < kMixRowsPerTask; ++r)
#pragma unroll
      for (int j = 0; j < kMixOutsPerTask; ++j) {
        const float v = warp_sum(acc[r][j]);
        if (lane == 0 && ra + r < tile_rows && ja + j < n) partial[((r0 + ra + r) * splits + blockIdx.y) * n + ja + j] = v;
      }
  }
}

__global__ void mix_reduce_kernel(const float* __restrict__ partial, int64_t rows, int n, int splits, float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * n) return;
  const int64_t t = i / n, j = i % n;
  float acc = 0.0f;
  for (int s = 0; s < splits; ++s) acc += partial[(t * splits + s) * n + j];
  out[i] = acc;
}

// One block per row: the row's inverse RMS over all hc*d values.
__device__ float row_inv_rms(const float* s, int64_t n, float eps, float* red, bool vec = false) {
  float ss = 0.0f;
  if (vec) {  // n % 4 == 0, s 16-byte aligned
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
      const float4 v = reinterpret_cast<const float4*>(s)[i];
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += s[i] * s[i];
  }
  ss = block_sum(ss, red);
  return 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
}

// Sinkhorn normalisation of one row's n x n combination matrix, one thread per element (n * n <=
// blockDim.x). Sums run in the reference's order (j, then i ascending), so every thread divides by the
// same value the serial loop would. `sync` is __syncwarp when the matrix fits one warp, else
// __syncthreads; threads past n * n only take part in the synchronisation.
template <typename Sync>
__device__ void sinkhorn(float* c, int n, int iters, float eps, Sync sync) {
  const int e = threadIdx.x, i = e / n, j = e % n;
  const bool own = e < n * n;
  float v = 0.0f;
  if (own) {  // softmax of the row, then + eps
    float mx = -INFINITY;
    for (int k = 0; k < n; ++k) mx = fmaxf(mx, c[i * n + k]);
    float sum = 0.0f;
    for (int k = 0; k < n; ++k) sum += expf(c[i * n + k] - mx);
    v = expf(c[e] - mx) / sum + eps;
  }
  sync();
  if (own) c[e] = v;
  sync();
  for (int it = 0; it < iters; ++it) {
    if (it > 0) {  // rows
      if (own) {
        float sum = 0.0f;
        for (int k = 0; k < n; ++k) sum += c[i * n + k];
        v = c[e] / (sum + eps);
      }
      sync();
      if (own) c[e] = v;
      sync();
    }
    if (own) {  // columns
      float sum = 0.0f;
      for (int k = 0; k < n; ++k) sum += c[k * n + j];
      v = c[e] / (sum + eps);
    }
    sync();
    if (own) c[e] = v;
    sync();
  }
}

// One block per row (blockDim.x >= kMaxHc * kMaxHc).
__global__ void hc_pre_kernel(const float* __restrict__ streams, const float* __restrict__ mix, int hc, int64_t d,
                              const float* __restrict__ base, const float* __restrict__ scale, int iters, float eps,
                              float norm_eps, bool vec, float* __restrict__ collapsed, float* __restrict__ post,
                              float* __restrict__ comb) {
  __shared__ float red[32];
  __shared__ float pre[kMaxHc];
  __shared__ float c[kMaxHc * kMaxHc];
  const int64_t t = blockIdx.x;
  const int n = hc, nn = n * n, mix_size = (2 + n) * n;
  const float* s = streams + t * n * d;
  const float* m = mix + t * mix_size;
  const float inv = row_inv_rms(s, n * d, norm_eps, red, vec);
  const int tid = threadIdx.x;
  if (tid < n) {
    pre[tid] = sigmoidf_(m[tid] * inv * scale[0] + base[tid]) + eps;
    post[t * n + tid] = 2.0f * sigmoidf_(m[n + tid] * inv * scale[1] + base[n + tid]);
  }
  if (tid < nn) c[tid] = m[2 * n + tid] * inv * scale[2] + base[2 * n + tid];
  if (nn <= 32) {
    __syncwarp();
    if (tid < 32) sinkhorn(c, n, iters, eps, [] { __syncwarp(); });
  } else {
    __syncthreads();
    sinkhorn(c, n, iters, eps, [] { __syncthreads(); });
  }
  if (tid < nn) comb[t * nn + tid] = c[tid];
  __syncthreads();
  if (vec) {  // d % 4 == 0: four columns per step
    for (int64_t k = tid; k < d / 4; k += blockDim.x) {
      float4 acc = make_float4(0, 0, 0, 0);
      for (int i = 0; i < n; ++i) {
        const float4 v = reinterpret_cast<const float4*>(s + i * d)[k];
        acc.x += pre[i] * v.x;
        acc.y += pre[i] * v.y;
        acc.z += pre[i] * v.z;
        acc.w += pre[i] * v.w;
      }
      reinterpret_cast<float4*>(collapsed + t * d)[k] = acc;
    }
    return;
  }
  for (int64_t k = tid; k < d; k += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) acc += pre[i] * s[i * d + k];
    collapsed[t * d + k] = acc;
  }
}

// grid (rows * hc, column chunks): block (t, k) writes stream k of row t; four columns per thread
// when d % 4 == 0 (vec). The sum runs in the reference's order: post * out, then j ascending.
__global__ void hc_post_kernel(const float* __restrict__ streams, const float* __restrict__ out, const float* __restrict__ post,
                               const float* __restrict__ comb, int hc, int64_t d, bool vec, float* __restrict__ ns) {
  const int64_t tk = blockIdx.x, t = tk / hc;
  const int k = static_cast<int>(tk % hc);
  const float* s = streams + t * hc * d;
  const float* c = comb + t * hc * hc;
  const float p = post[tk];
  float* o = ns + tk * d;
  const int64_t x0 = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * (vec ? 4 : 1);
  if (x0 >= d) return;
  if (vec) {
    const float4 v = *reinterpret_cast<const float4*>(out + t * d + x0);
    float4 acc = make_float4(p * v.x, p * v.y, p * v.z, p * v.w);
    for (int j = 0; j < hc; ++j) {
      const float cj = c[j * hc + k];
      const float4 sj = *reinterpret_cast<const float4*>(s + j * d + x0);
      acc.x += cj * sj.x;
      acc.y += cj * sj.y;
      acc.z += cj * sj.z;
      acc.w += cj * sj.w;
    }
    *reinterpret_cast<float4*>(o + x0) = acc;
  } else {
    float acc = p * out[t * d + x0];
    for (int j = 0; j < hc; ++j) acc += c[j * hc + k] * s[j * d + x0];
    o[x0] = acc;
  }
}

__global__ void hc_head_kernel(const float* __restrict__ streams, const float* __restrict__ mix, int hc, int64_t d,
                               const float* __restrict__ base, const float* __restrict__ scale, float eps, float norm_eps,
                               float* __restrict__ out) {
  __shared__ float red[32];
  __shared__ float pre[kMaxHc];
  const int64_t t = blockIdx.x;
  const float* s = streams + t * hc * d;
  const float inv = row_inv_rms(s, hc * d, norm_eps, red);
  if (threadIdx.x < hc) pre[threadIdx.x] = sigmoidf_(mix[t * hc + threadIdx.x] * inv * scale[0] + base[threadIdx.x]) + eps;
  __syncthreads();
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < hc; ++i) acc += pre[i] * s[i * d + k];
    out[t * d + k] = acc;
  }
}

}  // namespace

cudaError_t f32_to_bf16(const float* x, bf16_t* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  const bool vec = (n % 4) == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0;
  const unsigned b = blocks_for(vec ? n / 4 : n, 256);
  f32_to_bf16_kernel<<<b > 4096 ? 4096 : b, 256, 0, s>>>(x, reinterpret_cast<__nv_bfloat16*>(y), n, vec);
  return cudaGetLastError();
}

cudaError_t fill_random(float* f32, bf16_t* b16, int64_t n, float mean, float stddev, uint64_t seed, cudaStream_t s) {
  if (n <= 0 || (!f32 && !b16)) return cudaSuccess;
  const unsigned b = blocks_for(n, 256);
  fill_random_kernel<<<b > 8192 ? 8192 : b, 256, 0, s>>>(f32, reinterpret_cast<__nv_bfloat16*>(b16), n, mean, stddev, seed);
  return cudaGetLastError();
}

cudaError_t spin(int64_t ns, cudaStream_t s) {
  if (ns <= 0) return cudaSuccess;
  spin_kernel<<<1, 1, 0, s>>>(ns);
  return cudaGetLastError();
}

cudaError_t embed(const bf16_t* table_b16, const float* table_f32, int64_t vocab, int64_t cols, const int32_t* tokens,
                  int64_t rows, float* out, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  embed_kernel<<<static_cast<unsigned>(rows), 256, 0, s>>>(reinterpret_cast<const __nv_bfloat16*>(table_b16), table_f32, vocab,
                                                           cols, tokens, out);
  return cudaGetLastError();
}

cudaError_t repeat_columns(const float* x, int64_t rows, int64_t cols, int times, float* out, cudaStream_t s) {
  const int64_t n = rows * cols * times;
  if (n <= 0) return cudaSuccess;
  unsigned b = blocks_for(n, 256);
  repeat_kernel<<<b > 8192 ? 8192 : b, 256, 0, s>>>(x, rows, cols, times, out);
  return cudaGetLastError();
}

cudaError_t rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t cols, int group, float* out,
                     cudaStream_t s) {
  if (rows <= 0 || cols <= 0 || group <= 0) return cudaSuccess;
  const int64_t blocks = rows * (cols / group);
  const int threads = group >= 2048 ? 256 : group >= 256 ? 128 : group >= 64 ? 64 : 32;
  auto al = [](const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = group % 4 == 0 && cols % 4 == 0 && al(x) && al(weight) && al(out);
  rms_norm_kernel<<<static_cast<unsigned>(blocks), threads, 0, s>>>(x, weight, eps, cols, group, vec, out);
  return cudaGetLastError();
}

cudaError_t rope(float* x, int64_t rows, int64_t cols, int head_dim, RopeDev r, const int32_t* positions, bool inverse,
                 cudaStream_t s) {
  const int64_t n = rows * (cols / head_dim) * (r.rope_dim / 2);
  if (n <= 0) return cudaSuccess;
  unsigned b = blocks_for(n, 256);
  rope_kernel<<<b > 8192 ? 8192 : b, 256, 0, s>>>(x, rows, cols, head_dim, r, positions, inverse);
  return cudaGetLastError();
}

cudaError_t add(float* a, const float* b, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  unsigned g = blocks_for(n, 256);
  add_kernel<<<g > 8192 ? 8192 : g, 256, 0, s>>>(a, b, n);
  return cudaGetLastError();
}

cudaError_t gather_rows(const float* x, int64_t cols, const int32_t* rows, int64_t n, float* out, cudaStream_t s) {
  if (n <= 0 || cols <= 0) return cudaSuccess;
  gather_kernel<<<static_cast<unsigned>(n), 256, 0, s>>>(x, cols, rows, out);
  return cudaGetLastError();
}

cudaError_t swiglu(float* g, const float* u, int64_t n, float limit, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  unsigned b = blocks_for(n, 256);
  swiglu_kernel<<<b > 8192 ? 8192 : b, 256, 0, s>>>(g, u, n, limit);
  return cudaGetLastError();
}

cudaError_t swiglu_bf16(const float* g, const float* u, int64_t n, float limit, bf16_t* h, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  unsigned b = blocks_for(n, 256);
  swiglu_bf16_kernel<<<b > 8192 ? 8192 : b, 256, 0, s>>>(g, u, n, limit, reinterpret_cast<__nv_bfloat16*>(h));
  return cudaGetLastError();
}

int mix_gemm_splits(int64_t K) { return static_cast<int>((K + kMixChunk - 1) / kMixChunk); }

cudaError_t mix_gemm(const float* x, int64_t rows, int64_t K, const float* w, int n, float* partial, float* out,
                     cudaStream_t s) {
  if (rows <= 0 || K <= 0 || n <= 0) return cudaSuccess;
  if (n > kMixMaxOut) return cudaErrorInvalidValue;
  const int splits = mix_gemm_splits(K);
  const int64_t tiles = (rows + kMixTileRows - 1) / kMixTileRows;
  if (splits > 65535 || tiles > 2147483647) return cudaErrorInvalidValue;
  const size_t smem = sizeof(float) * (kMixTileRows + n) * kMixChunk;
  static bool attr_set = false;  // up to 96 KB of shared memory: above the default limit
  if (!attr_set) {
    const cudaError_t e = cudaFuncSetAttribute(mix_partial_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(sizeof(float) * (kMixTileRows + kMixMaxOut) * kMixChunk));
    if (e != cudaSuccess) return e;
    attr_set = true;
  }
  const bool vec = K % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  mix_partial_kernel<<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)), 256, smem, s>>>(x, rows, K, w, n, splits, vec,
                                                                                                         partial);
  mix_reduce_kernel<<<blocks_for(rows * n, 256), 256, 0, s>>>(partial, rows, n, splits, out);
  return cudaGetLastError();
}

cudaError_t hc_pre(const float* streams, const float* mix, int64_t rows, int hc, int64_t d, const float* base,
                   const float* scale, int sinkhorn_iters, float eps, float norm_eps, float* collapsed, float* post,
                   float* comb, cudaStream_t s) {
  if (rows <= 0) return cudaSuccess;
  if (hc < 1 || hc > kMaxHc) return cudaErrorInvalidValue;
  const bool vec = d % 4 == 0 && reinterpret_cast<uintptr_t>(streams) % 16 == 0 && reinterpret_cast<uintptr_t>(collapsed) % 16 == 0;
  hc_pre_kernel<<<static_cast<unsigned>(rows), 256, 0, s>>>(streams, mix, hc, d, base, scale, sinkhorn_iters < 1 ? 1 : sinkhorn_iters,
                                                            eps, norm_eps, vec, collapsed, post, comb);
  return cudaGetLastError();
}

cudaError_t hc_post(const float* streams, const float* out, const float* post, const float* comb, int64_t rows, int hc,
                    int64_t d, float* new_streams, cudaStream_t s) {
  if (rows <= 0 || hc <= 0 || d <= 0) return cudaSuccess;
  auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = d % 4 == 0 && al(streams) && al(out) && al(new_streams);
  const int64_t chunks = (d / (vec ? 4 : 1) + 255) / 256;
  if (chunks > 65535 || rows * hc > 2147483647) return cudaErrorInvalidValue;
  hc_post_kernel<<<dim3(static_cast<unsigned>(rows * hc), static_cast<unsigned>(chunks)), 256, 0, s>>>(streams, out, post, comb, hc, d,
                                                                                                        vec, new_streams);
  return cudaGetLastError();
}

cudaError_t hc_head(const float* streams, const float* mix, int64_t rows, int hc, int64_t d, const float* base,
                    const float* scale, float eps, float norm_eps, float* out, cudaStream_t s) {
  if (rows <= 0) return cudaSuccess;
  if (hc < 1 || hc > kMaxHc) return cudaErrorInvalidValue;
  hc_head_kernel<<<static_cast<unsigned>(rows), 256, 0, s>>>(streams, mix, hc, d, base, scale, eps, norm_eps, out);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
