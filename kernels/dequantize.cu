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

// One block per row (rows may exceed grid.y's limit; columns are few enough to loop over).
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

__global__ void dequantize_mxfp4_kernel(QuantizedWeight w, bf16_t* b16, float* f32) {
  pdl_begin();
  const int64_t r = blockIdx.x;
  const uint8_t* row = w.values + r * (w.cols / 2);
  const uint8_t* scales = static_cast<const uint8_t*>(w.scale) + r * (w.cols / 32);
  for (int64_t c = threadIdx.x; c < w.cols; c += blockDim.x) {
    const uint32_t byte = row[c / 2];
    const uint32_t code = (c & 1) ? byte >> 4 : byte & 0xfu;
    store(b16, f32, r * w.cols + c, __fmul_rn(e2m1_value(code), e8m0_value(scales[c / 32])));
  }
}

bool launchable(const QuantizedWeight& w, const void* b16, const void* f32) {
  return w.rows > 0 && w.cols > 0 && w.rows <= 2147483647 && (b16 || f32);
}

}  // namespace

cudaError_t dequantize_fp8_block(const QuantizedWeight& w, bf16_t* b16, float* f32, Stream s) {
  if (!launchable(w, b16, f32)) return w.rows == 0 || w.cols == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (w.block_rows <= 0 || w.block_cols <= 0) return cudaErrorInvalidValue;
  launch(dequantize_fp8_block_kernel, dim3(static_cast<unsigned>(w.rows)), dim3(256), 0, s)(w, b16, f32);
  return cudaGetLastError();
}

cudaError_t dequantize_mxfp4(const QuantizedWeight& w, bf16_t* b16, float* f32, Stream s) {
  if (!launchable(w, b16, f32)) return w.rows == 0 || w.cols == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (w.cols % 32 != 0 || w.scale_type != ScaleType::kE8M0) return cudaErrorInvalidValue;
  launch(dequantize_mxfp4_kernel, dim3(static_cast<unsigned>(w.rows)), dim3(256), 0, s)(w, b16, f32);
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
  if (!values || !found || reinterpret_cast<uintptr_t>(values) % 16 != 0) return cudaErrorInvalidValue;
  const int64_t chunks = n / 16;
  const unsigned blocks = static_cast<unsigned>(std::clamp<int64_t>((chunks + 255) / 256, 1, 1024));
  launch(fp8_nan_codes_kernel, dim3(blocks), dim3(256), 0, s)(reinterpret_cast<const uint4*>(values), chunks, values + chunks * 16,
                                                              static_cast<int>(n - chunks * 16), found);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
