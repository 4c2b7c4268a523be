// Request lifecycle: state returns to the pool after thousands of requests; idle sessions are
// evicted and recomputed with the same output; cancellation frees state; too-long requests fail at
// submission; many threads submitting and cancelling at random never lose a request.
#include "engine_test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace deepinfer {
namespace {

using testing::collect;
using testing::demo_config;

bool pool_empty(const EngineStats& s) {
  return s.free_blocks == s.total_blocks && s.free_slots == s.total_slots && s.running_generations == 0 && s.resident_sessions == 0;
}

TEST(EngineLifecycle, ThousandsOfRequestsReturnThePoolToEmpty) {
  auto cfg = demo_config();
  cfg.max_sequences = 16;
  auto e = testing::open_engine(cfg);
  std::atomic<int> finished{0};
  constexpr int kThreads = 4, kPerThread = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      auto s = e->create_session();
      ASSERT_TRUE(s);
      for (int i = 0; i < kPerThread; ++i) {
        if (i % 7 == 0) {
          ASSERT_TRUE(s.value()->reset());  // a fresh context now and then
        }
        ASSERT_TRUE(s.value()->add_tokens(testing::random_prompt(rng, 1 + static_cast<int>(rng() % 6), *e)));
        SamplingParams p;
        p.max_tokens = 1 + static_cast<int>(rng() % 3);
        p.n = 1 + static_cast<int>(rng() % 2);
        auto r = s.value()->generate(p);
        ASSERT_TRUE(r) << r.error().message;
        if (i % 11 == 0) s.value()->cancel();
        auto o = collect(*s.value());
        ASSERT_EQ(o.finished.size(), static_cast<size_t>(p.n));
        finished += 1;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(finished.load(), kThreads * kPerThread);
  // The sessions were freed when their threads ended: all state is back in the pool.
  EXPECT_TRUE(testing::wait_for_stats(*e, pool_empty)) << "free blocks " << e->stats().free_blocks << "/" << e->stats().total_blocks;
}

TEST(EngineLifecycle, EvictedIdleSessionRecomputesTheSameOutput) {
  std::mt19937 rng(5);
  auto probe = testing::open_engine(demo_config());
  const auto first = testing::random_prompt(rng, 150, *probe);
  const auto second = testing::random_prompt(rng, 40, *probe);
  const uint64_t block_bytes = probe->stats().block_bytes;
  probe.reset();
  SamplingParams p;
  p.seed = 99;
  p.max_tokens = 12;
  p.ignore_eos = true;

  auto two_turns = [&](Engine& e, bool crowd) {
    auto s = e.create_session().value();
    EXPECT_TRUE(s->add_tokens(first));
    EXPECT_TRUE(s->generate(p));
    collect(*s);
    if (crowd) {  // another session needs both blocks: the idle session's state is evicted
      for (int i = 0; i < 2; ++i) {
        auto other = e.create_session().value();
        EXPECT_TRUE(other->add_tokens(testing::random_prompt(rng, e.stats().block_tokens + 40, e)));
        EXPECT_TRUE(other->generate(p));
        collect(*other);
      }
    }
    EXPECT_TRUE(s->add_tokens(second));
    EXPECT_TRUE(s->generate(p));
    return collect(*s);
  };
  auto roomy = testing::open_engine(demo_config());
  auto kept = two_turns(*roomy, false);
  EXPECT_GT(kept.finished.at(0).cached_tokens, 0u);

  auto cfg = demo_config();
  cfg.state_memory = 2 * block_bytes;
  auto tight = testing::open_engine(cfg);
  auto evicted = two_turns(*tight, true);
  EXPECT_GT(tight->stats().evictions, 0u);
  EXPECT_EQ(evicted.finished.at(0).cached_tokens, 0u);  // recomputed...
  EXPECT_EQ(evicted.tokens.at(0), kept.tokens.at(0));   // ...with the same result
}

TEST(EngineLifecycle, RequestsTooLongFailAtSubmission) {
  auto cfg = demo_config();
  cfg.max_context = 64;
  auto e = testing::open_engine(cfg);
  std::mt19937 rng(1);
  auto s = e->create_session().value();
  ASSERT_TRUE(s->add_tokens(testing::random_prompt(rng, 64, *e)));
  auto r = s->generate(SamplingParams{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kCapacity);
  EXPECT_NE(r.error().message.find("limit of 64 tokens"), std::string::npos) << r.error().message;

  auto small = demo_config();
  small.state_memory = 1;  // one block
  auto e2 = testing::open_engine(small);
  auto s2 = e2->create_session().value();
  ASSERT_TRUE(s2->add_tokens(testing::random_prompt(rng, e2->stats().block_tokens + 1, *e2)));
  r = s2->generate(SamplingParams{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kCapacity);
  EXPECT_NE(r.error().message.find("does not fit the state memory"), std::string::npos) << r.error().message;
  // The engine keeps serving.
  auto s3 = e2->create_session().value();
  ASSERT_TRUE(s3->add_tokens(testing::random_prompt(rng, 10, *e2)));
  ASSERT_TRUE(s3->generate(SamplingParams{}));
  EXPECT_EQ(collect(*s3).finished.size(), 1u);
}

TEST(EngineLifecycle, GenerationsRunIntoTheContextLimitFinishWithLength) {
  auto cfg = demo_config();
  cfg.max_context = 40;
  auto e = testing::open_engine(cfg);
  std::mt19937 rng(2);
  auto s = e->create_session().value();
  ASSERT_TRUE(s->add_tokens(testing::random_prompt(rng, 30, *e)));
  SamplingParams p;
  p.max_tokens = 100;
  p.ignore_eos = true;
  ASSERT_TRUE(s->generate(p));
  auto o = collect(*s);
  EXPECT_EQ(o.finished.at(0).reason, FinishReason::kLength);
  EXPECT_EQ(o.tokens.at(0).size(), 10u);
}

TEST(EngineLifecycle, CancellationEndsEveryCompletionAndFreesItsState) {
  auto e = testing::open_engine(demo_config());
  std::mt19937 rng(3);
  auto s = e->create_session().value();
  ASSERT_TRUE(s->add_tokens(testing::random_prompt(rng, 100, *e)));
  SamplingParams p;
  p.max_tokens = 100000;
  p.ignore_eos = true;
  p.n = 3;
  ASSERT_TRUE(s->generate(p));
  // Let it produce a few tokens, then cancel.
  for (int got = 0; got < 6;) {
    auto ev = s->poll(10000);
    ASSERT_TRUE(ev && ev.value());
    got += static_cast<int>(ev.value()->tokens.size());
  }
  s->cancel();
  auto o = collect(*s);
  ASSERT_EQ(o.finished.size(), 3u);
  for (const auto& [i, ev] : o.finished) EXPECT_EQ(ev.reason, FinishReason::kCancelled);
  EXPECT_TRUE(testing::wait_for_stats(*e, pool_empty)) << "a cancelled generation keeps no state";
}

TEST(EngineLifecycle, ThreadsSubmittingAndCancellingAtRandom) {
  auto cfg = demo_config();
  cfg.max_sequences = 8;
  cfg.state_memory = 6 * testing::open_engine(demo_config())->stats().block_bytes;
  cfg.max_batched_tokens = 64;
  auto e = testing::open_engine(cfg);
  std::atomic<bool> stop{false};
  std::atomic<int> generations{0}, cancelled{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      do {  // at least one generation per thread, then as many as the time allows
        auto s = e->create_session().value();
        ASSERT_TRUE(s->add_tokens(testing::random_prompt(rng, 1 + static_cast<int>(rng() % 300), *e)));
        SamplingParams p;
        p.max_tokens = 1 + static_cast<int>(rng() % 40);
        p.n = 1 + static_cast<int>(rng() % 3);
        p.temperature = (rng() % 2) ? 0.0f : 0.9f;
        auto r = s->generate(p);
        ASSERT_TRUE(r) << r.error().message;
        std::thread canceller;
        if (rng() % 3 == 0) {
          const int delay = static_cast<int>(rng() % 20);
          canceller = std::thread([s, delay] {
            std::this_thread::sleep_for(std::chrono::milliseconds(delay));
            s->cancel();
          });
          ++cancelled;
        }
        auto o = collect(*s);
        if (canceller.joinable()) canceller.join();
        ASSERT_EQ(o.finished.size(), static_cast<size_t>(p.n)) << "every completion ends with a finish reason";
        for (const auto& [i, ev] : o.finished) EXPECT_NE(ev.reason, FinishReason::kError) << (ev.error ? ev.error->message : "");
        ++generations;
        if (rng() % 4 == 0) s->close();  // freed at once rather than idle
      } while (!stop);
    });
  std::this_thread::sleep_for(std::chrono::seconds(3));
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_GE(generations.load(), 6);
  EXPECT_TRUE(testing::wait_for_stats(*e, pool_empty)) << "free blocks " << e->stats().free_blocks << "/" << e->stats().total_blocks;
}

}  // namespace
}  // namespace deepinfer
