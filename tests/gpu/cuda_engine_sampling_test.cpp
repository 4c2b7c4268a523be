// The engine on the GPU samples where the logits are (Backend::sample_rows) unless `host_sampling`
// is set: both ways draw the same tokens with the same logprobs for seeded sampled generations,
// grammar-constrained ones included (a draw within rounding of a boundary of the distribution could
// differ; at this vocabulary and these lengths none is expected).
#include "engine/engine.h"
#include "engine/session.h"
#include "golden_fixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

namespace deepinfer {
namespace {

struct Output {
  std::map<int32_t, std::vector<int32_t>> tokens;
  std::map<int32_t, std::vector<float>> logprobs;
  std::map<int32_t, FinishReason> reasons;
};

// An engine on the demo model on the GPU; nullptr (the test skips) where there is none.
std::shared_ptr<Engine> gpu_engine(bool host_sampling, std::string* why) {
  EngineConfig c;
  c.model_path = testing::demo_model_dir();
  c.device = Device::kCuda;
  c.threads = 4;
  c.seed = 5;
  c.host_sampling = host_sampling;
#ifdef DI_CUDA_MODULE_FILE
  // In the build tree the module is not beside this program (a GPU machine's bundle has it in ../lib).
  if (std::filesystem::exists(DI_CUDA_MODULE_FILE)) c.cuda_module = DI_CUDA_MODULE_FILE;
#endif
  auto e = Engine::create(c);
  if (!e) {
    *why = e.error().message;
    return nullptr;
  }
  return e.value();
}

// One generation; with `schema`, constrained by it (compiled by this engine).
Output run(Engine& e, const std::vector<int32_t>& prompt, const SamplingParams& p, const char* schema = nullptr) {
  Output o;
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  if (schema) {
    auto g = e.compile_grammar(grammar::GrammarKind::kJsonSchema, schema, {});
    EXPECT_TRUE(g) << g.error().message;
    if (!g) return o;
    grammar = g.value();
  }
  auto s = e.create_session();
  EXPECT_TRUE(s);
  if (!s) return o;
  EXPECT_TRUE(s.value()->add_tokens(prompt));
  auto r = s.value()->generate(p, grammar);
  EXPECT_TRUE(r) << r.error().message;
  if (!r) return o;
  for (;;) {
    auto ev = s.value()->poll(60000);
    if (!ev || !ev.value()) {
      ADD_FAILURE() << "no DONE event";
      break;
    }
    Event& x = *ev.value();
    if (x.kind == Event::Kind::kDone) break;
    if (x.kind == Event::Kind::kTokens) {
      o.tokens[x.completion].insert(o.tokens[x.completion].end(), x.tokens.begin(), x.tokens.end());
      for (const auto& lp : x.logprobs) o.logprobs[x.completion].push_back(lp.logprob);
    } else if (x.kind == Event::Kind::kFinished && x.reason) {
      o.reasons[x.completion] = *x.reason;
    }
  }
  return o;
}

void expect_same(const Output& device, const Output& host, const char* what) {
  ASSERT_EQ(device.tokens.size(), host.tokens.size()) << what;
  for (const auto& [c, toks] : host.tokens) {
    EXPECT_EQ(device.tokens.at(c), toks) << what << ", completion " << c;
    const auto& a = device.logprobs.at(c);
    const auto& b = host.logprobs.at(c);
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << what << ", completion " << c << " token " << i;
  }
  EXPECT_EQ(device.reasons, host.reasons) << what;
}

TEST(CudaEngineSampling, OnTheDeviceDrawsWhatTheHostDraws) {
  std::string why;
  auto device = gpu_engine(false, &why);
  if (!device) GTEST_SKIP() << "no GPU engine: " << why;
  auto host = gpu_engine(true, &why);
  ASSERT_TRUE(host) << why;
  const std::vector<int32_t> prompt = {17, 305, 29, 1044, 88, 412, 9, 3001, 56, 77, 2048, 13};

  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.top_k = 50;
  p.max_tokens = 40;
  p.n = 4;
  p.seed = 1234;
  p.logprobs = 3;
  p.repetition_penalty = 1.1f;
  p.ignore_eos = true;
  expect_same(run(*device, prompt, p), run(*host, prompt, p), "top_k 50, top_p 0.95, repetition 1.1, n 4");

  SamplingParams g;
  g.temperature = 1.0f;
  g.max_tokens = 60;
  g.seed = 99;
  g.logprobs = 1;
  const char* schema = R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"n":{"type":"integer"}},"required":["name","n"]})";
  expect_same(run(*device, prompt, g, schema), run(*host, prompt, g, schema), "JSON schema");
}

}  // namespace
}  // namespace deepinfer
