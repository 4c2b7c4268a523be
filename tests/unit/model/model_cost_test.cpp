// The analytic costs behind deepinfer bench's floors, against the hand-derived V4-Flash-4L numbers
// of the performance notes (bf16 weights: ~54.8 GB stored, ~3.44 GB read by a batch-1 decode step).
#include "model/model_cost.h"

#include "golden_fixture.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

ModelConfig flash4() {
  auto c = ModelConfig::from_file(testing::golden_dir() + "/../../tools/bench/configs/v4-flash-4l.json");
  EXPECT_TRUE(c) << c.error().message;
  return c ? c.value() : ModelConfig{};
}

TEST(ModelCost, FlashFourLayersMatchesTheRoofline) {
  const ModelConfig c = flash4();
  ASSERT_EQ(c.num_layers, 4);
  const ModelCost m(c);
  EXPECT_NEAR(m.stored_weight_bytes() / 1e9, 54.9, 0.3);
  const auto b1 = m.decode_bytes(1, 4096);
  EXPECT_NEAR(b1.distinct_experts, 6.0, 1e-9);
  // Weights: 3.44 GB with bf16 router and mixes; this backend reads those two in fp32 (+~25 MB).
  EXPECT_NEAR((b1.dense + b1.experts) / 1e9, 3.46, 0.03);
  EXPECT_GT(b1.state, 0.0);
  EXPECT_LT(b1.state, 0.02e9);
  EXPECT_NEAR(m.expected_distinct_experts(64), 199.9, 0.5);
  EXPECT_NEAR(m.expected_distinct_experts(256), 255.4, 0.5);
  // State reads grow with the batch and the context.
  EXPECT_GT(m.decode_bytes(64, 32768).state, m.decode_bytes(64, 4096).state * 2.5);
  // Prefill: ~2 x active params per token (2.4 GFLOP at V4-Flash-4L) plus attention.
  EXPECT_NEAR(m.token_flops(0) / 1e9, 2.38, 0.1);
  EXPECT_GT(m.token_flops(32767), m.token_flops(0));
  EXPECT_NEAR(m.head_flops() / 1e9, 1.06, 0.01);
}

// The native_weights storage: FP8 linears (attention, shared expert), MXFP4 routed experts. The CUDA
// backend measured 16.48 GB of weights on the device for this shape (a 16.44 GB checkpoint).
TEST(ModelCost, FlashFourLayersInTheReleasedFormats) {
  const ModelConfig c = flash4();
  const ModelCost bf16(c), native(c, WeightStorage::kNative);
  EXPECT_NEAR(native.stored_weight_bytes() / 1e9, 16.48, 0.05);
  const auto b1 = native.decode_bytes(1, 4096), b1_bf16 = bf16.decode_bytes(1, 4096);
  // Per layer the routed experts read at batch 1: 6 x 3 x 2048 x 4096 values at 0.53125 bytes.
  EXPECT_NEAR(b1.experts / 4, 6 * 3 * 2048 * 4096 * 0.53125, 1.0);
  EXPECT_NEAR(b1.experts * 2 / 0.53125, b1_bf16.experts, 1.0);
  // The bf16 LM head (1.06 GB) stays; the FP8 linears take half their bf16 bytes.
  EXPECT_LT(b1.dense, b1_bf16.dense * 0.8);
  EXPECT_GT(b1.dense, 129280.0 * 4096 * 2);
  EXPECT_EQ(b1.state, b1_bf16.state);
  EXPECT_EQ(native.token_flops(100), bf16.token_flops(100));
  EXPECT_NEAR(native.decode_bytes(64, 4096).experts * 2 / 0.53125, bf16.decode_bytes(64, 4096).experts, 1e3);
}

}  // namespace
}  // namespace deepinfer
