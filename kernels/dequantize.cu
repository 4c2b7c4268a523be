#include "common.cuh"
#include "dequantize.h"
#include "stored_formats.cuh"

#include <algorithm>

namespace deepinfer::kernels {
namespace {

// f32_to_bf16 of src/util/dtype.h: round to nearest even; a NaN stays NaN (quiet).
__device__ __forceinline__ bf16_t bf16_of(float f) {
  uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<bf16_t>(bits >> 16);
}

__device__ __forceinline__ void store(bf16_t* b16, float* f32, int64_t i, float v) {
  if (b16) b16[i] = bf16_of(v);
  if (f32) f32[i] = v;
}

// One block per row (rows may exceed grid.y's limit; columns are few enough to loop over): any shape.
__global__ void dequantize_fp8_block_kernel(QuantizedWeight w, bf16_t* b16, float* f32) {
  pdl_begin();
  const int64_t r = blockIdx.x;
  const int64_t scale_row = (r / w.block_rows) * w.scale_cols;
  const uint8_t* row = w.values + r * w.cols;
  for (int64_t c = threadIdx.x; c < w.cols; c += blockDim.x) {
    const float v = __fmul_rn(e4m3_value(row[c]), scale_value(w, scale_row + c / w.block_cols));
    store(b16, f32, r * w.cols + c, v);
  }
}

// A thread's n values (n a multiple of 8), written with 16-byte stores (the outputs 16-byte aligned).
template <int n>
__device__ __forceinline__ void store_values(const float (&v)[n], bf16_t* b16, float* f32, int64_t at) {
  if (b16) {
#pragma unroll
    for (int i = 0; i < n; i += 8) {
      uint32_t p[4];
#pragma unroll
      for (int j = 0; j < 4; ++j)
        p[j] = static_cast<uint32_t>(bf16_of(v[i + 2 * j])) | static_cast<uint32_t>(bf16_of(v[i + 2 * j + 1])) << 16;
      *reinterpret_cast<uint4*>(b16 + at + i) = make_uint4(p[0], p[1], p[2], p[3]);
    }
  }
  if (f32) {
#pragma unroll
    for (int i = 0; i < n; i += 4) *reinterpret_cast<float4*>(f32 + at + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
  }
}

__device__ __forceinline__ void unpack_bytes(const uint8_t* p, uint8_t (&b)[16]) {
  const uint4 q = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 16; ++i) b[i] = static_cast<uint8_t>(w[i / 4] >> (8 * (i % 4)));
}

// A thread per 16 values (16 stored bytes, one block scale: block_cols a multiple of 16), 16-byte
// loads and stores: the rate the per-call dequantization of native_weights' larger products needs.
__global__ void dequantize_fp8_chunks_kernel(QuantizedWeight w, bf16_t* b16, float* f32) {
  pdl_begin();
  const int64_t per_row = w.cols / 16, n = w.rows * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c = (i % per_row) * 16;
    const float scale = scale_value(w, (r / w.block_rows) * w.scale_cols + c / w.block_cols);
    uint8_t b[16];
    unpack_bytes(w.values + r * w.cols + c, b);
    float v[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] = __fmul_rn(e4m3_value(b[j]), scale);
    store_values(v, b16, f32, r * w.cols + c);
  }
}

// A thread per 32 values (16 stored bytes sharing one E8M0 scale); bf16 by e2m1x8_to_bf16 (what the
// MXFP4 wgmma tiles decode with, so the host comparison of this kernel checks that too).
__global__ void dequantize_mxfp4_kernel(QuantizedWeight w, bf16_t* b16, float* f32) {
  pdl_begin();
  const int64_t n = w.rows * (w.cols / 32);
  const auto* scales = static_cast<const uint8_t*>(w.scale);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 q = *reinterpret_cast<const uint4*>(w.values + i * 16);
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
    if (b16) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t p[4];
        e2m1x8_to_bf16(words[j], scales[i], p);
        *reinterpret_cast<uint4*>(b16 + i * 32 + 8 * j) = make_uint4(p[0], p[1], p[2], p[3]);
      }
    }
    if (f32) {
      const float scale = e8m0_value(scales[i]);
#pragma unroll
      for (int j = 0; j < 32; j += 4)
        *reinterpret_cast<float4*>(f32 + i * 32 + j) = make_float4(__fmul_rn(e2m1_value(words[j / 8] >> (4 * (j % 8))), scale),
                                                                   __fmul_rn(e2m1_value(words[j / 8] >> (4 * (j % 8) + 4)), scale),
                                                                   __fmul_rn(e2m1_value(words[j / 8] >> (4 * (j % 8) + 8)), scale),
                                                                   __fmul_rn(e2m1_value(words[j / 8] >> (4 * (j % 8) + 12)), scale));
    }
  }
}

