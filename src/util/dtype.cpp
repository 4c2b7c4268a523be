#include "util/dtype.h"

#include "util/json_excerpt.h"

#include <cmath>

namespace deepinfer {

Result<DType> parse_safetensors_dtype(std::string_view s) {
  struct Entry {
    std::string_view name;
    DType type;
  };
  static constexpr Entry kTable[] = {
      {"F64", DType::kF64},     {"F32", DType::kF32},         {"F16", DType::kF16},
      {"BF16", DType::kBF16},   {"F8_E4M3", DType::kF8E4M3},  {"F8_E8M0", DType::kF8E8M0},
      {"I64", DType::kI64},     {"I32", DType::kI32},         {"I8", DType::kI8},
      {"U8", DType::kU8},       {"BOOL", DType::kBool},
  };
  for (const auto& e : kTable)
    if (e.name == s) return e.type;
  return make_error(Code::kUnsupported, "unsupported tensor dtype \"{}\"", text_excerpt(s));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF64: return "F64";
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kF8E8M0: return "F8_E8M0";
    case DType::kI64: return "I64";
    case DType::kI32: return "I32";
    case DType::kI8: return "I8";
    case DType::kU8: return "U8";
    case DType::kBool: return "BOOL";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF64:
    case DType::kI64: return 8;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    default: return 1;
  }
}

float f16_to_f32(uint16_t v) {
  uint32_t sign = (v >> 15) & 1, exp = (v >> 10) & 0x1f, mant = v & 0x3ff;
  float mag;
  if (exp == 0) {
    mag = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    mag = mant ? bits_to_f32(0x7fc00000u) : bits_to_f32(0x7f800000u);
  } else {
    mag = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -mag : mag;
}

float fp8_e4m3_to_f32(uint8_t v) {
  uint32_t sign = v >> 7, exp = (v >> 3) & 0xf, mant = v & 7;
  float mag;
  if (exp == 0xf && mant == 7) {
    mag = bits_to_f32(0x7fc00000u);
  } else if (exp == 0) {
    mag = std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant/8 * 2^-6
  } else {
    mag = std::ldexp(static_cast<float>(mant | 8), static_cast<int>(exp) - 10);  // (1+m/8) * 2^(e-7)
  }
  return sign ? -mag : mag;
}

}  // namespace deepinfer
