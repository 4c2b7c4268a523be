#include "sample/sampler.h"

#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace deepinfer {
namespace {

const std::vector<int32_t> kNoEos;

SequenceSamplingState fresh_state(int32_t vocab, std::vector<int32_t> prompt = {}) {
  return SequenceSamplingState::create(prompt, vocab).value();
}

int32_t sample(std::vector<float> logits, const SamplingParams& p,
               const SequenceSamplingState& state, const SampleKey& key = {},
               std::span<const int32_t> eos = {}, std::span<const uint32_t> mask = {}) {
  auto r = sample_row(logits, p, state, eos, mask, key);
  EXPECT_TRUE(r) << r.error().message;
  return r ? r.value().token : -1;
}

// Logits from a deterministic hash, so large-vocabulary rows need no stored data.
std::vector<float> hashed_logits(size_t vocab, uint32_t salt) {
  std::vector<float> logits(vocab);
  for (size_t i = 0; i < vocab; ++i) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ salt;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    logits[i] = static_cast<float>(x % 10000) / 1000.0f;  // [0, 10)
  }
  return logits;
}

TEST(SampleRow, GreedyPicksTheLowestIdAmongTiesWhateverTheSeed) {
  SamplingParams p;
  p.temperature = 0.0f;
  const auto state = fresh_state(5);
  for (uint64_t seed : {0ull, 1ull, 99ull}) {
    EXPECT_EQ(sample({1.0f, 4.0f, 2.0f, 4.0f, 4.0f}, p, state, {seed, 0, 0}), 1);
  }
}

TEST(SampleRow, GreedySeesEveryProcessorBeforeTemperature) {
  SamplingParams p;
  p.temperature = 0.0f;
  const std::vector<float> logits = {5.0f, 4.0f, 3.0f, 2.0f, 1.0f};
  const auto state = fresh_state(5);

  // Grammar bans 0; allowed ids leave {1, 2, 4}; bias lifts 4 above 1; min_tokens bans EOS 4.
  const std::vector<uint32_t> mask = {0b11110u};
  p.allowed_token_ids = {1, 2, 4};
  EXPECT_EQ(sample(logits, p, state, {}, kNoEos, mask), 1);
  p.logit_bias = {{4, 3.5f}};
  EXPECT_EQ(sample(logits, p, state, {}, kNoEos, mask), 4);
  p.min_tokens = 2;
  const std::vector<int32_t> eos = {4};
  EXPECT_EQ(sample(logits, p, state, {}, eos, mask), 1);
  // A repetition penalty on the output token 1 leaves 2 on top.
  auto repeated = fresh_state(5);
  ASSERT_TRUE(repeated.append_output(1));
  p.repetition_penalty = 2.0f;
  EXPECT_EQ(sample(logits, p, repeated, {}, eos, mask), 2);
}

TEST(SampleRow, SameKeySameTokenAndRowsDoNotInfluenceEachOther) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  const int32_t vocab = 1000;
  const auto state = fresh_state(vocab);
  const std::vector<float> row_a = hashed_logits(vocab, 1);
  const std::vector<float> row_b = hashed_logits(vocab, 2);

  // Request A alone, then A interleaved with B in reverse order and other seeds: same tokens.
  std::vector<int32_t> alone;
  for (uint32_t pos = 0; pos < 64; ++pos) alone.push_back(sample(row_a, p, state, {7, 0, pos}));
  std::vector<int32_t> batched(64);
  for (int pos = 63; pos >= 0; --pos) {
    sample(row_b, p, state, {123, 0, static_cast<uint32_t>(pos)});
    batched[pos] = sample(row_a, p, state, {7, 0, static_cast<uint32_t>(pos)});
    sample(row_b, p, state, {7, 1, static_cast<uint32_t>(pos)});
  }
  EXPECT_EQ(alone, batched);

  // Another completion index is another stream.
  std::vector<int32_t> second;
  for (uint32_t pos = 0; pos < 64; ++pos) second.push_back(sample(row_a, p, state, {7, 1, pos}));
  EXPECT_NE(alone, second);
}

