// Random-weight models (DeepseekV4::random) on the CUDA backend: the same weights as on the CPU
// (fp32 mode matches to rounding, bf16 mode to bf16 rounding), decode steps replayed as CUDA graphs
// equal to eager ones, and the per-op profile of a step.
#include "random_model.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace deepinfer {
namespace {

using testing::demo_config;
using testing::prefill_then_decode;

double top1_agreement(const std::vector<float>& a, const std::vector<float>& b, size_t vocab) {
  size_t same = 0, n = std::min(a.size(), b.size()) / vocab;
  for (size_t i = 0; i < n; ++i) {
    auto x = a.begin() + static_cast<int64_t>(i * vocab), y = b.begin() + static_cast<int64_t>(i * vocab);
    same += std::max_element(x, x + static_cast<int64_t>(vocab)) - x == std::max_element(y, y + static_cast<int64_t>(vocab)) - y;
  }
  return n ? static_cast<double>(same) / n : 0.0;
}

// fp32 mode against the CPU to rounding, bf16 mode to bf16 rounding, graph replays equal to eager.
void expect_matches_cpu(const ModelConfig& c, Backend* gpu) {
  auto gpu32_r = testing::gpu_backend(true);
  ASSERT_TRUE(gpu32_r) << gpu32_r.error().message;
  auto gpu32 = std::move(gpu32_r).value();
  auto cpu = make_cpu_backend().value();
  auto m_cpu = DeepseekV4::random(c, *cpu, 11);
  auto m_gpu32 = DeepseekV4::random(c, *gpu32, 11);
  auto m_gpu = DeepseekV4::random(c, *gpu, 11);
  ASSERT_TRUE(m_cpu && m_gpu32 && m_gpu);

  const std::vector<float> ref = prefill_then_decode(*m_cpu.value(), *cpu, false);
  const std::vector<float> f32 = prefill_then_decode(*m_gpu32.value(), *gpu32, true);
  const std::vector<float> eager = prefill_then_decode(*m_gpu.value(), *gpu, false);
  const std::vector<float> graphs = prefill_then_decode(*m_gpu.value(), *gpu, true);
  ASSERT_EQ(ref.size(), 41u * 3 * 4096);
  ASSERT_EQ(f32.size(), ref.size());
  ASSERT_EQ(eager.size(), ref.size());
  ASSERT_EQ(graphs.size(), ref.size());

  const auto d32 = testing::deviation_of(f32, ref);
  testing::print_deviation("random model: cuda fp32 (graphs) vs cpu", d32);
  EXPECT_TRUE(d32.finite);
  EXPECT_LE(d32.relative, 1e-4);
  const auto d16 = testing::deviation_of(eager, ref);
  testing::print_deviation("random model: cuda bf16 eager vs cpu", d16);
  EXPECT_TRUE(d16.finite);
  EXPECT_LE(d16.relative, 0.15);  // bf16 weights and activations (the golden fixtures land near 0.1)
  EXPECT_GE(top1_agreement(eager, ref, 4096), 0.8);
  const auto dg = testing::deviation_of(graphs, eager);
  testing::print_deviation("random model: cuda bf16 graphs vs eager", dg);
  EXPECT_TRUE(dg.finite);
  EXPECT_LE(dg.relative, 1e-5);
}

TEST(CudaRandomModel, MatchesCpuAndGraphReplaysMatchEager) {
  DI_REQUIRE_GPU(gpu);
  expect_matches_cpu(demo_config(), gpu.get());
}

// Decode steps of more rows than the GEMV kernels take (12 sequences), eager and replayed as graphs:
// in a capture the MoE feed-forward runs its shared expert after the routed experts on one stream,
// the routed experts on tile kernels (no host-read counts), the compressor pools each window in one
// launch; the attention shares each row's keys among blocks (64-head tiles at head_dim 512). Eager
// steps take other kernels for some of these (cuBLAS expert slabs, the shared expert beside the routed
// ones), so graphs and eager steps agree to bf16 rounding, not bit for bit (measured on an H200:
// 3e-4 to 6e-4 relative); both stay near the CPU.
TEST(CudaRandomModel, WideDecodeStepsReplayedAsGraphsMatchEager) {
  DI_REQUIRE_GPU(gpu);
  ModelConfig wide = demo_config();
  wide.head_dim = 512;
  wide.num_heads = 64;
  for (const ModelConfig& c : {demo_config(), wide}) {
    auto cpu = make_cpu_backend().value();
    auto m_cpu = DeepseekV4::random(c, *cpu, 3);
    auto m_gpu = DeepseekV4::random(c, *gpu, 3);
    ASSERT_TRUE(m_cpu && m_gpu);
    const int n = 12, prompt = 40, steps = 30;
    const std::vector<float> ref = prefill_then_decode(*m_cpu.value(), *cpu, false, n, prompt, steps);
    const std::vector<float> eager = prefill_then_decode(*m_gpu.value(), *gpu, false, n, prompt, steps);
    const std::vector<float> graphs = prefill_then_decode(*m_gpu.value(), *gpu, true, n, prompt, steps);
    ASSERT_EQ(ref.size(), static_cast<size_t>((steps + 1) * n * 4096));
    ASSERT_EQ(eager.size(), ref.size());
    ASSERT_EQ(graphs.size(), ref.size());
    const std::string tag = fmt::format("head_dim {} x {} heads", c.head_dim, c.num_heads);
    const auto d16 = testing::deviation_of(eager, ref);
    testing::print_deviation("wide decode: cuda bf16 eager vs cpu, " + tag, d16);
    EXPECT_TRUE(d16.finite);
    EXPECT_LE(d16.relative, 0.15) << tag;
    const auto dg = testing::deviation_of(graphs, eager);
    testing::print_deviation("wide decode: cuda bf16 graphs vs eager, " + tag, dg);
    EXPECT_TRUE(dg.finite);
    EXPECT_LE(dg.relative, 3e-3) << tag;
    EXPECT_LE(testing::deviation_of(graphs, ref).relative, 0.15) << tag;
  }
}

// Greedy steps (argmax on the device, graphs keyed apart from logits steps) pick what the logits'
// argmax picks: two identical groups of three sequences decode their own greedy continuations, one
// group with logits steps, the other with greedy steps, both captured and replayed as graphs.
TEST(CudaRandomModel, GreedyStepsPickTheArgmaxOfTheLogits) {
  DI_REQUIRE_GPU(gpu);
  auto m = DeepseekV4::random(demo_config(), *gpu, 5);
  ASSERT_TRUE(m);
  RunnerOptions opt;
  opt.max_sequences = 6;
  opt.max_context = 128;
  auto runner = ModelRunner::create(*m.value(), *gpu, opt);
  ASSERT_TRUE(runner);
  ModelRunner& r = *runner.value();
  std::vector<int32_t> seq;
  for (int i = 0; i < 6; ++i) seq.push_back(r.open_sequence().value());
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p;
    for (int t = 0; t < 20 + 7 * i; ++t) p.push_back((t * 31 + i * 7 + 3) % 4000 + 5);
    prompts.push_back(p);
  }
  std::vector<int32_t> next(3);
  for (int step = 0; step < 30; ++step) {
    std::vector<ModelRunner::Feed> a, b;
    for (int i = 0; i < 3; ++i) {
      const int32_t* ids = step == 0 ? prompts[i].data() : &next[i];
      const int32_t n = step == 0 ? static_cast<int32_t>(prompts[i].size()) : 1;
      a.push_back({seq[i], ids, n, ForwardBatch::Logits::kLast});
      b.push_back({seq[3 + i], ids, n, ForwardBatch::Logits::kLast});
    }
    auto logits = r.step(a);
    ASSERT_TRUE(logits) << logits.error().message;
    std::vector<int32_t> want(3);
    const size_t vocab = logits.value().size() / 3;
    for (size_t i = 0; i < 3; ++i) {
      auto row = logits.value().begin() + static_cast<std::ptrdiff_t>(i * vocab);
      want[i] = static_cast<int32_t>(std::max_element(row, row + static_cast<std::ptrdiff_t>(vocab)) - row);
    }
    auto best = r.step_greedy(b);
    ASSERT_TRUE(best) << best.error().message;
    ASSERT_EQ(std::vector<int32_t>(best.value().begin(), best.value().end()), want) << "step " << step;
    next = want;
  }
}

