#include "sample/logits_processors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace deepinfer {
namespace {

constexpr float kNegInf = -INFINITY;

SequenceSamplingState state_of(std::vector<int32_t> prompt, std::vector<int32_t> output,
                               int32_t vocab) {
  auto state = SequenceSamplingState::create(prompt, vocab).value();
  for (int32_t t : output) EXPECT_TRUE(state.append_output(t));
  return state;
}

TEST(TokenBitmask, KeepsSetBitsLsbFirstAcrossWords) {
  std::vector<float> logits(40, 1.0f);
  // Word 0 allows tokens 0 and 31; word 1 allows token 33 (bit 1). Bits past the vocabulary
  // (tokens 40-63) are ignored.
  const std::vector<uint32_t> mask = {0x8000'0001u, 0xFFFF'FF02u};
  ASSERT_TRUE(apply_token_bitmask(logits, mask));
  for (int i = 0; i < 40; ++i) {
    const bool allowed = i == 0 || i == 31 || i == 33;
    EXPECT_EQ(logits[i], allowed ? 1.0f : kNegInf) << i;
  }
}

TEST(TokenBitmask, RejectsAMaskOfTheWrongWidth) {
  std::vector<float> logits(33, 0.0f);
  const std::vector<uint32_t> one_word = {~0u};
  auto r = apply_token_bitmask(logits, one_word);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "token bitmask has 1 words, 33 tokens need 2");
  EXPECT_EQ(bitmask_words(32), 1u);
  EXPECT_EQ(bitmask_words(129280), 4040u);
}

TEST(AllowedTokenIds, MasksEverythingElseAndKeepsValues) {
  std::vector<float> logits = {0.5f, -1.0f, 2.0f, 3.0f};
  const std::vector<int32_t> allowed = {3, 1, 3};
  apply_allowed_token_ids(logits, allowed);
  EXPECT_EQ(logits, (std::vector<float>{kNegInf, -1.0f, kNegInf, 3.0f}));
  std::vector<float> untouched = {1.0f, 2.0f};
  apply_allowed_token_ids(untouched, {});
  EXPECT_EQ(untouched, (std::vector<float>{1.0f, 2.0f}));
}

TEST(LogitBias, AddsToListedTokensOnly) {
  std::vector<float> logits = {1.0f, 1.0f, kNegInf};
  apply_logit_bias(logits, {{0, -2.5f}, {2, 100.0f}});
  EXPECT_EQ(logits, (std::vector<float>{-1.5f, 1.0f, kNegInf}));
}

TEST(MinTokens, BansStopIdsAndEosUntilReached) {
  SamplingParams p;
  p.min_tokens = 2;
  p.stop_token_ids = {1};
  const std::vector<int32_t> eos = {3};
  std::vector<float> logits(4, 0.0f);
  apply_min_tokens(logits, p, 1, eos);
  EXPECT_EQ(logits, (std::vector<float>{0.0f, kNegInf, 0.0f, kNegInf}));

  std::vector<float> reached(4, 0.0f);
  apply_min_tokens(reached, p, 2, eos);
  EXPECT_EQ(reached, std::vector<float>(4, 0.0f));
}

TEST(MinTokens, IgnoreEosLeavesEosAlone) {
  SamplingParams p;
  p.min_tokens = 5;
  p.ignore_eos = true;
  p.stop_token_ids = {0};
  std::vector<float> logits(4, 0.0f);
  apply_min_tokens(logits, p, 0, std::vector<int32_t>{3});
  EXPECT_EQ(logits, (std::vector<float>{kNegInf, 0.0f, 0.0f, 0.0f}));
}

TEST(Penalties, RepetitionDividesPositiveAndMultipliesNegativeOverPromptAndOutput) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  // Token 0 in the prompt, 1 in the output, 2 unseen, 3 in both.
  const auto state = state_of({0, 3}, {1, 3}, 4);
  std::vector<float> logits = {4.0f, -4.0f, 4.0f, 1.0f};
  apply_penalties(logits, p, state);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -8.0f, 4.0f, 0.5f}));
}

TEST(Penalties, FrequencyAndPresenceCountOutputTokensOnly) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 1.0f;
  const auto state = state_of({0}, {1, 2, 2, 2}, 4);
  std::vector<float> logits = {3.0f, 3.0f, 3.0f, 3.0f};
  apply_penalties(logits, p, state);
  // 1: 3 - 0.5*1 - 1 = 1.5; 2: 3 - 0.5*3 - 1 = 0.5; the prompt-only token 0 is untouched.
  EXPECT_EQ(logits, (std::vector<float>{3.0f, 1.5f, 0.5f, 3.0f}));
}

TEST(Penalties, RepetitionThenFrequencyThenPresence) {
  SamplingParams p;
  p.repetition_penalty = 4.0f;
  p.frequency_penalty = 1.0f;
  p.presence_penalty = -2.0f;
  const auto state = state_of({}, {0, 0}, 2);
  std::vector<float> logits = {8.0f, kNegInf};
  apply_penalties(logits, p, state);
  EXPECT_EQ(logits[0], 8.0f / 4.0f - 2.0f + 2.0f);
  EXPECT_EQ(logits[1], kNegInf);
}

TEST(Penalties, NeutralValuesChangeNothing) {
  const auto state = state_of({0}, {1}, 2);
  std::vector<float> logits = {-1.0f, 1.0f};
  apply_penalties(logits, SamplingParams{}, state);
  EXPECT_EQ(logits, (std::vector<float>{-1.0f, 1.0f}));
}

}  // namespace
}  // namespace deepinfer