TEST(SampleRow, ThreadsGiveTheSameTokensAsOneThread) {
  SamplingParams p;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.logprobs = 3;
  const int32_t vocab = 5000;
  const auto state = fresh_state(vocab);
  constexpr size_t kRows = 256;
  const auto row_of = [&](size_t r) { return hashed_logits(vocab, static_cast<uint32_t>(r % 7)); };
  const auto key_of = [](size_t r) {
    return SampleKey{r / 4, static_cast<uint32_t>(r % 4), static_cast<uint32_t>(r)};
  };
  std::vector<int32_t> sequential(kRows), parallel(kRows);
  for (size_t r = 0; r < kRows; ++r) sequential[r] = sample(row_of(r), p, state, key_of(r));
  auto pool = ThreadPool::create(4).value();
  pool->parallel_for(kRows, 1, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
      std::vector<float> row = row_of(r);
      auto result = sample_row(row, p, state, kNoEos, {}, key_of(r));
      parallel[r] = result ? result.value().token : -1;
    }
  });
  EXPECT_EQ(sequential, parallel);
}

TEST(SampleRow, FullVocabularyWithTruncationsStaysInsideTheSurvivors) {
  const int32_t vocab = 129280;
  const auto state = fresh_state(vocab);
  const std::vector<float> base = hashed_logits(vocab, 3);
  SamplingParams p;
  p.top_k = 50;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.temperature = 0.8f;
  p.logprobs = 5;
  p.logprobs_mode = LogprobsMode::kProcessed;
  std::vector<float> logits = base;
  auto r = sample_row(logits, p, state, kNoEos, {}, {11, 0, 0});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_GT(logits[r.value().token], -INFINITY);
  size_t survivors = 0;
  for (float l : logits) survivors += l > -INFINITY;
  EXPECT_GE(survivors, 1u);
  EXPECT_LE(survivors, 50u);
  EXPECT_LE(r.value().logprobs->rank, static_cast<int32_t>(survivors));

  // Without truncation, one draw per token still reproduces exactly.
  SamplingParams plain;
  std::vector<float> once = base, twice = base;
  EXPECT_EQ(sample_row(once, plain, state, kNoEos, {}, {5, 2, 9}).value().token,
            sample_row(twice, plain, state, kNoEos, {}, {5, 2, 9}).value().token);
}

TEST(SampleRow, LeavesTheProcessedDistributionInTheRow) {
  SamplingParams p;
  p.temperature = 2.0f;
  p.top_k = 2;
  std::vector<float> logits = {1.0f, 5.0f, 3.0f, -2.0f};
  ASSERT_TRUE(sample_row(logits, p, fresh_state(4), kNoEos, {}, {}));
  EXPECT_EQ(logits, (std::vector<float>{-INFINITY, 0.0f, -1.0f, -INFINITY}));
}

TEST(SampleRow, RawLogprobsIgnoreProcessing) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{0, 10.0f}};
  p.logprobs = 2;
  const std::vector<float> raw = {0.0f, std::log(3.0f)};
  std::vector<float> logits = raw;
  auto r = sample_row(logits, p, fresh_state(2), kNoEos, {}, {});
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value().token, 0);
  const Logprobs& lp = *r.value().logprobs;
  EXPECT_EQ(lp.token, 0);
  EXPECT_NEAR(lp.logprob, std::log(0.25), 1e-6);
  EXPECT_EQ(lp.rank, 2);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].token, 1);
}

TEST(SampleRow, ProcessedLogprobsAreTheSamplingDistribution) {
  SamplingParams p;
  p.temperature = 0.5f;
  p.top_k = 2;
  p.logprobs = 3;
  p.logprobs_mode = LogprobsMode::kProcessed;
  // Survivors 1 and 2 with weights exp(0) and exp(-2 * ln 3) = 1/9: p = 0.9, 0.1.
  std::vector<float> logits = {-5.0f, std::log(3.0f), 0.0f};
  auto r = sample_row(logits, p, fresh_state(3), kNoEos, {}, {1, 0, 0});
  ASSERT_TRUE(r);
  const Logprobs& lp = *r.value().logprobs;
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].token, 1);
  EXPECT_NEAR(lp.top[0].logprob, std::log(0.9), 1e-6);
  EXPECT_NEAR(lp.top[1].logprob, std::log(0.1), 1e-6);
  EXPECT_EQ(lp.top[2].logprob, -INFINITY);
}

TEST(SampleRow, NoLogprobsUnlessAsked) {
  std::vector<float> logits = {0.0f, 1.0f};
  auto r = sample_row(logits, SamplingParams{}, fresh_state(2), kNoEos, {}, {});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r.value().logprobs);
}

