// The golden fixtures through the CUDA backend against the CPU reference (and HF's logits): one full
// forward, chunks of 7, token by token, and a batch mixing three sequences at different stages.
// Prints ||Δ||/||ref||, max abs and the top-1 agreement rate for each.
#include "engine/model_runner.h"
#include "golden_fixture.h"
#include "twin.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string_view>

namespace deepinfer {
namespace {

using testing::GoldenFixture;

struct Agreement {
  testing::Dev dev;
  double top1 = 0;  // fraction of positions whose argmax matches
};

Agreement agreement(const std::vector<float>& got, const std::vector<float>& ref, int64_t vocab) {
  Agreement a;
  a.dev = testing::deviation_of(got, ref);
  const size_t n = ref.size() / static_cast<size_t>(vocab);
  size_t same = 0;
  for (size_t i = 0; i < n; ++i) {
    auto g = got.begin() + static_cast<int64_t>(i) * vocab, r = ref.begin() + static_cast<int64_t>(i) * vocab;
    same += std::max_element(g, g + vocab) - g == std::max_element(r, r + vocab) - r;
  }
  a.top1 = n ? static_cast<double>(same) / n : 1.0;
  return a;
}

std::vector<float> run_chunked(ModelRunner& runner, const std::vector<int32_t>& ids, int chunk) {
  auto seq = runner.open_sequence();
  EXPECT_TRUE(seq);
  std::vector<float> all;
  for (size_t s = 0; s < ids.size(); s += chunk) {
    const int32_t n = static_cast<int32_t>(std::min<size_t>(chunk, ids.size() - s));
    auto r = runner.step({{seq.value(), ids.data() + s, n, ForwardBatch::Logits::kAll}});
    EXPECT_TRUE(r) << r.error().message;
    if (!r) break;
    all.insert(all.end(), r.value().begin(), r.value().end());
  }
  runner.close_sequence(seq.value());
  return all;
}

// Three sequences of the same ids in one runner, each fed by its own chunk schedule and starting at
// a different step, so that every step mixes prefill chunks and single tokens. Returns each one's
// logits.
std::vector<std::vector<float>> run_batched(ModelRunner& runner, const std::vector<int32_t>& ids, int64_t vocab) {
  const std::vector<std::function<int32_t(int32_t, size_t)>> chunk = {
      [](int32_t, size_t) { return 16; },
      [](int32_t k, size_t) {
        static const int32_t p[] = {5, 1, 1, 9, 1, 30};
        return p[k % 6];
      },
      [](int32_t, size_t done) { return done < 40 ? 1 : 50; }};
  const std::vector<int> start = {0, 3, 1};
  const size_t n = chunk.size();
  std::vector<int32_t> seq(n, -1), k(n, 0);
  std::vector<size_t> done(n, 0);
  std::vector<std::vector<float>> out(n);
  for (int step = 0;; ++step) {
    std::vector<ModelRunner::Feed> feeds;
    std::vector<size_t> who;
    for (size_t s = 0; s < n; ++s) {
      if (step < start[s] || done[s] >= ids.size()) continue;
      if (seq[s] < 0) {
        auto id = runner.open_sequence();
        EXPECT_TRUE(id);
        if (!id) return out;
        seq[s] = id.value();
      }
      const int32_t m = static_cast<int32_t>(std::min<size_t>(chunk[s](k[s]++, done[s]), ids.size() - done[s]));
      feeds.push_back({seq[s], ids.data() + done[s], m, ForwardBatch::Logits::kAll});
      who.push_back(s);
    }
    if (feeds.empty()) break;
    auto r = runner.step(feeds);
    EXPECT_TRUE(r) << r.error().message;
    if (!r) return out;
    const std::span<const float> part = r.value();
    size_t at = 0;
    for (size_t i = 0; i < feeds.size(); ++i) {
      const size_t len = static_cast<size_t>(feeds[i].n) * static_cast<size_t>(vocab);
      out[who[i]].insert(out[who[i]].end(), part.begin() + static_cast<int64_t>(at), part.begin() + static_cast<int64_t>(at + len));
      at += len;
      done[who[i]] += static_cast<size_t>(feeds[i].n);
    }
  }
  for (size_t s = 0; s < n; ++s)
    if (seq[s] >= 0) runner.close_sequence(seq[s]);
  return out;
}

// The cases: every HF fixture, plus the repository's trained demo model (models/demo) on a sequence
// the CPU generates greedily from a short prompt, where predictions are peaked and top-1 agreement
// is meaningful.
std::vector<std::string> case_names() {
  std::vector<std::string> names = testing::golden_fixture_names();
  names.push_back("demo_model");
  return names;
}

// Runs first and on every machine (no GPU needed): missing data is a failure that says what is
// missing, not an uncaught exception or a crash in the tests that read it.
TEST(CudaTestData, IsPresent) {
  const std::string missing = testing::missing_test_data();
  EXPECT_TRUE(missing.empty()) << missing;
}

class CudaGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGolden, MatchesCpuFullChunkedTokenAndBatched) {
  DI_REQUIRE_GPU(probe);
  probe.reset();
  GoldenFixture f;
  const bool demo = GetParam() == "demo_model";
  if (demo) {
    f.name = "demo_model";
    f.checkpoint = testing::demo_model_dir();
    ASSERT_TRUE(std::filesystem::exists(f.checkpoint + "/config.json")) << testing::missing_test_data();
  } else {
    f = testing::load_golden_fixture(GetParam());
    ASSERT_FALSE(f.ids.empty()) << "no ids in fixture " << GetParam() << ": " << testing::missing_test_data();
  }
  auto cpu = make_cpu_backend().value();
  auto cpu_model = DeepseekV4::load(f.checkpoint, *cpu);
  ASSERT_TRUE(cpu_model) << cpu_model.error().message;
  RunnerOptions opt;
  opt.max_sequences = 4;
  opt.max_context = f.ids.empty() ? 512 : static_cast<int64_t>(f.ids.size());
  auto cpu_runner = ModelRunner::create(*cpu_model.value(), *cpu, opt);
  ASSERT_TRUE(cpu_runner);

