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

// E2M1 (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives) by its bits: exponent e = bits 2-1 (bias 1),
// mantissa bit 0; e = 0 is 0 or the subnormal 0.5. (No table: an indexed array lives in local memory.)
__device__ __forceinline__ float e2m1_value(uint32_t code) {
  const uint32_t mag = code & 7u, sign = (code & 8u) << 28;
  const uint32_t bits = mag < 2u ? mag * 0x3f000000u : (((mag >> 1) + 126u) << 23) | ((mag & 1u) << 22);
  return __uint_as_float(bits | sign);
}

__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// An E8M0 scale 2^(s - 127) as bf16 bits: exact (2^-127 a subnormal); 0xff: NaN.
__device__ __forceinline__ uint32_t e8m0_as_bf16(uint32_t s) { return s == 0xffu ? 0x7fc0u : s == 0 ? 0x0040u : s << 7; }

// Eight E2M1 values (the nibbles of w, low first) times an E8M0 scale as four bf16 pairs (out[j]: values
// 2j, 2j + 1), rounded as bf16(e2m1 * scale) would be: byte permutes look up each magnitude's bf16
// bytes, move the signs in, and one bf16x2 multiply per pair applies the scale (a power of two,
// subnormal 2^-127 included; 0xff: NaN).
__device__ __forceinline__ void e2m1x8_to_bf16(uint32_t w, uint8_t scale, uint32_t (&out)[4]) {
  // bf16 of 0, 0.5, 1, 1.5, 2, 3, 4, 6: high bytes 00 3f 3f 3f 40 40 40 40, low bytes 00 00 80 c0 00 40 80 c0
  constexpr uint32_t kHi0 = 0x3f3f3f00u, kHi1 = 0x40404040u, kLo0 = 0xc0800000u, kLo1 = 0xc0804000u;
  const uint32_t s16 = e8m0_as_bf16(scale), s2 = s16 | (s16 << 16), w4 = w << 4;
  const uint32_t sel[2] = {w & 0x7777u, (w >> 16) & 0x7777u};  // magnitudes of nibbles 0-3, 4-7
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t hi = __byte_perm(kHi0, kHi1, sel[h]), lo = __byte_perm(kLo0, kLo1, sel[h]);
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int j = 2 * h + q;  // pair j: nibbles 2j, 2j + 1 (byte j of w)
      const uint32_t pair = __byte_perm(lo, hi, q == 0 ? 0x5140u : 0x7362u);
      // signs: bit 3 of byte j (w4's bit 7) to bit 15, bit 7 of byte j to bit 31
      const uint32_t sign = __byte_perm(w4, w, 0x4000u + 0x1111u * static_cast<uint32_t>(j));
      out[j] = mul_bf16x2(pair | (sign & 0x80008000u), s2);
    }
  }
}

// Block scale i of scales stored as S (kernels compiled per type need no switch in their loops).
template <ScaleType S>
__device__ __forceinline__ float block_scale(const void* scale, int64_t i) {
  if constexpr (S == ScaleType::kE8M0) return e8m0_value(static_cast<const uint8_t*>(scale)[i]);
  if constexpr (S == ScaleType::kF32) return static_cast<const float*>(scale)[i];
  return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(scale)[i]) << 16);
}

__device__ __forceinline__ float scale_value(const QuantizedWeight& w, int64_t i) {
  switch (w.scale_type) {
    case ScaleType::kE8M0: return block_scale<ScaleType::kE8M0>(w.scale, i);
    case ScaleType::kF32: return block_scale<ScaleType::kF32>(w.scale, i);
    case ScaleType::kBF16: return block_scale<ScaleType::kBF16>(w.scale, i);
  }
  return 0.0f;
}

}  // namespace
}  // namespace deepinfer::kernels
