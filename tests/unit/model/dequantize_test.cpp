// Number formats against hand-computed values: bf16, f16, fp8-e4m3, e8m0, e2m1, and the two block
// formats (fp8 with 128x128 block scales, MXFP4 with one scale per 32); quantization into them.
#include "backend/weight_quantize.h"
#include "backend/weight_source.h"
#include "util/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace deepinfer {
namespace {

TEST(Dtype, ScalarConversions) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(bf16_to_f32(0x3e20), 0.15625f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);  // halfway: round to even
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0xc400), -4.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);   // exponent 7 (bias), mantissa 0
  EXPECT_EQ(fp8_e4m3_to_f32(0xb8), -1.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);  // (1 + 6/8) * 2^8, the largest finite value
  EXPECT_EQ(fp8_e4m3_to_f32(0x3c), 1.5f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xff)));
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(128), 2.0f);
  EXPECT_EQ(e8m0_to_f32(120), 1.0f / 128.0f);
  EXPECT_TRUE(std::isnan(e8m0_to_f32(255)));
  const float fp4[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (uint8_t c = 0; c < 16; ++c) EXPECT_EQ(fp4_e2m1_to_f32(c), fp4[c]) << int(c);
}

TEST(Dequantize, Fp8BlockScalesApplyPerBlock) {
  // 2 x 130: columns 0..127 are block 0 (scale 2^-1), columns 128..129 block 1 (scale 2^3).
  std::vector<uint8_t> values(2 * 130, 0x38);  // all 1.0
  values[129] = 0x3c;                          // 1.5 in block 1
  values[130 + 5] = 0xc0;                      // -2.0 in block 0, row 1
  std::vector<uint8_t> scales = {126, 130};    // e8m0: 0.5, 8
  WeightSource w;
  w.name = "w";
  w.format = WeightFormat::kFp8Block;
  w.rows = 2;
  w.cols = 130;
  w.values = {DType::kF8E4M3, {2, 130}, values.data(), values.size()};
  w.scale = {DType::kF8E8M0, {1, 2}, scales.data(), scales.size()};
  ASSERT_TRUE(validate_weight_source(w));
  std::vector<float> out(260);
  dequantize_to_f32(w, out.data());
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[127], 0.5f);
  EXPECT_EQ(out[128], 8.0f);
  EXPECT_EQ(out[129], 12.0f);
  EXPECT_EQ(out[130 + 5], -1.0f);
  EXPECT_EQ(out[130 + 129], 8.0f);

  std::vector<float> inv = {0.25f, 4.0f};  // weight_scale_inv as float: multiplied too
  w.scale = {DType::kF32, {1, 2}, reinterpret_cast<const uint8_t*>(inv.data()), 8};
  dequantize_to_f32(w, out.data());
  EXPECT_EQ(out[0], 0.25f);
  EXPECT_EQ(out[129], 6.0f);
}

TEST(Dequantize, Mxfp4LowNibbleFirstWithOneScalePer32) {
  // One row of 64: bytes hold (even, odd) codes as (low, high) nibbles.
  std::vector<uint8_t> packed(32, 0);
  packed[0] = 0x72;   // col 0: code 2 (1.0), col 1: code 7 (6.0)
  packed[16] = 0x9f;  // col 32: code 15 (-6.0), col 33: code 9 (-0.5)
  std::vector<uint8_t> scales = {128, 125};  // 2, 0.25
  WeightSource w;
  w.name = "experts";
  w.format = WeightFormat::kMxfp4;
  w.rows = 1;
  w.cols = 64;
  w.values = {DType::kI8, {1, 32}, packed.data(), packed.size()};
  w.scale = {DType::kF8E8M0, {1, 2}, scales.data(), scales.size()};
  ASSERT_TRUE(validate_weight_source(w));
  std::vector<float> out(64);
  dequantize_to_f32(w, out.data());
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 12.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[32], -1.5f);
  EXPECT_EQ(out[33], -0.125f);
}

