// Masks, advance and rollback on the DeepSeek vocabulary: every mask bit must agree with whether
// advancing by that token succeeds.
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "random_generation.h"
#include "test_vocabularies.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>

namespace deepinfer::grammar {
namespace {

GrammarCompiler& compiler() {
  static GrammarCompiler c(testing::deepseek_vocabulary());
  return c;
}

std::shared_ptr<const CompiledGrammar> compile(GrammarKind kind, const std::string& spec, GrammarOptions o = {}) {
  auto g = compiler().compile(kind, spec, o);
  EXPECT_TRUE(g) << spec << ": " << (g ? "" : g.error().message);
  return g.value();
}

bool bit(const uint32_t* mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1u; }

std::vector<int32_t> allowed_ids(const uint32_t* mask, size_t words) {
  std::vector<int32_t> out;
  for (size_t w = 0; w < words; ++w) {
    for (uint32_t b = mask[w]; b; b &= b - 1) out.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(std::countr_zero(b))));
  }
  return out;
}

// Compares mask bits with advance() for `ids`.
void check_ids(Matcher& m, const uint32_t* mask, const std::vector<int32_t>& ids) {
  const auto& vocab = m.compiled().vocabulary();
  for (int32_t id : ids) {
    bool allowed = m.advance(id).has_value();
    if (allowed) {
      ASSERT_TRUE(m.rollback(1));
    }
    ASSERT_EQ(bit(mask, id), allowed) << "token " << id << " '" << vocab.bytes(id) << "'";
  }
}

// Samples refused and allowed tokens at every step of a random generation.
void check_generation(const std::shared_ptr<const CompiledGrammar>& g, uint64_t seed, size_t samples) {
  Matcher m(g);
  std::mt19937_64 rng(seed);
  size_t words = g->vocabulary().mask_words();
  auto result = testing::generate(m, rng, 200, [&](const uint32_t* mask) {
    std::vector<int32_t> ids;
    for (size_t k = 0; k < samples; ++k) ids.push_back(static_cast<int32_t>(rng() % g->vocabulary().size()));
    auto allowed = allowed_ids(mask, words);
    for (size_t k = 0; k < samples && !allowed.empty(); ++k) ids.push_back(allowed[rng() % allowed.size()]);
    check_ids(m, mask, ids);
  });
  EXPECT_EQ(result.text.find("<advance failed"), std::string::npos) << result.text;
}

TEST(Matcher, FullMaskEqualsTokenByTokenCheck) {
  auto g = compile(GrammarKind::kJsonSchema, R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name"]})");
  Matcher m(g);
  std::vector<uint32_t> mask(g->vocabulary().mask_words());
  std::vector<int32_t> all(g->vocabulary().size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
  for (const char* prefix : {"", "{", "{\"name\"", "{\"name\": \"ab", "{\"name\":\"x\",", "{\"name\":\"x\", \"n\": 12"}) {
    ASSERT_TRUE(m.advance_bytes(prefix)) << prefix;
    m.fill_mask(mask.data());
    check_ids(m, mask.data(), all);
    ASSERT_TRUE(m.rollback(1));
  }
}

TEST(Matcher, SampledMasksAlongRandomGenerations) {
  const char* schemas[] = {
      R"({"type":"object","properties":{"id":{"type":"integer","minimum":-5,"maximum":300},"tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3},"ok":{"type":"boolean"}},"required":["id","tags"]})",
      R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"number"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},"$ref":"#/$defs/node"})",
      R"({"type":"array","items":{"anyOf":[{"type":"string","format":"date"},{"type":"null"},{"enum":["a b","c\"d",3]}]}})",
      R"({})",
  };
  uint64_t seed = 1;
  for (const char* s : schemas) {
    auto g = compile(GrammarKind::kJsonSchema, s);
    for (int run = 0; run < 3; ++run) check_generation(g, seed++, 40);
  }
  check_generation(compile(GrammarKind::kRegex, R"([a-z]{2,6}@(example|test)\.(com|org)( [0-9]{1,3})?)"), 99, 60);
  check_generation(compile(GrammarKind::kEbnf, "root ::= \"(\" inner \")\"\ninner ::= ([a-z ] | root)*"), 98, 60);
}

TEST(Matcher, EosOnlyWhenTheGrammarCanEnd) {
  auto g = compile(GrammarKind::kRegex, "ab|abc");
  Matcher m(g);
  const auto& vocab = g->vocabulary();
  int32_t eos = vocab.eos_ids()[0];
  std::vector<uint32_t> mask(vocab.mask_words());
  m.fill_mask(mask.data());
  EXPECT_FALSE(bit(mask.data(), eos));
  EXPECT_FALSE(m.advance(eos));
  ASSERT_TRUE(m.advance_bytes("ab"));
  m.fill_mask(mask.data());
  EXPECT_TRUE(bit(mask.data(), eos));
  EXPECT_TRUE(m.can_end());
  ASSERT_TRUE(m.advance(eos));
  EXPECT_TRUE(m.is_terminated());
  m.fill_mask(mask.data());
  EXPECT_EQ(allowed_ids(mask.data(), mask.size()), std::vector<int32_t>{eos});
  EXPECT_FALSE(m.advance(eos));
  ASSERT_TRUE(m.rollback(1));
  EXPECT_FALSE(m.is_terminated());
  ASSERT_TRUE(m.advance_bytes("c"));
  m.fill_mask(mask.data());
  EXPECT_EQ(allowed_ids(mask.data(), mask.size()), std::vector<int32_t>{eos});
}

