// Anything thrown inside an engine step (here: allocations failing) fails the generations of that
// step with a clear error and never the process; the engine goes on serving. This program replaces
// operator new so that large allocations fail on request.
#include "engine_test_util.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<size_t> g_fail_from{0};  // allocations of at least this many bytes fail; 0: none
}

void* operator new(size_t n) {
  const size_t limit = g_fail_from.load(std::memory_order_relaxed);
  if (limit && n >= limit) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// GCC cannot see that these pair with the operator new above (it is malloc-based too).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace deepinfer::testing {
namespace {

TEST(StepFailure, AnExceptionFailsTheStepsGenerationsAndTheEngineServesOn) {
  EngineConfig c = demo_config();
  c.max_batched_tokens = 1024;
  auto engine = open_engine(c);
  ASSERT_TRUE(engine);
  std::mt19937 rng(5);
  SamplingParams p;
  p.max_tokens = 4;
  p.seed = 3;
  const auto small = random_prompt(rng, 8, *engine);
  const Outcome before = generate_alone(*engine, small, p);

  // Prompt logprobs of 1,000 tokens: every row's logits (16 MB) and their scratch.
  SamplingParams big = p;
  big.prompt_logprobs = 1;
  const auto long_prompt = random_prompt(rng, 1000, *engine);
  g_fail_from = size_t(4) << 20;
  const Outcome failed = generate_alone(*engine, long_prompt, big);
  g_fail_from = 0;
  ASSERT_EQ(failed.finished.count(0), 1u);
  const Event& f = failed.finished.at(0);
  EXPECT_EQ(f.reason, FinishReason::kError);
  ASSERT_TRUE(f.error.has_value());
  EXPECT_EQ(f.error->code, Code::kOutOfMemory) << f.error->message;

  // The engine serves on, with the same results as before.
  const Outcome after = generate_alone(*engine, small, p);
  EXPECT_EQ(after.tokens, before.tokens);
  const Outcome again = generate_alone(*engine, long_prompt, big);
  EXPECT_EQ(again.finished.at(0).reason, FinishReason::kLength);
}

}  // namespace
}  // namespace deepinfer::testing