TEST(Dequantize, RejectsShapesAndDtypesThatDoNotFit) {
  std::vector<uint8_t> bytes(64);
  WeightSource w;
  w.name = "layers.0.attn.wq_a.weight";
  w.rows = 4;
  w.cols = 8;
  w.values = {DType::kI32, {4, 4}, bytes.data(), 64};
  auto r = validate_weight_source(w);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kModelFormat);
  EXPECT_NE(r.error().message.find("layers.0.attn.wq_a.weight"), std::string::npos);
  w.values = {DType::kF32, {4, 4}, bytes.data(), 64};
  r = validate_weight_source(w);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("[4, 8] was expected"), std::string::npos);
  w.format = WeightFormat::kMxfp4;
  w.cols = 48;  // not a multiple of 32
  w.values = {DType::kU8, {4, 24}, bytes.data(), 96};
  EXPECT_FALSE(validate_weight_source(w));
}

}  // namespace
TEST(Quantize, E4m3RoundsToNearestEven) {
  for (int c = 0; c < 256; ++c) {  // every finite code comes back
    if ((c & 0x7f) == 0x7f) continue;
    const float v = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
    EXPECT_EQ(f32_to_e4m3(v), c == 0x80 ? 0x80 : c) << c;
  }
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);   // halfway between 1 (0x38) and 1.125 (0x39): even
  EXPECT_EQ(f32_to_e4m3(1.1875f), 0x3a);   // halfway between 1.125 and 1.25: even is 0x3a
  EXPECT_EQ(f32_to_e4m3(1.07f), 0x39);
  EXPECT_EQ(f32_to_e4m3(1000.0f), 0x7e);   // saturates at 448
  EXPECT_EQ(f32_to_e4m3(-1000.0f), 0xfe);
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -11)), 0x00);  // below half the smallest subnormal
  EXPECT_EQ(f32_to_e4m3(std::ldexp(3.0f, -10)), 0x02);  // 1.5 subnormal steps: ties to even (2)
  EXPECT_EQ(f32_to_e4m3(std::ldexp(3.0f, -11)), 0x01);  // 0.75 of a step
}

TEST(Quantize, BlockFormatsRoundTripWithinTheirPrecision) {
  const int64_t rows = 130, cols = 96;
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i) * 0.37f) * (i % 97 == 0 ? 30.0f : 1.0f);
  for (int64_t c = 0; c < cols; ++c) w[static_cast<size_t>(129 * cols + c)] = 0.0f;  // a zero row: blocks of zeros
  std::vector<uint8_t> codes, scales;
  quantize_fp8_block(w.data(), rows, cols, 128, codes, scales);
  ASSERT_EQ(scales.size(), 2u);  // [2, 1] blocks
  WeightSource fp8;
  fp8.format = WeightFormat::kFp8Block;
  fp8.rows = rows;
  fp8.cols = cols;
  fp8.values = {DType::kF8E4M3, {rows, cols}, codes.data(), codes.size()};
  fp8.scale = {DType::kF8E8M0, {2, 1}, scales.data(), scales.size()};
  ASSERT_TRUE(validate_weight_source(fp8));
  std::vector<float> back(w.size());
  dequantize_to_f32(fp8, back.data());
  // Within a block of amax A: |error| <= A / 16 (3 mantissa bits, scale up to 2x A / 448).
  for (size_t i = 0; i < w.size(); ++i) EXPECT_LE(std::fabs(back[i] - w[i]), 30.0f / 16) << i;
  for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(back[static_cast<size_t>(129 * cols + c)], 0.0f);
  std::vector<uint8_t> packed, mx_scales;
  quantize_mxfp4(w.data(), rows, cols, packed, mx_scales);
  WeightSource mx;
  mx.format = WeightFormat::kMxfp4;
  mx.rows = rows;
  mx.cols = cols;
  mx.values = {DType::kU8, {rows, cols / 2}, packed.data(), packed.size()};
  mx.scale = {DType::kF8E8M0, {rows, cols / 32}, mx_scales.data(), mx_scales.size()};
  ASSERT_TRUE(validate_weight_source(mx));
  dequantize_to_f32(mx, back.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < cols / 32; ++g) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(w[static_cast<size_t>(r * cols + g * 32 + i)]));
      for (int i = 0; i < 32; ++i) {
        const size_t k = static_cast<size_t>(r * cols + g * 32 + i);
        EXPECT_LE(std::fabs(back[k] - w[k]), amax / 3) << r << " " << g << " " << i;  // half the widest step (4 to 6), scale < amax / 3
      }
    }
  // Values a format holds exactly come back exactly.
  const float exact[32] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.5f, -1, -6, 6, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 6, 6, -2, -3, -4, 0.5f, 1.5f, 1, 0, 0};
  quantize_mxfp4(exact, 1, 32, packed, mx_scales);
  mx.rows = 1;
  mx.cols = 32;
  mx.values = {DType::kU8, {1, 16}, packed.data(), packed.size()};
  mx.scale = {DType::kF8E8M0, {1, 1}, mx_scales.data(), mx_scales.size()};
  dequantize_to_f32(mx, back.data());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(back[static_cast<size_t>(i)], exact[i]) << i;
}

}  // namespace deepinfer
