// Random-weight models (DeepseekV4::random on the demo model's config) run through a ModelRunner:
// a prefill of every sequence, then decode steps of all of them, every logit row kept.
#pragma once

#include "engine/model_runner.h"
#include "golden_fixture.h"
#include "twin.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace deepinfer::testing {

// Without the demo model the calling test fails with a message (gtest reports the exception); a
// default ModelConfig would be the full-size model.
inline ModelConfig demo_config() {
  auto c = DeepseekV4::read_config(demo_model_dir());
  if (!c) throw std::runtime_error(c.error().message + " (" + missing_test_data() + ")");
  return c.value();
}

// `n_seqs` sequences: prefill `prompt` tokens each (one forward), then `steps` decode steps of the
// whole batch. Returns every logit row in order.
inline std::vector<float> prefill_then_decode(DeepseekV4& model, Backend& be, bool graphs, int n_seqs = 3, int prompt = 60, int steps = 40) {
  RunnerOptions opt;
  opt.max_sequences = n_seqs;
  opt.max_context = 128;
  opt.graphs = graphs;
  auto runner = ModelRunner::create(model, be, opt);
  EXPECT_TRUE(runner) << runner.error().message;
  if (!runner) return {};
  ModelRunner& r = *runner.value();
  std::vector<int32_t> seqs;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n_seqs; ++i) {
    seqs.push_back(r.open_sequence().value());
    std::vector<int32_t> p;
    for (int t = 0; t < prompt; ++t) p.push_back((t * 31 + i * 7 + 3) % 4000 + 5);
    prompts.push_back(p);
  }
  std::vector<float> all;
  std::vector<ModelRunner::Feed> feeds;
  for (int i = 0; i < n_seqs; ++i) feeds.push_back({seqs[i], prompts[i].data(), prompt, ForwardBatch::Logits::kLast});
  auto ok = r.step(feeds);
  EXPECT_TRUE(ok) << ok.error().message;
  if (!ok) return all;
  all.insert(all.end(), ok.value().begin(), ok.value().end());
  for (int step = 0; step < steps; ++step) {
    std::vector<int32_t> tok;
    static constexpr int kMul[] = {13, 17, 19, 23, 29, 31, 37, 41};
    for (int i = 0; i < n_seqs; ++i) tok.push_back((step * kMul[i % 8] + i + 1) % 4000 + 5);
    feeds.clear();
    for (int i = 0; i < n_seqs; ++i) feeds.push_back({seqs[i], &tok[i], 1, ForwardBatch::Logits::kLast});
    ok = r.step(feeds);
    EXPECT_TRUE(ok) << ok.error().message;
    if (!ok) break;
    all.insert(all.end(), ok.value().begin(), ok.value().end());
  }
  return all;
}

}  // namespace deepinfer::testing
