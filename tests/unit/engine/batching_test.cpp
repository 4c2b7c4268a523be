// Continuous batching: outputs of requests run together (at once, staggered, in chunked prefill,
// under forced preemption) equal each request run alone; state memory is accounted exactly; idle
// sessions are evicted and recomputed transparently; requests too long fail at submission.
#include "engine_test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace deepinfer {
namespace {

using testing::collect;
using testing::demo_config;
using testing::Outcome;

struct Case {
  std::vector<int32_t> prompt;
  SamplingParams params;
};

std::vector<Case> make_cases(const Engine& e, bool greedy, int n, int min_len, int max_len, int max_tokens) {
  std::mt19937 rng(1234);
  std::vector<Case> cases;
  for (int i = 0; i < n; ++i) {
    Case c;
    c.prompt = testing::random_prompt(rng, min_len + (max_len - min_len) * i / std::max(1, n - 1), e);
    c.params.temperature = greedy ? 0.0f : 1.0f;
    c.params.seed = 100 + i;
    c.params.max_tokens = max_tokens;
    c.params.ignore_eos = true;
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<Outcome> run_alone(const EngineConfig& cfg, const std::vector<Case>& cases) {
  auto e = testing::open_engine(cfg);
  std::vector<Outcome> out;
  for (const auto& c : cases) out.push_back(testing::generate_alone(*e, c.prompt, c.params));
  return out;
}

// Submits every case (each after `stagger` steps of the previous) and collects them all.
std::vector<Outcome> run_together(Engine& e, const std::vector<Case>& cases, int stagger_ms) {
  std::vector<std::shared_ptr<Session>> sessions;
  for (const auto& c : cases) {
    auto s = e.create_session();
    EXPECT_TRUE(s);
    EXPECT_TRUE(s.value()->add_tokens(c.prompt));
    auto r = s.value()->generate(c.params);
    EXPECT_TRUE(r) << r.error().message;
    sessions.push_back(s.value());
    if (stagger_ms) std::this_thread::sleep_for(std::chrono::milliseconds(stagger_ms));
  }
  std::vector<Outcome> out;
  for (auto& s : sessions) out.push_back(collect(*s));
  return out;
}

void expect_same(const std::vector<Outcome>& alone, const std::vector<Outcome>& together) {
  ASSERT_EQ(alone.size(), together.size());
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_EQ(alone[i].tokens.at(0), together[i].tokens.at(0)) << "request " << i;
    EXPECT_EQ(together[i].finished.at(0).reason, FinishReason::kLength) << "request " << i;
  }
}

class BatchedEqualsAlone : public ::testing::TestWithParam<bool> {};  // greedy or seeded sampling

TEST_P(BatchedEqualsAlone, AllAtOnce) {
  auto cfg = demo_config();
  auto e = testing::open_engine(cfg);
  auto cases = make_cases(*e, GetParam(), 8, 3, 120, 16);
  expect_same(run_alone(cfg, cases), run_together(*e, cases, 0));
}

TEST_P(BatchedEqualsAlone, StaggeredWithChunkedPrefill) {
  auto cfg = demo_config();
  cfg.max_batched_tokens = 16;  // long prompts are prefilled in chunks while others decode
  auto e = testing::open_engine(cfg);
  auto cases = make_cases(*e, GetParam(), 6, 5, 150, 16);
  expect_same(run_alone(demo_config(), cases), run_together(*e, cases, 15));
}

TEST_P(BatchedEqualsAlone, UnderForcedPreemption) {
  // Prompts just under one block: every decode crosses into a second block, and the pool holds 5
  // blocks for 4 requests that then need 8, so running requests are preempted and recomputed.
  auto cfg = demo_config();
  const uint64_t block_bytes = testing::open_engine(cfg)->stats().block_bytes;
  cfg.state_memory = 5 * block_bytes;
  cfg.max_sequences = 4;
  auto e = testing::open_engine(cfg);
  ASSERT_EQ(e->stats().total_blocks, 5);
  const int32_t bt = e->stats().block_tokens;
  auto cases = make_cases(*e, GetParam(), 4, bt - 12, bt - 4, 24);
  expect_same(run_alone(demo_config(), cases), run_together(*e, cases, 0));
  EXPECT_GT(e->stats().preemptions, 0u);
}

TEST(GreedyDecoding, TheBackendsArgmaxEqualsTheHostSampler) {
  // Plain greedy steps take each row's best token from the backend (ModelRunner::step_greedy); asking
  // for logprobs moves the logits to the host and samples there. Both must give the same tokens,
  // alone and mixed in one batch (which then goes to the host).
  auto cfg = demo_config();
  auto e = testing::open_engine(cfg);
  auto cases = make_cases(*e, true, 6, 3, 80, 12);
  std::vector<Case> host = cases, mixed = cases;
  for (auto& c : host) c.params.logprobs = 0;
  for (size_t i = 0; i < mixed.size(); i += 2) mixed[i].params.logprobs = 0;
  const auto device = run_alone(cfg, cases);
  expect_same(device, run_alone(cfg, host));
  expect_same(device, run_together(*e, mixed, 0));
  expect_same(device, run_together(*e, cases, 0));
}

INSTANTIATE_TEST_SUITE_P(Sampling, BatchedEqualsAlone, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? std::string("Greedy") : std::string("Seeded"); });

}  // namespace
}  // namespace deepinfer
