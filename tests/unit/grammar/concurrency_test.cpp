// Matchers on several threads share one CompiledGrammar (and its caches, filled concurrently):
// every thread must see exactly the masks a single thread sees.
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "random_generation.h"
#include "test_vocabularies.h"

#include <gtest/gtest.h>

#include <thread>

namespace deepinfer::grammar {
namespace {

using Masks = std::vector<std::vector<uint32_t>>;

// Replays `tokens` and returns the mask before each one.
Masks replay(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<int32_t>& tokens) {
  Masks out;
  Matcher m(g);
  std::vector<uint32_t> mask(g->vocabulary().mask_words());
  for (int32_t t : tokens) {
    m.fill_mask(mask.data());
    out.push_back(mask);
    if (!m.advance(t)) break;
  }
  return out;
}

TEST(Concurrency, SharedGrammarGivesIdenticalMasks) {
  const char* schema = R"({"type":"object","properties":{"name":{"type":"string","maxLength":20},"tags":{"type":"array","items":{"enum":["a","b","c"]}},"n":{"type":"number","minimum":0}},"required":["name"]})";
  // Token sequences from one reference generation per seed.
  std::vector<std::vector<int32_t>> runs;
  {
    GrammarCompiler c(testing::deepseek_vocabulary());
    auto g = c.compile(GrammarKind::kJsonSchema, schema).value();
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      Matcher m(g);
      std::mt19937_64 rng(seed);
      runs.push_back(testing::generate(m, rng, 120).tokens);
    }
  }
  std::vector<Masks> expected;
  {
    GrammarCompiler c(testing::deepseek_vocabulary());
    auto g = c.compile(GrammarKind::kJsonSchema, schema).value();
    for (const auto& r : runs) expected.push_back(replay(g, r));
  }
  // A fresh compiler: threads compile concurrently (cache) and fill the mask caches together.
  GrammarCompiler shared(testing::deepseek_vocabulary());
  std::vector<Masks> got(runs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < runs.size(); ++i) {
    threads.emplace_back([&, i] {
      auto g = shared.compile(GrammarKind::kJsonSchema, schema).value();
      got[i] = replay(g, runs[i]);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(shared.cached_grammars(), 1u);
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_TRUE(got[i] == expected[i]) << "run " << i;
}

}  // namespace
}  // namespace deepinfer::grammar
