#include "common.cuh"
#include "dequantize.h"

namespace deepinfer::kernels {
namespace {

// The formats' values as src/util/dtype.h decodes them: exact in fp32.
__device__ __forceinline__ float e8m0_value(uint8_t v) {
  if (v == 0xff) return __uint_as_float(0x7fc00000u);
  if (v == 0) return __uint_as_float(0x00400000u);  // 2^-127, subnormal in fp32
  return __uint_as_float(static_cast<uint32_t>(v) << 23);
}

__device__ __forceinline__ float e4m3_value(uint8_t v) {
  const uint32_t exp = (v >> 3) & 0xfu, mant = v & 7u;
  float mag;
  if (exp == 0xfu && mant == 7u) {
    mag = __uint_as_float(0x7fc00000u);  // "fn": 0x7f / 0xff are NaN, no infinities
  } else if (exp == 0) {
    mag = static_cast<float>(mant) * 0x1p-9f;  // subnormal: mant / 8 * 2^-6
  } else {
    mag = __uint_as_float(((exp + 120u) << 23) | (mant << 20));  // (1 + mant / 8) * 2^(exp - 7)
  }
  return (v >> 7) ? -mag : mag;
}

__device__ __forceinline__ float e2m1_value(uint32_t code) {
  constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = kValues[code & 7u];
  return (code & 8u) ? -v : v;
}

__device__ __forceinline__ float scale_value(const QuantizedWeight& w, int64_t i) {
  switch (w.scale_type) {
    case ScaleType::kE8M0: return e8m0_value(static_cast<const uint8_t*>(w.scale)[i]);
    case ScaleType::kF32: return static_cast<const float*>(w.scale)[i];
    case ScaleType::kBF16: return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(w.scale)[i]) << 16);
  }
  return 0.0f;
}

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

}  // namespace deepinfer::kernels
