// Quantization into DeepSeek's released weight formats (the inverse of dequantize_to_f32, as
// tests/golden/models/make_fixtures.py quantizes with PyTorch): FP8 E4M3 with one power-of-two (E8M0)
// scale per block, and MXFP4 (E2M1 pairs, one E8M0 scale per 32 values along a row).
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer {

// Round to nearest, ties to even; magnitudes past 448 saturate to 448.
uint8_t f32_to_e4m3(float x);
// Per block of block x block: scale = 2^ceil(log2(amax / 448)) (amax at least 1e-12). Codes row-major,
// scales [ceil(rows / block), ceil(cols / block)] as E8M0 bytes.
void quantize_fp8_block(const float* w, int64_t rows, int64_t cols, int block, std::vector<uint8_t>& codes, std::vector<uint8_t>& scales);
// Per 32 values of a row: scale = 2^ceil(log2(amax / 6)), each value the nearest E2M1 (ties to the
// smaller magnitude), low nibble = even column. cols must be a multiple of 32.
void quantize_mxfp4(const float* w, int64_t rows, int64_t cols, std::vector<uint8_t>& packed, std::vector<uint8_t>& scales);

}  // namespace deepinfer
