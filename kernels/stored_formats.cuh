// The checkpoint formats' values on the device, shared by the kernels that read stored weights
// (dequantize.cu, native_gemv.cu).
#pragma once

#include "dequantize.h"

#include <cstdint>

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

// Four E4M3 bytes of a word: bit 7 of each byte of the result is set where that byte is a NaN code
// ("fn": 0x7f / 0xff, magnitude bits all set, which + 1 carries into bit 7). OR several words'
// results before testing them against 0x80808080.
__device__ __forceinline__ uint32_t e4m3_nan_marks(uint32_t word) { return (word & 0x7f7f7f7fu) + 0x01010101u; }

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

}  // namespace
}  // namespace deepinfer::kernels
