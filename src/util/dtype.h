// Element types of stored tensors (safetensors) and their conversions to float.
#pragma once

#include "util/result.h"

#include <cstdint>
#include <cstring>
#include <string_view>

namespace deepinfer {

enum class DType : uint8_t { kF64, kF32, kF16, kBF16, kF8E4M3, kF8E8M0, kI64, kI32, kI8, kU8, kBool };

// Parses a safetensors dtype string ("F32", "BF16", "F8_E4M3", ...).
Result<DType> parse_safetensors_dtype(std::string_view s);
const char* dtype_name(DType t);
size_t dtype_size(DType t);

inline float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline float bf16_to_f32(uint16_t v) { return bits_to_f32(static_cast<uint32_t>(v) << 16); }

// Round-to-nearest-even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_f32(uint16_t v);

// OCP FP8 E4M3 ("fn": no infinities, 0x7f/0xff are NaN, max 448).
float fp8_e4m3_to_f32(uint8_t v);

// UE8M0: an unsigned power-of-two exponent, 2^(v-127); 0xff is NaN. Read as raw bits, never cast.
inline float e8m0_to_f32(uint8_t v) {
  if (v == 0xff) return bits_to_f32(0x7fc00000u);
  if (v == 0) return bits_to_f32(0x00400000u);  // 2^-127 is subnormal in fp32
  return bits_to_f32(static_cast<uint32_t>(v) << 23);
}

// FP4 E2M1 (MXFP4 element), a 4-bit code: sign bit 3, values 0, 0.5, 1, 1.5, 2, 3, 4, 6.
inline float fp4_e2m1_to_f32(uint8_t code) {
  static constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float v = kValues[code & 7];
  return (code & 8) ? -v : v;
}

}  // namespace deepinfer