TEST(Matcher, RollbackRestoresEarlierStatesExactly) {
  auto g = compile(GrammarKind::kJsonSchema, R"({"type":"array","items":{"type":"integer"}})");
  Matcher m(g);
  std::mt19937_64 rng(5);
  std::vector<std::vector<uint32_t>> masks;
  std::vector<uint32_t> mask(g->vocabulary().mask_words());
  auto gen = testing::generate(m, rng, 30, [&](const uint32_t* mk) { masks.emplace_back(mk, mk + mask.size()); });
  ASSERT_GE(gen.tokens.size(), 3u);
  for (size_t back = 1; back <= gen.tokens.size(); ++back) {
    ASSERT_TRUE(m.rollback(1));
    m.fill_mask(mask.data());
    EXPECT_EQ(mask, masks[gen.tokens.size() - back]) << "after rolling back " << back;
  }
  EXPECT_FALSE(m.rollback(1));
  EXPECT_EQ(m.num_steps(), 0u);
}

TEST(Matcher, RefusedTokensLeaveTheStateUnchanged) {
  auto g = compile(GrammarKind::kRegex, "[a-z]+");
  Matcher m(g);
  const auto& vocab = g->vocabulary();
  int32_t mixed = -1;  // a token starting with a letter that then leaves [a-z]
  for (size_t i = 0; i < vocab.size() && mixed < 0; ++i) {
    std::string_view b = vocab.bytes(static_cast<int32_t>(i));
    if (b.size() > 1 && b[0] >= 'a' && b[0] <= 'z' && b.find_first_not_of("abcdefghijklmnopqrstuvwxyz") != std::string_view::npos) {
      mixed = static_cast<int32_t>(i);
    }
  }
  ASSERT_GE(mixed, 0);
  auto r = m.advance(mixed);
  ASSERT_FALSE(r);
  EXPECT_EQ(m.num_steps(), 0u);
  EXPECT_TRUE(m.accepts_string("ab"));
  EXPECT_FALSE(m.advance(-1));
  EXPECT_FALSE(m.advance(static_cast<int32_t>(vocab.size())));
  EXPECT_FALSE(m.advance(0));  // a special token decodes to nothing the grammar can take
}

// Walks of terminal states are shared by residual language, per root subtree of the token trie,
// and kept after the grammars that computed them are gone: a compiler that has seen other
// grammars must give the same masks as a fresh one.
TEST(Matcher, MasksSharedAcrossGrammarsEqualFreshOnes) {
  GrammarCompiler seasoned(testing::deepseek_vocabulary(), 0);
  for (const char* earlier : {R"({"type":"object","properties":{"name":{"type":"string","pattern":"^[a-z]+$"}}})",
                              R"({"type":"array","items":{"type":"string","maxLength":40}})", R"({"format":"email"})"}) {
    auto g = seasoned.compile(GrammarKind::kJsonSchema, earlier).value();
    Matcher m(g);
    std::vector<uint32_t> mask(g->vocabulary().mask_words());
    for (const char* text : {R"({"name":"abc"})", R"(["x@y.org","abcdefghij"])", R"("ab.c@example.com")"}) {
      m.reset();
      for (size_t i = 0; i < std::strlen(text) && m.advance_bytes(std::string_view(text + i, 1)); ++i) m.fill_mask(mask.data());
    }
  }
  const std::string later = R"({"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]+$"},)"
                            R"("mail":{"type":"string","format":"email","maxLength":60}},"additionalProperties":{"type":"string"}})";
  GrammarCompiler fresh(testing::deepseek_vocabulary(), 0);
  auto a = seasoned.compile(GrammarKind::kJsonSchema, later).value();
  auto b = fresh.compile(GrammarKind::kJsonSchema, later).value();
  const std::string text = R"({"id":"abc","mail":"x.y@example.org","name":"any \"thing\"","zz":""})";
  Matcher ma(a), mb(b);
  std::vector<uint32_t> mask_a(a->vocabulary().mask_words()), mask_b(mask_a.size());
  for (size_t i = 0; i <= text.size(); ++i) {
    ma.fill_mask(mask_a.data());
    mb.fill_mask(mask_b.data());
    ASSERT_EQ(mask_a, mask_b) << "after " << text.substr(0, i);
    if (i < text.size()) {
      ASSERT_TRUE(ma.advance_bytes(text.substr(i, 1))) << text.substr(0, i + 1);
      ASSERT_TRUE(mb.advance_bytes(text.substr(i, 1)));
    }
  }
  EXPECT_TRUE(ma.can_end());
}

TEST(GrammarCompiler, CachesBySpecAndOptions) {
  GrammarCompiler c(testing::byte_vocabulary(), 2);
  auto a = c.compile(GrammarKind::kRegex, "a+").value();
  EXPECT_EQ(c.compile(GrammarKind::kRegex, "a+").value(), a);
  GrammarOptions compact{Whitespace::kCompact, 0};
  auto b = c.compile(GrammarKind::kJsonSchema, "{}", compact).value();
  EXPECT_NE(c.compile(GrammarKind::kJsonSchema, "{}").value(), b);
  EXPECT_EQ(c.cached_grammars(), 2u);
  EXPECT_FALSE(c.compile(GrammarKind::kRegex, "(").has_value());
  EXPECT_FALSE(GrammarCompiler::validate(GrammarKind::kJsonSchema, "{\"not\":{}}").has_value());
}

}  // namespace
}  // namespace deepinfer::grammar
