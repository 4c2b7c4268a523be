// Goodness of fit: tokens drawn by sample_row over many output positions must follow the processed
// distribution. The seed is fixed, so each test is deterministic; the critical values sit at
// p = 1e-6, so a correct sampler would fail only for a one-in-a-million seed.
#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace deepinfer {
namespace {

constexpr int kDraws = 50000;
constexpr uint64_t kSeed = 0x5EED'0000'0001ull;

// Chi-square quantiles at upper tail probability 1e-6, by degrees of freedom (index 0 unused).
constexpr double kCritical[] = {0,      23.928, 27.631, 30.665, 33.377, 35.888, 38.258,
                                40.522, 42.701, 44.811, 46.863, 48.866, 50.825};

const std::vector<float> kLogits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, 1.5f, 2.5f};

// Straightforward reference of steps 7-10: full sort, no partial selection.
std::vector<double> expected_distribution(const std::vector<float>& logits,
                                          const SamplingParams& p) {
  const size_t n = logits.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  std::vector<double> prob(n, 0.0);
  const size_t k = p.top_k > 0 ? std::min<size_t>(p.top_k, n) : n;
  for (size_t r = 0; r < k; ++r) {
    prob[order[r]] = std::exp(logits[order[r]] / static_cast<double>(p.temperature));
  }
  double total = std::accumulate(prob.begin(), prob.end(), 0.0);
  double mass = 0.0;
  for (size_t r = 0; r < k; ++r) {
    if (mass >= p.top_p * total) prob[order[r]] = 0.0;
    mass += std::exp(logits[order[r]] / static_cast<double>(p.temperature));
  }
  const double best = *std::max_element(prob.begin(), prob.end());
  for (double& q : prob) {
    if (q < p.min_p * best) q = 0.0;
  }
  total = std::accumulate(prob.begin(), prob.end(), 0.0);
  for (double& q : prob) q /= total;
  return prob;
}

std::vector<int> draw_counts(const std::vector<float>& logits, const SamplingParams& p,
                             const SequenceSamplingState& state) {
  std::vector<int> counts(logits.size(), 0);
  for (uint32_t pos = 0; pos < kDraws; ++pos) {
    std::vector<float> row = logits;
    auto r = sample_row(row, p, state, {}, {}, {kSeed, 0, pos});
    EXPECT_TRUE(r);
    ++counts[r.value().token];
  }
  return counts;
}

// Pearson's statistic over the support; tokens outside it must never be drawn.
double chi_square(const std::vector<int>& counts, const std::vector<double>& expected,
                  int* degrees_of_freedom) {
  double statistic = 0.0;
  int support = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " is outside the processed distribution";
      continue;
    }
    const double e = expected[i] * kDraws;
    EXPECT_GE(e, 5.0) << "token " << i << ": too few expected draws for the test";
    statistic += (counts[i] - e) * (counts[i] - e) / e;
    ++support;
  }
  *degrees_of_freedom = support - 1;
  return statistic;
}

void expect_fit(const SamplingParams& p) {
  const auto state = SequenceSamplingState::create({}, kLogits.size()).value();
  const std::vector<double> expected = expected_distribution(kLogits, p);
  int df = 0;
  const double statistic = chi_square(draw_counts(kLogits, p, state), expected, &df);
  ASSERT_GE(df, 1);
  EXPECT_LT(statistic, kCritical[df]) << "df=" << df;
}

TEST(SamplerStatistics, Temperature) {
  for (float t : {0.5f, 1.0f, 1.7f}) {
    SamplingParams p;
    p.temperature = t;
    SCOPED_TRACE(t);
    expect_fit(p);
  }
}

TEST(SamplerStatistics, TopK) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 5;
  expect_fit(p);
}

TEST(SamplerStatistics, TopP) {
  SamplingParams p;
  p.temperature = 1.3f;
  p.top_p = 0.8f;
  expect_fit(p);
}

TEST(SamplerStatistics, MinP) {
  SamplingParams p;
  p.min_p = 0.1f;
  expect_fit(p);
}

TEST(SamplerStatistics, AllTruncationsTogether) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 6;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  expect_fit(p);
}

TEST(SamplerStatistics, ProcessorsBeforeTemperature) {
  // Bias, a mask and penalties shape the logits the distribution is built from.
  SamplingParams p;
  p.temperature = 1.2f;
  p.allowed_token_ids = {0, 1, 2, 4, 6, 7};
  p.logit_bias = {{2, 1.5f}};
  p.repetition_penalty = 1.5f;
  p.presence_penalty = 0.5f;
  auto state = SequenceSamplingState::create(std::vector<int32_t>{4}, kLogits.size()).value();
  ASSERT_TRUE(state.append_output(7));

  // By hand: 4 in the prompt: 3 / 1.5 = 2; 7 in the output: 2.5 / 1.5 - 0.5; 2 biased: 0.5 + 1.5.
  std::vector<float> processed = {1.0f, 2.0f, 2.0f, -INFINITY, 2.0f, -INFINITY, 1.5f,
                                  2.5f / 1.5f - 0.5f};
  std::vector<double> expected = expected_distribution(processed, p);
  int df = 0;
  const double statistic = chi_square(draw_counts(kLogits, p, state), expected, &df);
  EXPECT_EQ(df, 5);
  EXPECT_LT(statistic, kCritical[df]);
}

TEST(SamplerStatistics, TheTestRejectsTheWrongDistribution) {
  // Power check: top_k draws compared with the untruncated distribution must fail clearly.
  SamplingParams truncated;
  truncated.top_k = 4;
  const auto state = SequenceSamplingState::create({}, kLogits.size()).value();
  const std::vector<int> counts = draw_counts(kLogits, truncated, state);
  const std::vector<double> untruncated = expected_distribution(kLogits, SamplingParams{});
  double statistic = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = untruncated[i] * kDraws;
    statistic += (counts[i] - e) * (counts[i] - e) / e;
  }
  EXPECT_GT(statistic, 100 * kCritical[7]);
}

}  // namespace
}  // namespace deepinfer
