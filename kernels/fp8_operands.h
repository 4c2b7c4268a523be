// Operands of FP8 tensor-core products (cuBLASLt's block-scaled E4M3 matmuls on Hopper, the scaling
// DeepSeek's own kernels use): bf16 activations quantized per row and 128 columns, and a stored FP8
// weight's block scales as the fp32 table cuBLASLt reads.
#pragma once

#include "dequantize.h"
#include "launch.h"

namespace deepinfer::kernels {

inline constexpr int kFp8ScaleBlock = 128;

// x (rows x k bf16, row stride ldx) as E4M3 bytes q (rows x k) with one fp32 scale per row and 128
// columns: scale = amax / 448 (1 for an all-zero block), q = x / scale saturated. scales holds
// k / 128 x rows floats, the row index fastest (cuBLASLt's VEC128_32F layout). k a multiple of 128,
// ldx of 4, x 8-byte aligned.
cudaError_t quantize_activations_e4m3(const bf16_t* x, int64_t rows, int64_t k, int64_t ldx, uint8_t* q, float* scales, Stream s);

// The block scales of a stored FP8 weight (128 x 128 blocks, any ScaleType) as fp32: block row r's
// scales at out[r * ld ...], ld >= ceil(cols / 128) (cuBLASLt's BLK128x128_32F layout takes ld
// rounded up to 4; the padding is left as it was).
cudaError_t weight_scales_f32(const QuantizedWeight& w, float* out, int64_t ld, Stream s);

}  // namespace deepinfer::kernels