unsigned grid_for(int64_t threads) { return static_cast<unsigned>(std::clamp<int64_t>((threads + 255) / 256, 1, 132 * 16)); }

bool launchable(const QuantizedWeight& w, const void* b16, const void* f32) {
  return w.rows > 0 && w.cols > 0 && w.rows <= 2147483647 && (b16 || f32);
}

}  // namespace

cudaError_t dequantize_fp8_block(const QuantizedWeight& w, bf16_t* b16, float* f32, Stream s) {
  if (!launchable(w, b16, f32)) return w.rows == 0 || w.cols == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (w.block_rows <= 0 || w.block_cols <= 0) return cudaErrorInvalidValue;
  if (w.cols % 16 == 0 && w.block_cols % 16 == 0 && aligned16(w.values) && aligned16(b16) && aligned16(f32))
    launch(dequantize_fp8_chunks_kernel, dim3(grid_for(w.rows * (w.cols / 16))), dim3(256), 0, s)(w, b16, f32);
  else
    launch(dequantize_fp8_block_kernel, dim3(static_cast<unsigned>(w.rows)), dim3(256), 0, s)(w, b16, f32);
  return cudaGetLastError();
}

cudaError_t dequantize_mxfp4(const QuantizedWeight& w, bf16_t* b16, float* f32, Stream s) {
  if (!launchable(w, b16, f32)) return w.rows == 0 || w.cols == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (w.cols % 32 != 0 || w.scale_type != ScaleType::kE8M0 || !aligned16(w.values) || !aligned16(b16) || !aligned16(f32))
    return cudaErrorInvalidValue;
  launch(dequantize_mxfp4_kernel, dim3(grid_for(w.rows * (w.cols / 32))), dim3(256), 0, s)(w, b16, f32);
  return cudaGetLastError();
}

__global__ void fp8_nan_codes_kernel(const uint4* v, int64_t chunks, const uint8_t* tail, int tail_bytes, int* found) {
  pdl_begin();
  bool nan = false;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 q = v[i];
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    for (uint32_t x : w) nan |= (e4m3_nan_marks(x) & 0x80808080u) != 0;
  }
  if (blockIdx.x == 0 && static_cast<int>(threadIdx.x) < tail_bytes) nan |= (tail[threadIdx.x] & 0x7fu) == 0x7fu;
  if (__syncthreads_or(nan) && threadIdx.x == 0) atomicOr(found, 1);
}

cudaError_t find_fp8_nan_codes(const uint8_t* values, int64_t n, int* found, Stream s) {
  if (n <= 0) return cudaSuccess;
  if (!values || !found || !aligned16(values)) return cudaErrorInvalidValue;
  const int64_t chunks = n / 16;
  const unsigned blocks = static_cast<unsigned>(std::clamp<int64_t>((chunks + 255) / 256, 1, 1024));
  launch(fp8_nan_codes_kernel, dim3(blocks), dim3(256), 0, s)(reinterpret_cast<const uint4*>(values), chunks, values + chunks * 16,
                                                              static_cast<int>(n - chunks * 16), found);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
