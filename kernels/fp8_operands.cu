#include "common.cuh"
#include "fp8_operands.h"
#include "stored_formats.cuh"

#include <cuda_fp8.h>

namespace deepinfer::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;

// One warp per (row, 128-column block): four values a lane, the block's amax over the warp.
__global__ void quantize_activations_kernel(const bf16_t* x, int64_t rows, int64_t k, int64_t ldx, uint8_t* q, float* scales) {
  pdl_begin();
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kFp8ScaleBlock + lane * 4;
  const uint2 raw = *reinterpret_cast<const uint2*>(x + row * ldx + col);
  const float v[4] = {__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u), __uint_as_float(raw.y << 16),
                      __uint_as_float(raw.y & 0xffff0000u)};
  float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
#pragma unroll
  for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float scale = amax > 0.0f ? amax / 448.0f : 1.0f, inv = 1.0f / scale;
  uint32_t packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) packed |= static_cast<uint32_t>(__nv_cvt_float_to_fp8(v[i] * inv, __NV_SATFINITE, __NV_E4M3)) << (8 * i);
  *reinterpret_cast<uint32_t*>(q + row * k + col) = packed;
  if (lane == 0) scales[blockIdx.x * rows + row] = scale;
}

__global__ void weight_scales_kernel(QuantizedWeight w, int64_t block_rows, int64_t block_cols, float* out, int64_t ld) {
  pdl_begin();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= block_rows * block_cols) return;
  const int64_t r = i / block_cols, c = i % block_cols;
  out[r * ld + c] = scale_value(w, r * w.scale_cols + c);
}

}  // namespace

cudaError_t quantize_activations_e4m3(const bf16_t* x, int64_t rows, int64_t k, int64_t ldx, uint8_t* q, float* scales, Stream s) {
  if (rows == 0 || k == 0) return cudaSuccess;
  if (!x || !q || !scales || k % kFp8ScaleBlock != 0 || ldx % 4 != 0 || ldx < k || reinterpret_cast<uintptr_t>(x) % 8 != 0 ||
      reinterpret_cast<uintptr_t>(q) % 4 != 0 || (rows + kWarpsPerBlock - 1) / kWarpsPerBlock > 65535)
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(k / kFp8ScaleBlock), static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock));
  launch(quantize_activations_kernel, grid, dim3(32 * kWarpsPerBlock), 0, s)(x, rows, k, ldx, q, scales);
  return cudaGetLastError();
}

cudaError_t weight_scales_f32(const QuantizedWeight& w, float* out, int64_t ld, Stream s) {
  if (w.rows == 0 || w.cols == 0) return cudaSuccess;
  const int64_t block_rows = (w.rows + kFp8ScaleBlock - 1) / kFp8ScaleBlock, block_cols = (w.cols + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
  if (!w.scale || !out || w.block_rows != kFp8ScaleBlock || w.block_cols != kFp8ScaleBlock || w.scale_cols < block_cols || ld < block_cols)
    return cudaErrorInvalidValue;
  const int64_t n = block_rows * block_cols;
  launch(weight_scales_kernel, dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256), 0, s)(w, block_rows, block_cols, out, ld);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