// V4's attention shape (64 heads of 512 on one K=V head): bf16 mode runs the tensor-core attention
// kernel in every layer (sliding, CSA, HCA), for prefill and for decode with keys split over blocks.
TEST(CudaRandomModel, TensorCoreAttentionShapeMatchesCpu) {
  DI_REQUIRE_GPU(gpu);
  ModelConfig c = demo_config();
  c.head_dim = 512;
  c.num_heads = 64;
  expect_matches_cpu(c, gpu.get());
}

TEST(CudaRandomModel, ProfilesTheOpsOfAStep) {
  DI_REQUIRE_GPU(gpu);
  auto m = DeepseekV4::random(demo_config(), *gpu, 5);
  ASSERT_TRUE(m);
  RunnerOptions opt;
  opt.max_sequences = 2;
  opt.max_context = 64;
  auto runner = ModelRunner::create(*m.value(), *gpu, opt);
  ASSERT_TRUE(runner);
  auto seq = runner.value()->open_sequence();
  ASSERT_TRUE(seq);
  std::vector<int32_t> ids = {5, 6, 7, 8};
  gpu->set_op_profiling(true);
  ASSERT_TRUE(runner.value()->step({{seq.value(), ids.data(), 4, ForwardBatch::Logits::kLast}}));
  auto prof = gpu->take_op_profile();
  gpu->set_op_profiling(false);
  ASSERT_TRUE(prof) << prof.error().message;
  ASSERT_FALSE(prof.value().empty());
  bool saw_moe = false;
  for (const OpTime& t : prof.value()) {
    EXPECT_GE(t.ms, 0.0) << t.op;
    EXPECT_GT(t.calls, 0) << t.op;
    saw_moe |= t.op == "moe_experts" || t.op == "moe_ffn (GEMV)";  // (4 rows: the fused decode kernels)
    std::printf("[ op ] %-40s %3lld calls %.4f ms\n", t.op.c_str(), static_cast<long long>(t.calls), t.ms);
  }
  EXPECT_TRUE(saw_moe);
  for (size_t i = 1; i < prof.value().size(); ++i) EXPECT_GE(prof.value()[i - 1].ms, prof.value()[i].ms);
}

}  // namespace
}  // namespace deepinfer
