#include "sample/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace deepinfer {
namespace {

constexpr int32_t kVocab = 100;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Applies `change` to default parameters and expects kInvalidArgument naming `needle`.
void expect_invalid(const std::function<void(SamplingParams&)>& change, const std::string& needle) {
  SamplingParams p;
  change(p);
  auto r = validate(p, kVocab);
  ASSERT_FALSE(r) << "accepted; expected an error mentioning " << needle;
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
}

TEST(SamplingParams, DefaultsAreValidAndNeutral) {
  SamplingParams p;
  EXPECT_TRUE(validate(p, kVocab));
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_EQ(p.max_tokens, kDefaultMaxTokens);
  EXPECT_EQ(p.n, 1);
  EXPECT_FALSE(p.seed);
  EXPECT_FALSE(p.logprobs);
}

TEST(SamplingParams, AcceptsBoundaryValues) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = -1;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repetition_penalty = kMaxRepetitionPenalty;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.logit_bias = {{0, -100.0f}, {kVocab - 1, 100.0f}};
  p.allowed_token_ids = {0, kVocab - 1};
  p.stop_token_ids = {kVocab - 1};
  p.stop = {"\n\n", "終わり"};
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.n = kMaxCompletions;
  p.seed = ~0ull;
  p.logprobs = 0;
  p.prompt_logprobs = kMaxLogprobs;
  p.logprobs_mode = LogprobsMode::kProcessed;
  EXPECT_TRUE(validate(p, kVocab));
  p.top_k = 1'000'000;  // larger than the vocabulary: off
  EXPECT_TRUE(validate(p, kVocab));
}

TEST(SamplingParams, RejectsBadFloats) {
  expect_invalid([](auto& p) { p.temperature = -0.5f; }, "temperature=-0.5");
  expect_invalid([](auto& p) { p.temperature = kNaN; }, "temperature=nan");
  expect_invalid([](auto& p) { p.temperature = kInf; }, "temperature=inf");
  expect_invalid([](auto& p) { p.top_p = 2.0f; }, "top_p=2");
  expect_invalid([](auto& p) { p.top_p = 0.0f; }, "top_p=0");
  expect_invalid([](auto& p) { p.top_p = kNaN; }, "top_p=nan");
  expect_invalid([](auto& p) { p.min_p = -0.1f; }, "min_p=-0.1");
  expect_invalid([](auto& p) { p.min_p = 1.5f; }, "min_p=1.5");
  expect_invalid([](auto& p) { p.min_p = kNaN; }, "min_p=nan");
  expect_invalid([](auto& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty=0");
  expect_invalid([](auto& p) { p.repetition_penalty = 1000.0f; }, "repetition_penalty=1000");
  expect_invalid([](auto& p) { p.repetition_penalty = kNaN; }, "repetition_penalty=nan");
  expect_invalid([](auto& p) { p.presence_penalty = 2.5f; }, "presence_penalty=2.5");
  expect_invalid([](auto& p) { p.presence_penalty = kNaN; }, "presence_penalty=nan");
  expect_invalid([](auto& p) { p.frequency_penalty = -3.0f; }, "frequency_penalty=-3");
  expect_invalid([](auto& p) { p.frequency_penalty = -kInf; }, "frequency_penalty=-inf");
}

TEST(SamplingParams, RejectsBadCounts) {
  expect_invalid([](auto& p) { p.top_k = -2; }, "top_k=-2");
  expect_invalid([](auto& p) { p.max_tokens = 0; }, "max_tokens=0");
  expect_invalid([](auto& p) { p.min_tokens = -1; }, "min_tokens=-1");
  expect_invalid(
      [](auto& p) {
        p.max_tokens = 10;
        p.min_tokens = 11;
      },
      "min_tokens=11 is outside [0, max_tokens=10]");
  expect_invalid([](auto& p) { p.n = 0; }, "n=0");
  expect_invalid([](auto& p) { p.n = kMaxCompletions + 1; }, "n=129");
  expect_invalid([](auto& p) { p.logprobs = 21; }, "logprobs=21");
  expect_invalid([](auto& p) { p.logprobs = -1; }, "logprobs=-1");
  expect_invalid([](auto& p) { p.prompt_logprobs = 21; }, "prompt_logprobs=21");
  expect_invalid([](auto& p) { p.logprobs_mode = static_cast<LogprobsMode>(7); },
                 "logprobs_mode=7");
}

TEST(SamplingParams, RejectsTokenIdsOutsideTheVocabulary) {
  expect_invalid([](auto& p) { p.logit_bias[kVocab] = 1.0f; }, "logit_bias: token id 100");
  expect_invalid([](auto& p) { p.logit_bias[-1] = 1.0f; }, "logit_bias: token id -1");
  expect_invalid([](auto& p) { p.allowed_token_ids = {3, kVocab}; },
                 "allowed_token_ids: token id 100");
  expect_invalid([](auto& p) { p.stop_token_ids = {-5}; }, "stop_token_ids: token id -5");
}

TEST(SamplingParams, RejectsBadLogitBiasValues) {
  expect_invalid([](auto& p) { p.logit_bias[7] = 101.0f; }, "logit_bias[7]=101");
  expect_invalid([](auto& p) { p.logit_bias[7] = kNaN; }, "logit_bias[7]=nan");
  expect_invalid([](auto& p) { p.logit_bias[7] = -kInf; }, "logit_bias[7]=-inf");
}

TEST(SamplingParams, RejectsBadStopStrings) {
  expect_invalid([](auto& p) { p.stop = {"ok", ""}; }, "stop[1] has 0 bytes");
  expect_invalid([](auto& p) { p.stop = {std::string(kMaxStopStringBytes + 1, 'x')}; },
                 "stop[0] has 1025 bytes");
  expect_invalid([](auto& p) { p.stop.assign(kMaxStopStrings + 1, "x"); }, "65 strings");
  expect_invalid([](auto& p) { p.stop = {"\xE7\xB5"}; }, "stop[0] is not valid UTF-8");
  expect_invalid([](auto& p) { p.stop = {"\xC0\xAF"}; }, "not valid UTF-8");   // overlong
  expect_invalid([](auto& p) { p.stop = {"\xED\xA0\x80"}; }, "not valid UTF-8");  // surrogate
}

TEST(SamplingParams, RejectsNonPositiveVocabulary) {
  auto r = validate(SamplingParams{}, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer
