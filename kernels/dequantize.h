// Checkpoint weight formats (src/backend/weight_source.h: FP8 E4M3 with block scales, MXFP4)
// turned into bf16 and/or fp32 on the device, value for value as the CPU backend's
// dequantize_to_f32 and f32_to_bf16 compute them (NaN stays NaN, its payload aside).
#pragma once

#include "launch.h"

namespace deepinfer::kernels {

enum class StoredFormat : int32_t { kFp8Block, kMxfp4 };
enum class ScaleType : int32_t { kE8M0, kF32, kBF16 };

constexpr int64_t scale_bytes(ScaleType t) { return t == ScaleType::kE8M0 ? 1 : t == ScaleType::kF32 ? 4 : 2; }

struct QuantizedWeight {
  const uint8_t* values = nullptr;  // fp8: rows x cols bytes; mxfp4: rows x cols / 2 (low nibble first)
  const void* scale = nullptr;      // fp8: per block, row-major [ceil(rows / block_rows), scale_cols]; mxfp4: E8M0 per 32 along a row
  ScaleType scale_type = ScaleType::kE8M0;
  int64_t rows = 0, cols = 0;
  int32_t block_rows = 128, block_cols = 128;
  int64_t scale_cols = 0;  // fp8 only
  bool nan_free = false;   // fp8: known to hold no NaN code (0x7f / 0xff), so native_gemv skips its per-value test
};

// Writes rows x cols values (row-major) into b16 and/or f32 (either may be null).
cudaError_t dequantize_fp8_block(const QuantizedWeight& w, bf16_t* b16, float* f32, Stream s);
// (MXFP4: w.values and the outputs 16-byte aligned.)
cudaError_t dequantize_mxfp4(const QuantizedWeight& w, bf16_t* b16, float* f32, Stream s);
// Sets *found (device memory, not cleared here) to 1 when any of the n E4M3 bytes at `values`
// (16-byte aligned) is a NaN code (0x7f / 0xff): what QuantizedWeight::nan_free records.
cudaError_t find_fp8_nan_codes(const uint8_t* values, int64_t n, int* found, Stream s);

}  // namespace deepinfer::kernels
