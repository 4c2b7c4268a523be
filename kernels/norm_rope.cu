// RMS norms (a block per group, or a warp per group for prefill's many short ones) with the rope of
// each normalised head applied in the same pass, and the rope alone (fp32 or bf16 values).
#include "common.cuh"

namespace deepinfer::kernels {
namespace {

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

}  // namespace

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
  auto al = [](const void* p) { return p == nullptr || aligned16(p); };  // (null: not read)
  auto vec_ok = [&](const NormTensor& t) { return t.cols % 4 == 0 && al(t.x) && al(t.weight) && al(t.out); };
  const bool vec = group % 4 == 0 && vec_ok(a) && vec_ok(b);
  // bf16 storage: four values per step, rotated in registers
  if ((a.bf16 || b.bf16) && (!vec || (rope && rope->rope_dim % 4 != 0))) return cudaErrorInvalidValue;
  const RopeDev r = rope ? *rope : RopeDev{};
  const int32_t* pos = rope ? positions : nullptr;
  // A warp per group where there are many (prefill); a decode step's few groups spread over more
  // multiprocessors as a block each (measured: 23 vs 28 us for a step's four q + kv norms). The two
  // sum squares in different orders: batch-invariant launches take the warp kernel wherever it fits.
  if ((blocks >= 4096 || s.invariant) && vec && group % 128 == 0 && (!rope || rope->rope_dim % 4 == 0)) {
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

}  // namespace deepinfer::kernels
