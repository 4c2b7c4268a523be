#include "sample/token_choice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace deepinfer {
namespace {

TEST(GreedyToken, LowestIdWinsTies) {
  EXPECT_EQ(greedy_token(std::vector<float>{1.0f, 5.0f, 2.0f, 5.0f}), 1);
  EXPECT_EQ(greedy_token(std::vector<float>{-INFINITY, -3.0f, -3.0f}), 1);
  EXPECT_EQ(greedy_token(std::vector<float>{-INFINITY, -INFINITY}), -1);
}

TEST(DrawToken, InvertsTheCdfInTokenIdOrder) {
  // Weights 1 and 3: u in [0, 0.25) picks token 2, [0.25, 1) token 5.
  const std::vector<Candidate> candidates = {{2, 0.0f, 1.0}, {5, 0.0f, 3.0}};
  EXPECT_EQ(draw_token(candidates, 0.0), 2);
  EXPECT_EQ(draw_token(candidates, 0.2499), 2);
  EXPECT_EQ(draw_token(candidates, 0.25), 5);
  EXPECT_EQ(draw_token(candidates, std::nextafter(1.0, 0.0)), 5);
}

TEST(DrawToken, NeverPicksAZeroWeight) {
  const std::vector<Candidate> candidates = {{1, 0.0f, 0.0}, {2, 0.0f, 1.0}, {3, 0.0f, 0.0}};
  EXPECT_EQ(draw_token(candidates, 0.0), 2);
  EXPECT_EQ(draw_token(candidates, std::nextafter(1.0, 0.0)), 2);
}

}  // namespace
}  // namespace deepinfer
