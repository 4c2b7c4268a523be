#include "sample/candidate_set.h"

#include "sample/row_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace deepinfer {
namespace {

std::vector<int32_t> tokens_of(CandidateSet& set) {
  std::vector<int32_t> out;
  for (const Candidate& c : set.candidates()) out.push_back(c.token);
  return out;
}

// The set reads the row in place: `logits` must outlive it.
CandidateSet with_weights(const std::vector<float>& logits, float temperature = 1.0f) {
  CandidateSet set;
  set.collect(logits);
  set.apply_temperature(temperature);
  return set;
}
CandidateSet with_weights(std::vector<float>&&, float = 1.0f) = delete;

TEST(CandidateSet, CollectsFiniteLogitsInIdOrder) {
  CandidateSet set;
  const std::vector<float> row = {0.0f, -INFINITY, 2.0f, -INFINITY}, masked = {-INFINITY};
  set.collect(row);
  EXPECT_EQ(tokens_of(set), (std::vector<int32_t>{0, 2}));
  set.collect(masked);
  EXPECT_TRUE(set.empty());
}

TEST(CandidateSet, TemperatureWeightsAreRelativeToTheBestToken) {
  const std::vector<float> row = {1.0f, 3.0f, 2.0f}, longer = {1.0f, 3.0f, 2.0f, -5.0f};
  CandidateSet set = with_weights(row, 2.0f);  // row form: float weights
  EXPECT_NEAR(set.candidates()[0].weight, std::exp(-1.0), 1e-7);
  EXPECT_EQ(set.candidates()[1].weight, 1.0);
  EXPECT_NEAR(set.candidates()[2].weight, std::exp(-0.5), 1e-7);
  CandidateSet listed;  // listed by top_k first: double weights
  listed.collect(longer);
  listed.apply_top_k(3);
  listed.apply_temperature(2.0f);
  EXPECT_DOUBLE_EQ(listed.candidates()[0].weight, std::exp(-1.0));
  EXPECT_EQ(listed.candidates()[1].weight, 1.0);
  EXPECT_DOUBLE_EQ(listed.candidates()[2].weight, std::exp(-0.5));
}

TEST(CandidateSet, TinyTemperatureStaysFinite) {
  const std::vector<float> row = {1.0f, 3.0f};
  CandidateSet set = with_weights(row, 1e-30f);
  EXPECT_EQ(set.candidates()[0].weight, 0.0);
  EXPECT_EQ(set.candidates()[1].weight, 1.0);
}

TEST(CandidateSet, TopKBreaksTiesByLowerId) {
  CandidateSet set;
  const std::vector<float> row = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f};
  set.collect(row);
  set.apply_top_k(2);
  EXPECT_EQ(tokens_of(set), (std::vector<int32_t>{1, 2}));
}

