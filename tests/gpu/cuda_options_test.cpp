// The CUDA backend's options (BackendOptions: backend_options.h), each off its default: the
// diagnostics change how kernels are launched or scratch is filled, never a result.
#include "random_model.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

using testing::demo_config;
using testing::prefill_then_decode;

// A backend made with `options` (skipping where no GPU is present) runs the random model to the
// same logits, bit for bit, as the default backend eagerly.
void expect_same_logits(const BackendOptions& options, bool graphs, const char* what) {
  auto def = testing::gpu_backend();
  if (!def) {
    if (def.error().code == Code::kUnsupported) GTEST_SKIP() << def.error().message;
    FAIL() << def.error().message;
  }
  auto other = testing::gpu_backend(false, {}, options);
  ASSERT_TRUE(other) << other.error().message;
  auto m_def = DeepseekV4::random(demo_config(), *def.value(), 11);
  auto m_other = DeepseekV4::random(demo_config(), *other.value(), 11);
  ASSERT_TRUE(m_def && m_other);
  const std::vector<float> want = prefill_then_decode(*m_def.value(), *def.value(), false, 3, 60, 12);
  const std::vector<float> got = prefill_then_decode(*m_other.value(), *other.value(), graphs, 3, 60, 12);
  ASSERT_EQ(got.size(), want.size());
  testing::print_deviation(std::string("options: ") + what, testing::deviation_of(got, want));
  EXPECT_EQ(got, want) << what;
}

// Programmatic dependent launch only lets a kernel's launch overlap the previous one's tail.
TEST(CudaOptions, PdlOffGivesTheSameLogits) {
  BackendOptions o;
  o.pdl = false;
  expect_same_logits(o, false, "pdl 0 (eager) vs default (eager)");
}

// Every kernel writes the scratch it is given before reading it: zero-filling it changes nothing.
TEST(CudaOptions, ZeroScratchGivesTheSameLogits) {
  BackendOptions o;
  o.zero_scratch = true;
  expect_same_logits(o, false, "zero_scratch 1 vs default");
}

// With graphs off, a runner that asks for graphs still runs every step eagerly: the eager logits.
TEST(CudaOptions, GraphsOffRunsDecodeStepsEagerly) {
  BackendOptions o;
  o.graphs = false;
  expect_same_logits(o, true, "graphs 0 (runner asks for graphs) vs default (eager)");
}

// Options applied to a live backend: the diagnostics change, the device and fp32 mode cannot; graphs
// turned off and on again come back for the runner that asked for them.
TEST(CudaOptions, SetOptionsOnALiveBackend) {
  DI_REQUIRE_GPU(gpu);
  BackendOptions o;
  o.pdl = false;
  o.zero_scratch = true;
  o.graphs = false;
  EXPECT_TRUE(gpu->set_options(o));
  BackendOptions fp32 = o;
  fp32.fp32_weights = true;
  auto r = gpu->set_options(fp32);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  BackendOptions device = o;
  device.cuda_device = 1;
  r = gpu->set_options(device);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_TRUE(gpu->set_options(BackendOptions{}));
  // The defaults again: graphs on for a runner that asks, as on a fresh backend.
  auto m = DeepseekV4::random(demo_config(), *gpu, 11);
  ASSERT_TRUE(m);
  const std::vector<float> eager = prefill_then_decode(*m.value(), *gpu, false, 3, 60, 12);
  const std::vector<float> graphs = prefill_then_decode(*m.value(), *gpu, true, 3, 60, 12);
  const auto d = testing::deviation_of(graphs, eager);
  testing::print_deviation("options: defaults restored, graphs vs eager", d);
  EXPECT_LE(d.relative, 1e-5);
}

// cuda_device picks the GPU: an ordinal past the devices present is refused; a second GPU, where
// there is one, runs the model like the first.
TEST(CudaOptions, CudaDeviceSelectsTheGpu) {
  DI_REQUIRE_GPU(first);
  BackendOptions o;
  o.cuda_device = 1 << 20;
  auto none = testing::gpu_backend(false, {}, o);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, Code::kInvalidArgument) << none.error().message;
  o.cuda_device = 1;
  auto second = testing::gpu_backend(false, {}, o);
  if (!second && second.error().code == Code::kInvalidArgument) GTEST_SKIP() << "one GPU: " << second.error().message;
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_NE(second.value()->name(), first->name());
  auto m1 = DeepseekV4::random(demo_config(), *first, 11);
  auto m2 = DeepseekV4::random(demo_config(), *second.value(), 11);
  ASSERT_TRUE(m1 && m2);
  const std::vector<float> a = prefill_then_decode(*m1.value(), *first, true, 3, 60, 12);
  const std::vector<float> b = prefill_then_decode(*m2.value(), *second.value(), true, 3, 60, 12);
  const auto d = testing::deviation_of(b, a);
  testing::print_deviation("options: cuda_device 1 vs 0", d);
  EXPECT_LE(d.relative, 1e-5);
}

}  // namespace
}  // namespace deepinfer
