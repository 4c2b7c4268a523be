// The CPU forward against HF transformers' fp32 logits, for every fixture, processed in one pass,
// in chunks of 7 and token by token (chunked processing must equal one full forward).
#include "engine/model_runner.h"
#include "golden_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace deepinfer {
namespace {

using testing::GoldenFixture;

// Logits of every position of `ids`, fed to a fresh sequence `chunk` tokens at a time.
std::vector<float> run_chunked(ModelRunner& runner, const std::vector<int32_t>& ids, int chunk) {
  auto seq = runner.open_sequence();
  EXPECT_TRUE(seq);
  std::vector<float> all;
  for (size_t s = 0; s < ids.size(); s += chunk) {
    int32_t n = static_cast<int32_t>(std::min<size_t>(chunk, ids.size() - s));
    auto r = runner.step({{seq.value(), ids.data() + s, n, ForwardBatch::Logits::kAll}});
    EXPECT_TRUE(r) << r.error().message;
    if (!r) break;
    all.insert(all.end(), r.value().begin(), r.value().end());
  }
  runner.close_sequence(seq.value());
  return all;
}

class ForwardGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ForwardGolden, MatchesHfFullChunkedAndTokenByToken) {
  GoldenFixture f = testing::load_golden_fixture(GetParam());
  ASSERT_FALSE(f.ids.empty());
  auto backend = make_cpu_backend().value();
  auto model = DeepseekV4::load(f.checkpoint, *backend);
  ASSERT_TRUE(model) << model.error().message;
  ASSERT_EQ(model.value()->config().vocab_size, f.vocab);
  RunnerOptions opt;
  opt.max_sequences = 2;
  opt.max_context = static_cast<int64_t>(f.ids.size());
  auto runner = ModelRunner::create(*model.value(), *backend, opt);
  ASSERT_TRUE(runner) << runner.error().message;

  for (int chunk : {static_cast<int>(f.ids.size()), 7, 1}) {
    std::vector<float> got = run_chunked(*runner.value(), f.ids, chunk);
    ASSERT_EQ(got.size(), f.logits.size());
    auto dev = testing::deviation(got, f.logits);
    std::printf("[ fixture ] %s chunk=%d: rel %.3g, max abs %.3g\n", f.name.c_str(), chunk, dev.relative, dev.max_abs);
    EXPECT_LE(dev.relative, 1e-4) << "chunk " << chunk;
    EXPECT_LE(dev.max_abs, 1e-3) << "chunk " << chunk;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ForwardGolden, ::testing::ValuesIn(testing::golden_fixture_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace deepinfer