TEST(CandidateSet, TopKOffOrLargerThanTheSetKeepsAll) {
  for (int32_t k : {-1, 0, 3, 100}) {
    CandidateSet set;
    const std::vector<float> row = {1.0f, 2.0f, 3.0f};
    set.collect(row);
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
  const std::vector<float> row(2000, 0.25f);
  CandidateSet set = with_weights(row);
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
  const std::vector<float> row = {0.0f, std::log(0.5f)};
  CandidateSet set = with_weights(row, 0.5f);
  set.apply_min_p(0.3f);
  EXPECT_EQ(tokens_of(set), (std::vector<int32_t>{0}));
}

// Brute force over a whole row, with the same float weights the row form uses.
struct Reference {
  std::vector<float> weights;
  std::vector<int32_t> rank_order;  // finite tokens, best first, ties by lower id
  double total = 0.0;
};

Reference reference(const std::vector<float>& row, float temperature) {
  Reference r;
  const float max = *std::max_element(row.begin(), row.end());
  for (size_t i = 0; i < row.size(); ++i) {
    r.weights.push_back(exp_nonpositive((row[i] - max) * (1.0f / temperature)));
    r.total += r.weights.back();
    if (std::isfinite(row[i])) r.rank_order.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(r.rank_order.begin(), r.rank_order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  return r;
}

// The shortest rank prefix reaching top_p of the mass, in id order.
std::vector<int32_t> top_p_prefix(const Reference& ref, float top_p) {
  size_t kept = 0;
  double mass = 0.0;
  while (mass < top_p * ref.total) mass += ref.weights[ref.rank_order[kept++]];
  std::vector<int32_t> prefix(ref.rank_order.begin(), ref.rank_order.begin() + static_cast<std::ptrdiff_t>(kept));
  std::sort(prefix.begin(), prefix.end());
  return prefix;
}

std::vector<float> language_model_row(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> row(n);
  for (float& x : row) x = normal(gen);
  for (int i = 0; i < 6; ++i) row[gen() % n] = 12.0f - i;
  for (int i = 0; i < 50; ++i) row[gen() % n] = -INFINITY;
  return row;
}

TEST(CandidateSet, RowWideTopPIsTheRankPrefixReachingTheMass) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<float> row = language_model_row(40000, seed);
    const Reference ref = reference(row, 0.9f);
    for (float p : {0.3f, 0.8f, 0.95f, 0.999f}) {
      CandidateSet set = with_weights(row, 0.9f);
      set.apply_top_p(p);
      EXPECT_EQ(tokens_of(set), top_p_prefix(ref, p)) << "seed " << seed << " top_p " << p;
    }
  }
}

TEST(CandidateSet, RowWideTopPOfAFlatRow) {
  // A random model's row: the prefix holds most of the vocabulary (found by the radix select).
  std::mt19937 gen(21);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> row(100000);
  for (float& x : row) x = normal(gen);
  row[77] = -0.0f;
  row[78] = 0.0f;
  const Reference ref = reference(row, 1.0f);
  for (float p : {0.2f, 0.6f, 0.95f}) {
    CandidateSet set = with_weights(row);
    set.apply_top_p(p);
    EXPECT_EQ(tokens_of(set), top_p_prefix(ref, p)) << "top_p " << p;
  }
}

TEST(CandidateSet, RowWideTopPBelowTheFirstThresholds) {
  // One token of weight 1 and 100000 of weight e^-6 (below 2^-7): half the mass lies in the bulk.
  std::vector<float> row(100001, -6.0f);
  row[500] = 0.0f;
  const Reference ref = reference(row, 1.0f);
  CandidateSet set = with_weights(row);
  set.apply_top_p(0.5f);
  const size_t kept = top_p_prefix(ref, 0.5f).size();
  ASSERT_EQ(set.size(), kept);
  EXPECT_EQ(set.candidates()[0].token, 0);  // ties by lower id: the bulk from token 0 on
  EXPECT_EQ(set.candidates()[kept - 1].token, static_cast<int32_t>(kept - 1));
}

TEST(CandidateSet, RowWideMinPAndTopKMatchBruteForce) {
  const std::vector<float> row = language_model_row(30000, 9);
  const Reference ref = reference(row, 1.3f);
  CandidateSet set = with_weights(row, 1.3f);
  set.apply_min_p(0.01f);
  std::vector<int32_t> want;
  for (size_t i = 0; i < row.size(); ++i)
    if (std::isfinite(row[i]) && ref.weights[i] >= 0.01f) want.push_back(static_cast<int32_t>(i));
  EXPECT_EQ(tokens_of(set), want);
  CandidateSet top;
  top.collect(row);
  top.apply_top_k(40);
  std::vector<int32_t> best(ref.rank_order.begin(), ref.rank_order.begin() + 40);
  std::sort(best.begin(), best.end());
  EXPECT_EQ(tokens_of(top), best);
}

TEST(CandidateSet, RowWideDrawInvertsTheCdfInIdOrder) {
  const std::vector<float> row = language_model_row(20000, 4);
  const Reference ref = reference(row, 1.0f);
  CandidateSet set = with_weights(row);
  std::mt19937_64 gen(5);
  for (int t = 0; t < 200; ++t) {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(gen);
    double cumulative = 0.0;
    int32_t want = -1;
    for (size_t i = 0; i < row.size() && want < 0; ++i)
      if (ref.weights[i] > 0.0f && (cumulative += ref.weights[i]) > u * ref.total) want = static_cast<int32_t>(i);
    EXPECT_EQ(set.draw(u), want) << u;
  }
  EXPECT_EQ(set.draw(0.0), ref.weights[0] > 0.0f ? 0 : 1);
  const int32_t last = set.draw(std::nextafter(1.0, 0.0));
  EXPECT_GT(ref.weights[last], 0.0f);
}

}  // namespace
}  // namespace deepinfer