  if (f.ids.empty()) {  // demo model: greedy continuation of a short prompt, on the CPU
    f.vocab = cpu_model.value()->config().vocab_size;
    f.ids = {0, 300, 301, 302, 17};
    auto seq = cpu_runner.value()->open_sequence();
    ASSERT_TRUE(seq);
    auto lg = cpu_runner.value()->step({{seq.value(), f.ids.data(), static_cast<int32_t>(f.ids.size()), ForwardBatch::Logits::kLast}});
    ASSERT_TRUE(lg);
    while (f.ids.size() < 300) {
      const std::span<float> row = lg.value();
      f.ids.push_back(static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
      lg = cpu_runner.value()->step({{seq.value(), &f.ids.back(), 1, ForwardBatch::Logits::kLast}});
      ASSERT_TRUE(lg);
    }
    cpu_runner.value()->close_sequence(seq.value());
  }

  const std::vector<float> ref = run_chunked(*cpu_runner.value(), f.ids, static_cast<int>(f.ids.size()));
  const bool have_hf = !f.logits.empty();
  if (have_hf) {
    ASSERT_EQ(ref.size(), f.logits.size());
    const auto cpu_vs_hf = agreement(ref, f.logits, f.vocab);
    std::printf("[ golden ] %s: cpu vs HF rel %.3g, top-1 %.4f\n", f.name.c_str(), cpu_vs_hf.dev.relative, cpu_vs_hf.top1);
  }

  // fp32 mode must equal the reference to fp32 rounding. The bf16 mode rounds every product's
  // operands to bf16: on the trained demo model that costs little; the random fixtures sit within
  // ~3e-5 of router / indexer ties (their meta.json margins), so bf16 rounding flips choices there and
  // moves their logits by ~0.1 relative. The CPU backend with the same bf16 rounding emulated shows
  // the same deviation from HF (0.105 / 0.074 / 0.175 for hc2 / hc4_fp8 / hc4_yarn), so the bounds
  // below are the format's, not a bug's.
  // native: FP8 block-scaled matrices kept as stored (the native fixture's; bf16 checkpoints load as
  // in bf16 mode), within the bf16 mode's bounds.
  for (const char* prec : {"bf16", "fp32", "native"}) {
    const bool fp32 = std::string_view(prec) == "fp32";
    BackendOptions options;
    options.native_weights = std::string_view(prec) == "native";
    auto be = testing::gpu_backend(fp32, {}, options);
    ASSERT_TRUE(be) << be.error().message;
    auto gpu = std::move(be.value());
    auto gpu_model = DeepseekV4::load(f.checkpoint, *gpu);
    ASSERT_TRUE(gpu_model) << gpu_model.error().message;
    auto gpu_runner = ModelRunner::create(*gpu_model.value(), *gpu, opt);
    ASSERT_TRUE(gpu_runner);
    const double max_rel = fp32 ? 1e-4 : demo ? 1e-2 : 0.25;
    const double min_top1 = fp32 ? 0.99 : demo ? 0.99 : 0.75;

    auto report = [&](const std::string& mode, const std::vector<float>& got) {
      ASSERT_EQ(got.size(), ref.size()) << mode;
      const auto a = agreement(got, ref, f.vocab);
      std::string hf;
      if (have_hf) {
        const auto h = agreement(got, f.logits, f.vocab);
        hf = fmt::format(" | vs HF: rel {:.3g} top-1 {:.4f}", h.dev.relative, h.top1);
      }
      std::printf("[ golden ] %s %s %-14s cuda vs cpu: rel %.3g  max abs %.3g  top-1 %.4f%s\n", f.name.c_str(), prec, mode.c_str(),
                  a.dev.relative, a.dev.max_abs, a.top1, hf.c_str());
      EXPECT_TRUE(a.dev.finite) << prec << " " << mode;
      EXPECT_LE(a.dev.relative, max_rel) << prec << " " << mode;
      EXPECT_GE(a.top1, min_top1) << prec << " " << mode;
    };
    const std::vector<float> full = run_chunked(*gpu_runner.value(), f.ids, static_cast<int>(f.ids.size()));
    report("full", full);
    for (int chunk : {7, 1}) {
      const std::vector<float> got = run_chunked(*gpu_runner.value(), f.ids, chunk);
      const std::string mode = chunk == 1 ? "token-by-token" : "chunks of 7";
      report(mode, got);
      std::printf("[ golden ] %s %s %-14s cuda vs cuda full: rel %.3g\n", f.name.c_str(), prec, mode.c_str(),
                  testing::deviation_of(got, full).relative);
    }
    const auto batched = run_batched(*gpu_runner.value(), f.ids, f.vocab);
    for (size_t s = 0; s < batched.size(); ++s) report("batched seq " + std::to_string(s), batched[s]);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaGolden, ::testing::ValuesIn(case_names()), [](const auto& info) { return info.param; });

}  // namespace
}  // namespace deepinfer
