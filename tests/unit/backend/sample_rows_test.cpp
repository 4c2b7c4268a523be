// Backend::sample_rows on the CPU backend: exactly sample_row on each row (tokens, logprobs bit for
// bit, errors with their codes and messages), whatever the rows around it.
#include "backend/backend.h"

#include "sampling_cases.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>

namespace deepinfer {
namespace {

using testing::feature_cases;
using testing::make_logits;
using testing::RowShape;
using testing::SamplingCase;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_same(const Result<SampleResult>& got, const Result<SampleResult>& want, const std::string& what) {
  ASSERT_EQ(static_cast<bool>(got), static_cast<bool>(want)) << what << ": " << (got ? want.error().message : got.error().message);
  if (!want) {
    EXPECT_EQ(got.error().code, want.error().code) << what;
    EXPECT_EQ(got.error().message, want.error().message) << what;
    return;
  }
  EXPECT_EQ(got.value().token, want.value().token) << what;
  ASSERT_EQ(got.value().logprobs.has_value(), want.value().logprobs.has_value()) << what;
  if (!want.value().logprobs) return;
  const Logprobs& g = *got.value().logprobs;
  const Logprobs& w = *want.value().logprobs;
  EXPECT_TRUE(same_bits(g.logprob, w.logprob)) << what << ": " << g.logprob << " vs " << w.logprob;
  EXPECT_EQ(g.rank, w.rank) << what;
  ASSERT_EQ(g.top.size(), w.top.size()) << what;
  for (size_t i = 0; i < w.top.size(); ++i) {
    EXPECT_EQ(g.top[i].token, w.top[i].token) << what << " top " << i;
    EXPECT_TRUE(same_bits(g.top[i].logprob, w.top[i].logprob)) << what << " top " << i;
  }
}

// The rows on the backend, sampled there, against sample_row on copies of them.
void check_against_sample_row(Backend& be, const std::vector<SamplingCase>& cases, const std::vector<std::vector<float>>& logits) {
  const auto rows = static_cast<int64_t>(cases.size());
  const auto vocab = static_cast<int64_t>(logits[0].size());
  ASSERT_TRUE(be.begin_forward(ForwardBatch{}));
  Tensor x = be.scratch(rows, vocab);
  std::vector<float> all;
  for (const auto& l : logits) all.insert(all.end(), l.begin(), l.end());
  ASSERT_TRUE(be.write(x, all.data()));
  std::vector<RowSampling> specs;
  for (const SamplingCase& c : cases) specs.push_back(c.row());
  std::vector<Result<SampleResult>> got;
  ASSERT_TRUE(be.sample_rows(x, specs, got));
  ASSERT_EQ(got.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<float> row = logits[i];
    const SamplingCase& c = cases[i];
    expect_same(got[i], sample_row(row, c.params, c.state, c.eos, c.mask, c.key), c.name);
  }
}

TEST(CpuSampleRows, EqualsSampleRowForEveryFeature) {
  auto be = make_cpu_backend(2).value();
  for (int64_t vocab : {int64_t(1000), int64_t(129280)}) {
    for (RowShape shape : {RowShape::kPeaked, RowShape::kFlat, RowShape::kTies}) {
      const std::vector<SamplingCase> cases = feature_cases(vocab, 17 + static_cast<uint32_t>(shape));
      std::vector<std::vector<float>> logits;
      for (size_t i = 0; i < cases.size(); ++i) logits.push_back(make_logits(vocab, 1000 + static_cast<uint32_t>(i), shape));
      check_against_sample_row(*be, cases, logits);
    }
  }
}

TEST(CpuSampleRows, ErrorsOfOneRowLeaveTheOthers) {
  auto be = make_cpu_backend(2).value();
  const int64_t vocab = 300;
  std::vector<SamplingCase> cases = feature_cases(vocab, 5);
  cases.erase(cases.begin() + 6, cases.end());
  std::vector<std::vector<float>> logits;
  for (size_t i = 0; i < cases.size(); ++i) logits.push_back(make_logits(vocab, 50 + static_cast<uint32_t>(i), RowShape::kPeaked));
  logits[1][17] = std::numeric_limits<float>::quiet_NaN();  // the model's fault (kModelFormat)
  logits[2][vocab - 1] = std::numeric_limits<float>::infinity();
  cases[3].params.allowed_token_ids = {5};  // ... and the grammar bans 5: no token
  cases[3].mask.assign(bitmask_words(vocab), ~0u);
  cases[3].mask[0] &= ~(1u << 5);
  cases[4].mask.assign(3, ~0u);                  // the wrong size
  cases[5].eos = {static_cast<int32_t>(vocab)};  // outside the vocabulary
  check_against_sample_row(*be, cases, logits);
}

TEST(CpuSampleRows, RowsMustMatchTheLogits) {
  auto be = make_cpu_backend(1).value();
  ASSERT_TRUE(be->begin_forward(ForwardBatch{}));
  Tensor x = be->scratch(2, 16);
  const std::vector<SamplingCase> cases = feature_cases(16, 3);
  std::vector<RowSampling> one{cases[0].row()};
  std::vector<Result<SampleResult>> out;
  auto r = be->sample_rows(x, one, out);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_TRUE(out.empty());

  std::vector<RowSampling> missing(2);  // no parameters or state: an error of those rows
  ASSERT_TRUE(be->sample_rows(x, missing, out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].error().code, Code::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer
