// DeepseekV4::random: a model built from a config alone, with random weights made on the backend.
// It must run (prefill, chunked, decode from a synthetic context) with finite logits, be a function
// of its seed, and leave the checkpoint path alone.
#include "engine/model_runner.h"

#include "golden_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace deepinfer {
namespace {

ModelConfig demo_config() {
  auto c = DeepseekV4::read_config(testing::golden_dir() + "/../../models/demo");
  EXPECT_TRUE(c) << c.error().message;
  return c ? c.value() : ModelConfig{};
}

std::vector<float> run(DeepseekV4& model, Backend& be, const std::vector<int32_t>& ids, int chunk) {
  RunnerOptions opt;
  opt.max_sequences = 2;
  opt.max_context = 512;
  auto runner = ModelRunner::create(model, be, opt);
  EXPECT_TRUE(runner) << runner.error().message;
  if (!runner) return {};
  auto seq = runner.value()->open_sequence();
  EXPECT_TRUE(seq);
  std::vector<float> all;
  for (size_t s = 0; s < ids.size(); s += chunk) {
    const int32_t n = static_cast<int32_t>(std::min<size_t>(chunk, ids.size() - s));
    auto r = runner.value()->step({{seq.value(), ids.data() + s, n, ForwardBatch::Logits::kAll}});
    EXPECT_TRUE(r) << r.error().message;
    if (!r) break;
    all.insert(all.end(), r.value().begin(), r.value().end());
  }
  return all;
}

std::vector<int32_t> ids(int n) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back((i * 37 + 11) % 4000 + 5);
  return v;
}

TEST(RandomModel, RunsWithFiniteLogitsAndChunkingAgrees) {
  auto be = make_cpu_backend(2).value();
  auto model = DeepseekV4::random(demo_config(), *be, 7);
  ASSERT_TRUE(model) << model.error().message;
  const auto x = ids(150);  // past several HCA (32) and CSA (4) windows and the 64-token window
  const std::vector<float> full = run(*model.value(), *be, x, static_cast<int>(x.size()));
  const std::vector<float> chunked = run(*model.value(), *be, x, 7);
  ASSERT_EQ(full.size(), x.size() * 4096);
  ASSERT_EQ(chunked.size(), full.size());
  double num = 0, den = 0, spread = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    ASSERT_TRUE(std::isfinite(full[i])) << "logit " << i;
    num += (full[i] - chunked[i]) * (full[i] - chunked[i]);
    den += full[i] * full[i];
    spread = std::max(spread, std::abs(static_cast<double>(full[i] - full[0])));
  }
  EXPECT_LT(std::sqrt(num / den), 1e-4);
  EXPECT_GT(spread, 1e-3);  // not a constant
  EXPECT_LT(std::sqrt(den / full.size()), 1e3);  // of a sane size
}

TEST(RandomModel, IsAFunctionOfTheSeed) {
  auto be = make_cpu_backend(2).value();
  const ModelConfig c = demo_config();
  auto a = DeepseekV4::random(c, *be, 1);
  auto b = DeepseekV4::random(c, *be, 1);
  auto d = DeepseekV4::random(c, *be, 2);
  ASSERT_TRUE(a && b && d);
  const auto x = ids(20);
  const auto la = run(*a.value(), *be, x, 20), lb = run(*b.value(), *be, x, 20), ld = run(*d.value(), *be, x, 20);
  EXPECT_EQ(la, lb);
  EXPECT_NE(la, ld);
}

TEST(RandomModel, DecodesFromASyntheticContext) {
  auto be = make_cpu_backend(2).value();
  auto model = DeepseekV4::random(demo_config(), *be, 3);
  ASSERT_TRUE(model);
  RunnerOptions opt;
  opt.max_sequences = 3;
  opt.max_context = 600;
  auto runner = ModelRunner::create(*model.value(), *be, opt);
  ASSERT_TRUE(runner);
  std::vector<int32_t> seqs;
  for (int i = 0; i < 3; ++i) {
    auto s = runner.value()->open_sequence();
    ASSERT_TRUE(s);
    ASSERT_TRUE(runner.value()->set_synthetic_length(s.value(), 500 + i));
    seqs.push_back(s.value());
  }
  ASSERT_TRUE(be->randomize_state(5));
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> tok = {10, 20, 30};
    std::vector<ModelRunner::Feed> feeds;
    for (int i = 0; i < 3; ++i) feeds.push_back({seqs[i], &tok[i], 1, ForwardBatch::Logits::kLast});
    auto r = runner.value()->step(feeds);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(r.value().size(), 3u * 4096);
    for (float v : r.value()) ASSERT_TRUE(std::isfinite(v));
  }
  EXPECT_EQ(runner.value()->length(seqs[0]), 503);
}

TEST(RandomModel, GreedyStepsReturnTheArgmaxOfTheLogits) {
  auto be = make_cpu_backend(2).value();
  auto model = DeepseekV4::random(demo_config(), *be, 11);
  ASSERT_TRUE(model);
  RunnerOptions opt;
  opt.max_sequences = 4;
  opt.max_context = 64;
  auto runner = ModelRunner::create(*model.value(), *be, opt);
  ASSERT_TRUE(runner);
  ModelRunner& r = *runner.value();
  // Two pairs of identical sequences: one of each pair steps with logits, the other greedily.
  std::vector<int32_t> seq;
  for (int i = 0; i < 4; ++i) seq.push_back(r.open_sequence().value());
  const std::vector<int32_t> a = ids(9), b = ids(5);
  auto logits = r.step({{seq[0], a.data(), 9, ForwardBatch::Logits::kLast}, {seq[1], b.data(), 5, ForwardBatch::Logits::kLast}});
  ASSERT_TRUE(logits) << logits.error().message;
  const std::vector<float> rows(logits.value().begin(), logits.value().end());
  auto best = r.step_greedy({{seq[2], a.data(), 9, ForwardBatch::Logits::kLast}, {seq[3], b.data(), 5, ForwardBatch::Logits::kLast}});
  ASSERT_TRUE(best) << best.error().message;
  ASSERT_EQ(best.value().size(), 2u);
  const size_t vocab = rows.size() / 2;
  for (size_t i = 0; i < 2; ++i) {
    const auto row = rows.begin() + static_cast<std::ptrdiff_t>(i * vocab);
    EXPECT_EQ(best.value()[i], std::max_element(row, row + static_cast<std::ptrdiff_t>(vocab)) - row) << i;
  }
  EXPECT_EQ(r.length(seq[2]), 9);
  EXPECT_EQ(r.length(seq[3]), 5);
  // The backend's argmax: ties to the lowest index, -1 for a row of -inf, -2 for NaN or +inf.
  std::vector<float> v = {1, 3, 3, 2, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0, NAN, 5, 1, 0, 1, INFINITY, 2};
  auto* cpu = be.get();
  ASSERT_TRUE(cpu->begin_forward(ForwardBatch{}));
  Tensor x = cpu->scratch(4, 4);
  ASSERT_TRUE(cpu->write(x, v.data()));
  IntTensor out = cpu->scratch_int(4, 1);
  cpu->argmax_rows(x, out);
  std::vector<int32_t> got(4);
  ASSERT_TRUE(cpu->read_ints(out, got.data()));
  EXPECT_EQ(got, (std::vector<int32_t>{1, -1, -2, -2}));
}

TEST(RandomModel, SamplesTheLogitsWhereTheyAre) {
  // forward_logits leaves the rows on the backend; sample_rows there gives what sample_row gives on
  // forward's copies of the same rows.
  auto be = make_cpu_backend(2).value();
  auto model = DeepseekV4::random(demo_config(), *be, 13);
  ASSERT_TRUE(model);
  DeepseekV4& m = *model.value();
  const StateLayout layout = m.state_layout();
  const std::vector<int32_t> a = ids(9), b = ids(5);
  const int32_t blocks = layout.blocks_for(9);
  ASSERT_TRUE(be->allocate_state(layout, 4, 4 * blocks));
  auto batch = [&](int32_t slot0) {
    ForwardBatch fb;
    std::vector<int32_t> t0, t1;
    for (int32_t i = 0; i < blocks; ++i) {
      t0.push_back(slot0 * blocks + i);
      t1.push_back((slot0 + 1) * blocks + i);
    }
    fb.add_sequence(slot0, 0, a.data(), 9, t0, ForwardBatch::Logits::kLast);
    fb.add_sequence(slot0 + 1, 0, b.data(), 5, t1, ForwardBatch::Logits::kLast);
    return fb;
  };
  const ForwardBatch on_host = batch(0), on_backend = batch(2);
  auto host = m.forward(on_host);
  ASSERT_TRUE(host) << host.error().message;
  const std::vector<float> rows(host.value().begin(), host.value().end());
  auto logits = m.forward_logits(on_backend);
  ASSERT_TRUE(logits) << logits.error().message;
  ASSERT_EQ(logits.value().rows, 2);
  const int64_t vocab = logits.value().cols;
  ASSERT_EQ(rows.size(), static_cast<size_t>(2 * vocab));

  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.9f;
  p.logprobs = 3;
  const auto state = SequenceSamplingState::create(a, static_cast<int32_t>(vocab)).value();
  std::vector<RowSampling> specs = {{&p, &state, {}, {}, {7, 0, 0}}, {&p, &state, {}, {}, {7, 1, 0}}};
  std::vector<Result<SampleResult>> got;
  ASSERT_TRUE(be->sample_rows(logits.value(), specs, got));
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto first = rows.begin() + static_cast<std::ptrdiff_t>(i * vocab);
    std::vector<float> row(first, first + static_cast<std::ptrdiff_t>(vocab));
    auto want = sample_row(row, p, state, {}, {}, specs[i].key);
    ASSERT_TRUE(want && got[i]);
    EXPECT_EQ(got[i].value().token, want.value().token) << i;
    EXPECT_EQ(got[i].value().logprobs->logprob, want.value().logprobs->logprob) << i;
  }
  ForwardBatch greedy = on_backend;
  greedy.greedy_tokens = true;
  EXPECT_FALSE(m.forward_logits(greedy));
}

TEST(RandomModel, ReadConfigTakesADirectoryOrAFile) {
  auto dir = DeepseekV4::read_config(testing::golden_dir() + "/../../models/demo");
  auto file = DeepseekV4::read_config(testing::golden_dir() + "/../../models/demo/config.json");
  ASSERT_TRUE(dir && file);
  EXPECT_EQ(dir.value().hidden_size, file.value().hidden_size);
  EXPECT_FALSE(DeepseekV4::read_config(testing::golden_dir() + "/../../models/no-such-model"));
}

}  // namespace
}  // namespace deepinfer
