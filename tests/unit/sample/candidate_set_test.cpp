#include "sample/candidate_set.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace deepinfer {
namespace {

std::vector<int32_t> tokens_of(const CandidateSet& set) {
  std::vector<int32_t> out;
  for (const Candidate& c : set.candidates()) out.push_back(c.token);
  return out;
}

CandidateSet with_weights(const std::vector<float>& logits, float temperature = 1.0f) {
  CandidateSet set;
  set.collect(logits);
  set.apply_temperature(temperature);
  return set;
}

TEST(CandidateSet, CollectsFiniteLogitsInIdOrder) {
  CandidateSet set;
  set.collect(std::vector<float>{0.0f, -INFINITY, 2.0f, -INFINITY});
  EXPECT_EQ(tokens_of(set), (std::vector<int32_t>{0, 2}));
  set.collect(std::vector<float>{-INFINITY});
  EXPECT_TRUE(set.empty());
}

TEST(CandidateSet, TemperatureWeightsAreRelativeToTheBestToken) {
  const CandidateSet set = with_weights({1.0f, 3.0f, 2.0f}, 2.0f);
  EXPECT_DOUBLE_EQ(set.candidates()[0].weight, std::exp(-1.0));
  EXPECT_EQ(set.candidates()[1].weight, 1.0);
  EXPECT_DOUBLE_EQ(set.candidates()[2].weight, std::exp(-0.5));
}

TEST(CandidateSet, TinyTemperatureStaysFinite) {
  const CandidateSet set = with_weights({1.0f, 3.0f}, 1e-30f);
  EXPECT_EQ(set.candidates()[0].weight, 0.0);
  EXPECT_EQ(set.candidates()[1].weight, 1.0);
}

TEST(CandidateSet, TopKBreaksTiesByLowerId) {
  CandidateSet set;
  set.collect(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f, 3.0f});
  set.apply_top_k(2);
  EXPECT_EQ(tokens_of(set), (std::vector<int32_t>{1, 2}));
}

TEST(CandidateSet, TopKOffOrLargerThanTheSetKeepsAll) {
  for (int32_t k : {-1, 0, 3, 100}) {
    CandidateSet set;
    set.collect(std::vector<float>{1.0f, 2.0f, 3.0f});
    set.apply_top_k(k);
    EXPECT_EQ(set.size(), 3u) << k;
  }
}

TEST(CandidateSet, TopPKeepsTheShortestPrefixReachingTheMass) {
  // Probabilities 0.2, 0.5, 0.3 for tokens 0, 1, 2.
  const std::vector<float> logits = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  const auto top_p = [&](float p) {
    CandidateSet set = with_weights(logits);
    set.apply_top_p(p);
    return tokens_of(set);
  };
  EXPECT_EQ(top_p(0.01f), (std::vector<int32_t>{1}));
  EXPECT_EQ(top_p(0.45f), (std::vector<int32_t>{1}));
  EXPECT_EQ(top_p(0.7f), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(top_p(0.9f), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(top_p(1.0f), (std::vector<int32_t>{0, 1, 2}));
}

TEST(CandidateSet, TopPBeyondTheFirstWindowBreaksTiesByLowerId) {
  // 2000 equal tokens: half the mass is exactly the 1000 lowest ids.
  CandidateSet set = with_weights(std::vector<float>(2000, 0.25f));
  set.apply_top_p(0.5f);
  ASSERT_EQ(set.size(), 1000u);
  EXPECT_EQ(set.candidates().front().token, 0);
  EXPECT_EQ(set.candidates().back().token, 999);
}

TEST(CandidateSet, MinPKeepsTokensAboveTheScaledMaximum) {
  const std::vector<float> logits = {0.0f, std::log(0.5f), std::log(0.1f), std::log(0.35f)};
  CandidateSet set = with_weights(logits);
  set.apply_min_p(0.3f);
  EXPECT_EQ(tokens_of(set), (std::vector<int32_t>{0, 1, 3}));
  set.apply_min_p(0.0f);
  EXPECT_EQ(set.size(), 3u);
  set.apply_min_p(1.0f);
  EXPECT_EQ(tokens_of(set), (std::vector<int32_t>{0}));
}

TEST(CandidateSet, MinPSeesTheTemperature) {
  // Weights at temperature 0.5: exp(2 * log 0.5) = 0.25 < 0.3.
  CandidateSet set = with_weights({0.0f, std::log(0.5f)}, 0.5f);
  set.apply_min_p(0.3f);
  EXPECT_EQ(tokens_of(set), (std::vector<int32_t>{0}));
}

}  // namespace
}  // namespace deepinfer