TEST(SampleRow, ReportsRowsWhereNothingCanBeGenerated) {
  SamplingParams p;
  p.allowed_token_ids = {1};
  p.min_tokens = 1;
  const std::vector<int32_t> eos = {1};
  for (float temperature : {0.0f, 1.0f}) {
    p.temperature = temperature;
    std::vector<float> logits = {0.0f, 1.0f};
    auto r = sample_row(logits, p, fresh_state(2), eos, {}, {});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kInvalidArgument);
    EXPECT_NE(r.error().message.find("output position 0"), std::string::npos);
  }
}

TEST(SampleRow, RejectsMalformedInput) {
  const auto state = fresh_state(3);
  std::vector<float> two(2, 0.0f);
  EXPECT_FALSE(sample_row(two, SamplingParams{}, state, kNoEos, {}, {}));

  // A logit that is not finite is the model's fault (broken weights or config), never the caller's:
  // it was Code::kInternal, and a row of -inf blamed the request's masks.
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    for (const float temperature : {0.0f, 1.0f}) {
      std::vector<float> bad_row = {0.0f, bad, 1.0f};
      SamplingParams p;
      p.temperature = temperature;
      auto r = sample_row(bad_row, p, state, kNoEos, {}, {});
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error().code, Code::kModelFormat) << r.error().message;
      EXPECT_NE(r.error().message.find("token 1"), std::string::npos) << r.error().message;
    }
  }
  std::vector<float> all_inf(3, -INFINITY);
  EXPECT_EQ(sample_row(all_inf, SamplingParams{}, state, kNoEos, {}, {}).error().code, Code::kModelFormat);

  std::vector<float> row(3, 0.0f);
  const std::vector<int32_t> bad_eos = {3};
  EXPECT_FALSE(sample_row(row, SamplingParams{}, state, bad_eos, {}, {}));
  const std::vector<uint32_t> wide_mask = {~0u, ~0u};
  EXPECT_FALSE(sample_row(row, SamplingParams{}, state, kNoEos, wide_mask, {}));
}

TEST(PicksArgmax, OnlyPlainGreedyRowsAndTheSameToken) {
  auto state = SequenceSamplingState::create(std::vector<int32_t>{1, 2}, 64).value();
  const std::vector<int32_t> eos = {3};
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  EXPECT_TRUE(picks_argmax(greedy, state, eos, false));
  std::mt19937 gen(8);
  std::normal_distribution<float> normal;
  for (int t = 0; t < 50; ++t) {
    std::vector<float> row(64);
    for (float& x : row) x = std::round(normal(gen) * 2.0f);  // ties
    const int32_t argmax = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    auto r = sample_row(row, greedy, state, eos, {}, {1, 0, 0});
    ASSERT_TRUE(r);
    EXPECT_EQ(r.value().token, argmax);
    EXPECT_EQ(argmax_result(argmax, state).value().token, argmax);
  }
  auto changed = [&](auto edit) {
    SamplingParams p = greedy;
    edit(p);
    return !picks_argmax(p, state, eos, false);
  };
  EXPECT_TRUE(changed([](SamplingParams& p) { p.temperature = 0.5f; }));
  EXPECT_TRUE(changed([](SamplingParams& p) { p.logprobs = 0; }));
  EXPECT_TRUE(changed([](SamplingParams& p) { p.allowed_token_ids = {4}; }));
  EXPECT_TRUE(changed([](SamplingParams& p) { p.logit_bias[4] = 1.0f; }));
  EXPECT_TRUE(changed([](SamplingParams& p) { p.repetition_penalty = 1.1f; }));
  EXPECT_TRUE(changed([](SamplingParams& p) { p.presence_penalty = 0.1f; }));
  EXPECT_TRUE(changed([](SamplingParams& p) { p.frequency_penalty = 0.1f; }));
  EXPECT_TRUE(changed([](SamplingParams& p) { p.min_tokens = 2; }));  // masks EOS for now
  EXPECT_FALSE(changed([](SamplingParams& p) {
    p.min_tokens = 2;
    p.ignore_eos = true;  // and no stop ids: nothing to mask
  }));
  EXPECT_FALSE(picks_argmax(greedy, state, eos, true));  // a grammar mask
  EXPECT_EQ(argmax_result(-1, state).error().code, Code::kModelFormat);  // nothing masked the row
  EXPECT_EQ(argmax_result(-2, state).error().code, Code::kModelFormat);
  EXPECT_EQ(argmax_result(64, state).error().code, Code::kInternal);
}

}  // namespace
}  // namespace deepinfer
