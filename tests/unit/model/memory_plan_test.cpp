// The memory plan of deepinfer bench --memory-plan: V4-Flash in its released formats (~157 GB of
// weights, ~570 GB as bf16) needs two H200s; its 4-layer shape (16.44 GB, the size of the checkpoint
// native_checkpoint writes) fits on one.
#include "model/memory_plan.h"

#include "golden_fixture.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

MemoryPlan plan_of(const std::string& file) {
  auto c = ModelConfig::from_file(testing::golden_dir() + "/../../tools/bench/configs/" + file);
  EXPECT_TRUE(c) << c.error().message;
  auto cpu = make_cpu_backend(1);
  EXPECT_TRUE(cpu);
  auto p = plan_memory(c.value(), *cpu.value());
  EXPECT_TRUE(p) << p.error().message;
  return p ? p.value() : MemoryPlan{};
}

TEST(MemoryPlan, V4FlashNeedsTwoH200sItsFourLayersOne) {
  const MemoryPlan full = plan_of("v4-flash.json");
  EXPECT_NEAR(full.weight_bytes() / 1e9, 156.0, 1.0);
  EXPECT_NEAR(full.bf16_store / 1e9, 569.0, 2.0);
  EXPECT_NEAR(full.mxfp4 / 1e9, 147.2, 0.5);  // the routed experts are most of it
  ASSERT_EQ(full.layer_bytes.size(), 43u);
  auto lines = describe_memory_plan(full, 141e9, 6e9, {4096});
  bool two = false, one_holds = false;
  for (const auto& l : lines) {
    two |= l.find("need 2 devices") != std::string::npos;
    one_holds |= l.find("One device holds the model's own weights and layers 0-36") != std::string::npos;
  }
  EXPECT_TRUE(two);
  EXPECT_TRUE(one_holds);
  const MemoryPlan four = plan_of("v4-flash-4l.json");
  EXPECT_NEAR(four.weight_bytes() / 1e9, 16.44, 0.01);
  EXPECT_GT(four.state_bytes(4096), 0.0);
  EXPECT_LT(four.state_bytes(4096), four.state_bytes(32768));
  lines = describe_memory_plan(four, 141e9, 6e9, {4096});
  bool one = false;
  for (const auto& l : lines) one |= l.find("need 1 device.") != std::string::npos;
  EXPECT_TRUE(one);
}

}  // namespace
}  // namespace deepinfer
