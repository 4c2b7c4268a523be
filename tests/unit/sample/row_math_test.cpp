#include "sample/row_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace deepinfer {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(RowMath, ExpIsWithinTwoUlpOnItsWholeRange) {
  double worst = 0.0;
  for (float x = -87.0f; x <= 0.0f; x += 0.000731f) {
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp_nonpositive(x) - exact) / exact);
  }
  EXPECT_LT(worst, 2.5e-7);  // 2 ulp of float is 2.4e-7 relative at worst
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-100.0f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-kInf), 0.0f);
  EXPECT_EQ(exp_nonpositive(std::numeric_limits<float>::quiet_NaN()), 0.0f);  // -inf - -inf
}

TEST(RowMath, ScansFindTheFirstOffenderMaximumAndCounts) {
  std::vector<float> row(1000, -2.0f);
  row[3] = -kInf;
  row[700] = 5.0f;
  row[900] = 5.0f;
  EXPECT_EQ(first_invalid_logit(row), -1);
  EXPECT_EQ(max_logit(row), 5.0f);
  EXPECT_EQ(count_finite(row), 999u);
  EXPECT_EQ(first_index_of(row, 5.0f), 700);
  EXPECT_EQ(first_index_of(row, 6.0f), -1);
  EXPECT_TRUE(any_above(row.data(), row.size(), 4.0f));
  EXPECT_FALSE(any_above(row.data(), 700, -1.0f));
  std::vector<uint32_t> found;
  indices_above(row, 0.0f, found);
  EXPECT_EQ(found, (std::vector<uint32_t>{700, 900}));
  row[999] = std::numeric_limits<float>::quiet_NaN();
  row[998] = kInf;
  EXPECT_EQ(first_invalid_logit(row), 998);
  EXPECT_EQ(max_logit(std::vector<float>{-kInf, -kInf}), -kInf);
  // first_non_finite also counts -inf (a model never produces one).
  EXPECT_EQ(first_non_finite(row), 3);
  row[3] = 0.0f;
  EXPECT_EQ(first_non_finite(row), 998);
  EXPECT_EQ(first_non_finite(std::vector<float>(77, 1.0f)), -1);
  EXPECT_EQ(first_non_finite(std::vector<float>{1.0f, -kInf}), 1);
}

TEST(RowMath, WeightsAndSumsMatchAPlainLoop) {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> row(10007);  // not a multiple of the lanes
  for (float& x : row) x = normal(gen);
  row[17] = -kInf;
  const float max = max_logit(row);
  std::vector<float> w(row.size());
  exp_weights(row, max, 0.7f, w.data());
  double plain = 0.0, plain_exp = 0.0;
  for (size_t i = 0; i < row.size(); ++i) {
    // The argument is rounded to float first (as the pass does); exp itself is within 2 ulp.
    const double exact = std::exp(static_cast<double>((row[i] - max) * (1.0f / 0.7f)));
    EXPECT_NEAR(w[i], exact, 2.5e-7 * exact + 1e-37) << i;
    plain += w[i];
    plain_exp += std::exp(static_cast<double>(row[i]) - max);
  }
  EXPECT_EQ(w[17], 0.0f);
  EXPECT_NEAR(lane_sum(w.data(), 0, w.size()), plain, 1e-12 * plain);
  EXPECT_NEAR(exp_sum(row, max), plain_exp, 1e-6 * plain_exp);
  const MassAbove above = mass_above(w, 0.01f);
  double mass = 0.0;
  size_t count = 0;
  for (float x : w)
    if (x > 0.01f) mass += x, ++count;
  EXPECT_EQ(above.count, count);
  EXPECT_NEAR(above.mass, mass, 1e-12 * mass);
  // A temperature whose inverse overflows still weighs the best token 1.
  exp_weights(row, max, 1e-45f, w.data());
  EXPECT_EQ(w[std::max_element(row.begin(), row.end()) - row.begin()], 1.0f);
  std::vector<float> scaled(row.size());
  store_scaled(row, max, 2.0f, scaled);
  EXPECT_EQ(scaled[17], -kInf);
  EXPECT_FLOAT_EQ(scaled[5], (row[5] - max) / 2.0f);
}

}  // namespace
}  // namespace deepinfer
