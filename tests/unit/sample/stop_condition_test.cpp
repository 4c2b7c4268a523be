#include "sample/stop_condition.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace deepinfer {
namespace {

const std::vector<int32_t> kEos = {2, 9};

TEST(TokenStop, EosAndStopIdsEndWithStop) {
  SamplingParams p;
  p.stop_token_ids = {5};
  auto eos = check_token_stop(p, kEos, 9, 1);
  ASSERT_TRUE(eos);
  EXPECT_EQ(eos->reason, FinishReason::kStop);
  EXPECT_TRUE(eos->is_eos);
  EXPECT_EQ(eos->token, 9);
  auto stop_id = check_token_stop(p, kEos, 5, 1);
  ASSERT_TRUE(stop_id);
  EXPECT_EQ(stop_id->reason, FinishReason::kStop);
  EXPECT_FALSE(stop_id->is_eos);
  EXPECT_FALSE(check_token_stop(p, kEos, 4, 1));
}

TEST(TokenStop, MaxTokensEndsWithLengthButAStopTokenWins) {
  SamplingParams p;
  p.max_tokens = 3;
  EXPECT_FALSE(check_token_stop(p, kEos, 4, 2));
  auto length = check_token_stop(p, kEos, 4, 3);
  ASSERT_TRUE(length);
  EXPECT_EQ(length->reason, FinishReason::kLength);
  auto eos_last = check_token_stop(p, kEos, 2, 3);
  ASSERT_TRUE(eos_last);
  EXPECT_EQ(eos_last->reason, FinishReason::kStop);
}

TEST(TokenStop, IgnoreEosKeepsGoingButStopIdsStillStop) {
  SamplingParams p;
  p.ignore_eos = true;
  p.stop_token_ids = {9};  // an EOS id the caller lists explicitly still stops
  EXPECT_FALSE(check_token_stop(p, kEos, 2, 1));
  auto listed = check_token_stop(p, kEos, 9, 1);
  ASSERT_TRUE(listed);
  EXPECT_FALSE(listed->is_eos);
}

TEST(TokenStop, NothingStopsBeforeMinTokens) {
  SamplingParams p;
  p.min_tokens = 2;
  p.stop_token_ids = {5};
  EXPECT_FALSE(check_token_stop(p, kEos, 2, 2));
  EXPECT_FALSE(check_token_stop(p, kEos, 5, 2));
  EXPECT_TRUE(check_token_stop(p, kEos, 5, 3));
  EXPECT_FALSE(stop_strings_armed(p, 2));
  EXPECT_TRUE(stop_strings_armed(p, 3));
  EXPECT_TRUE(stop_strings_armed(SamplingParams{}, 1));
}

TEST(FinishReason, Names) {
  EXPECT_STREQ(finish_reason_name(FinishReason::kStop), "stop");
  EXPECT_STREQ(finish_reason_name(FinishReason::kLength), "length");
  EXPECT_STREQ(finish_reason_name(FinishReason::kCancelled), "cancelled");
  EXPECT_STREQ(finish_reason_name(FinishReason::kError), "error");
}

}  // namespace
}  // namespace deepinfer
