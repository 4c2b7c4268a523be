#include "sample/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace deepinfer {
namespace {

TEST(Logprobs, LogSoftmaxRankAndTopN) {
  // Probabilities 0.1, 0.4, 0.1, 0.4: ties rank by the lower id.
  const std::vector<float> logits = {std::log(1.0f), std::log(4.0f), std::log(1.0f),
                                     std::log(4.0f)};
  auto r = compute_logprobs(logits, 2, 3);
  ASSERT_TRUE(r);
  const Logprobs& lp = r.value();
  EXPECT_EQ(lp.token, 2);
  EXPECT_NEAR(lp.logprob, std::log(0.1), 1e-6);
  EXPECT_EQ(lp.rank, 4);  // after 1, 3 and the equal but lower id 0
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].token, 1);
  EXPECT_EQ(lp.top[1].token, 3);
  EXPECT_EQ(lp.top[2].token, 0);
  EXPECT_NEAR(lp.top[0].logprob, std::log(0.4), 1e-6);
  EXPECT_NEAR(lp.top[2].logprob, std::log(0.1), 1e-6);
}

TEST(Logprobs, RankOfTheBestTokenIsOne) {
  auto r = compute_logprobs(std::vector<float>{0.0f, 2.0f, 2.0f}, 1, 0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value().rank, 1);
  EXPECT_TRUE(r.value().top.empty());
}

TEST(Logprobs, MaskedTokensHaveMinusInfinity) {
  auto r = compute_logprobs(std::vector<float>{-INFINITY, 0.0f}, 0, 5);
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value().logprob, -INFINITY);
  EXPECT_EQ(r.value().rank, 2);
  ASSERT_EQ(r.value().top.size(), 2u);  // top_n is capped by the vocabulary
  EXPECT_EQ(r.value().top[0].logprob, 0.0f);
  EXPECT_EQ(r.value().top[1].logprob, -INFINITY);
}

TEST(Logprobs, StableForLargeLogits) {
  auto r = compute_logprobs(std::vector<float>{1000.0f, 1000.0f}, 0, 1);
  ASSERT_TRUE(r);
  EXPECT_NEAR(r.value().logprob, -std::log(2.0), 1e-6);
}

TEST(Logprobs, RejectsBadInput) {
  const std::vector<float> ok = {0.0f, 1.0f};
  EXPECT_FALSE(compute_logprobs(ok, 2, 1));
  EXPECT_FALSE(compute_logprobs(ok, -1, 1));
  EXPECT_FALSE(compute_logprobs(ok, 0, -1));
  auto nan = compute_logprobs(std::vector<float>{0.0f, NAN}, 0, 1);
  ASSERT_FALSE(nan);
  EXPECT_EQ(nan.error().code, Code::kInternal);
  EXPECT_FALSE(compute_logprobs(std::vector<float>{INFINITY, 0.0f}, 0, 1));
  EXPECT_FALSE(compute_logprobs(std::vector<float>{-INFINITY, -INFINITY}, 0, 1));
}

}  // namespace
}  // namespace deepinfer
