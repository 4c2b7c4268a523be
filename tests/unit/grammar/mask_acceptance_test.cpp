// The mask equals acceptance: at every checked step, token i's mask bit is set exactly when
// advance(i) succeeds. Random walks over many schemas (hand-written, the benchmark's, random ones
// and the JSON-Schema-Test-Suite's) check every token of a reduced DeepSeek vocabulary at sampled
// steps; the reduced vocabulary keeps the JSON punctuation tokens (`"}`, `]}`, `",` ...) where the
// precomputed parts of a mask differ most from a token-by-token check.
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "random_generation.h"
#include "random_schema.h"
#include "test_vocabularies.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace deepinfer::grammar {
namespace {

using Json = nlohmann::ordered_json;

bool bit(const std::vector<uint32_t>& mask, int32_t id) { return (mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u; }

int32_t token_of(const TokenVocabulary& vocab, std::string_view bytes) {
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (vocab.bytes(static_cast<int32_t>(i)) == bytes) return static_cast<int32_t>(i);
  }
  return -1;
}

// Every token of the vocabulary: the mask bit against advance (state restored after each).
// Returns the number of disagreements (the first few are reported).
int check_all_tokens(Matcher& m, const std::string& where) {
  const TokenVocabulary& vocab = m.compiled().vocabulary();
  std::vector<uint32_t> mask(vocab.mask_words());
  m.fill_mask(mask.data());
  int bad = 0;
  for (size_t i = 0; i < vocab.size(); ++i) {
    auto id = static_cast<int32_t>(i);
    bool accepted = m.advance(id).has_value();
    if (accepted) {
      EXPECT_TRUE(m.rollback(1));
    }
    if (accepted != bit(mask, id) && ++bad <= 3) {
      ADD_FAILURE() << where << ": token " << id << " '" << vocab.bytes(id) << "' mask " << bit(mask, id) << ", accepted " << accepted;
    }
  }
  return bad;
}

// All one-byte tokens, every DeepSeek token made only of JSON punctuation, digits, quotes and
// whitespace, the longest ones (they set how far a length bound's window reaches), and a fixed
// sample of the others (~6,000 tokens: each full check is cheap).
std::shared_ptr<const TokenVocabulary> reduced_vocabulary() {
  static std::shared_ptr<const TokenVocabulary> vocab = [] {
    auto full = testing::deepseek_vocabulary();
    std::vector<std::string> bytes;
    std::vector<int32_t> eos;
    std::mt19937_64 rng(7);
    for (size_t i = 0; i < full->size(); ++i) {
      auto id = static_cast<int32_t>(i);
      std::string_view b = full->bytes(id);
      bool keep = full->is_eos(id) || b.size() == 1 ||
                  (!b.empty() && b.find_first_not_of("{}[]\":,0123456789.-+eE \n\t\\/ntrufalse") == std::string_view::npos) ||
                  b.size() >= 48 || rng() % 32 == 0;
      if (!keep) continue;
      if (full->is_eos(id)) eos.push_back(static_cast<int32_t>(bytes.size()));
      bytes.emplace_back(b);
    }
    return TokenVocabulary::create(std::move(bytes), std::move(eos)).value();
  }();
  return vocab;
}

TEST(MaskAcceptance, ObjectWithManyPropertiesAfterAnAdditionalValue) {
  // The context-free precompute overflowed its item limit at these ends of a value and left the
  // tokens out of the mask although the parser accepts them.
  std::string schema = R"({"type":"object","properties":{)";
  for (int i = 0; i < 294; ++i) schema += fmt::format("{}\"p{}\":{{}}", i ? "," : "", i);
  schema += "}}";
  GrammarCompiler compiler(testing::deepseek_vocabulary());
  auto g = compiler.compile(GrammarKind::kJsonSchema, schema);
  ASSERT_TRUE(g) << g.error().message;
  const auto& vocab = g.value()->vocabulary();
  std::vector<uint32_t> mask(vocab.mask_words());
  for (auto [prefix, token] : {std::pair{R"({"zz":"abc)", "\"}"}, std::pair{R"({"zz":[1)", "]}"}}) {
    Matcher m(g.value());
    ASSERT_TRUE(m.advance_bytes(prefix)) << prefix;
    int32_t id = token_of(vocab, token);
    ASSERT_GE(id, 0) << token;
    m.fill_mask(mask.data());
    bool accepted = m.advance(id).has_value();
    EXPECT_TRUE(accepted) << prefix << token;
    EXPECT_EQ(bit(mask, id), accepted) << prefix << " then " << token;
  }
}

TEST(MaskAcceptance, PositionsOfBoundedRepetitionsThatShareShortWalks) {
  // A hostname label's positions (and a bounded pattern's) that agree on all short strings share
  // one walk of the short tokens (bounded_classes); strings with a minimum length only reuse the
  // string body's mask. Every position must still get its own mask, up to and across the bounds:
  // every byte position of each text is checked with every token.
  const std::string label63 = "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0";
  const std::pair<const char*, std::string> cases[] = {
      {R"({"type":"string","format":"hostname"})", "\"" + label63 + ".a-b" + label63.substr(0, 20) + "\""},
      {R"({"type":"string","format":"hostname","maxLength":70})", "\"" + label63.substr(0, 40) + "." + label63.substr(0, 28) + "\""},
      {R"({"type":"string","pattern":"^[a-z0-9]{0,40}x$"})", "\"" + label63.substr(0, 40) + "x\""},
      {R"({"type":"string","pattern":"^[a-z]{0,20}x$"})", "\"" + label63.substr(0, 20) + "x\""},
      {R"({"type":"string","pattern":"^(ab){0,30}c$","minLength":12})", "\"abababababababababababc\""},
      // Only the minimum matters: the string body's mask with its exits filtered by the count.
      {R"({"type":"string","minLength":5})", "\"a\\u00e9\\\"cdef\""},
      {R"({"type":"object","additionalProperties":{"type":"string","minLength":3}})", "{\"k\":\"x\\ny\",\"l\":\"\\u0041bc\"}"},
  };
  GrammarCompiler compiler(reduced_vocabulary());
  for (const auto& [schema, text] : cases) {
    auto g = compiler.compile(GrammarKind::kJsonSchema, schema);
    ASSERT_TRUE(g) << schema << ": " << g.error().message;
    int failures = 0;
    for (size_t end = 0; end < text.size() && failures == 0; ++end) {
      Matcher m(g.value());
      ASSERT_TRUE(m.advance_bytes(text.substr(0, end))) << schema << " " << text.substr(0, end);
      failures += check_all_tokens(m, fmt::format("{} after '{}'", schema, text.substr(0, end)));
    }
    EXPECT_EQ(failures, 0) << schema;
  }
}

TEST(MaskAcceptance, ObjectKeysSplitIntoPatternPropertyRegions) {
  // Keys split into regions (in one pattern and not another, ...) are several terminals whose
  // first masks are taken together from one walk of their union, each then filtering the union's
  // exits (Matcher::compute_mask). A fresh compiler per schema, so that no walk is known yet.
  const std::pair<const char*, std::string> cases[] = {
      {R"({"patternProperties":{"[0-9]{2,}":{"type":"boolean"},"X_":{"type":"string"}}})", R"({"a31b":true,"X_":"x","X_9":"s","q":null})"},
      {R"({"patternProperties":{"f.*o":{"type":"integer"}}})", R"({"foo":1,"bar":"b","fo":2,"o":[]})"},
      {R"({"properties":{"foo":{"type":"array","maxItems":3},"bar":{"type":"array"}},"patternProperties":{"f.o":{"minItems":2}},
          "additionalProperties":{"type":"integer"}})",
       R"({"foo":[1,2],"bar":[],"fxo":[1,2],"quux":3})"},
      {R"({"patternProperties":{"a*":{"type":"integer"},"aaa*":{"maximum":20}}})", R"({"aaaa":18,"":1,"b":2})"},
      {R"({"patternProperties":{"^v":{}},"properties":{"foo":{},"bar":{}},"additionalProperties":false})", R"({"foo":1,"vx":2})"},
  };
  for (const auto& [schema, text] : cases) {
    GrammarCompiler compiler(reduced_vocabulary());
    auto g = compiler.compile(GrammarKind::kJsonSchema, schema);
    ASSERT_TRUE(g) << schema << ": " << g.error().message;
    int failures = 0;
    for (size_t end = 0; end < text.size() && failures == 0; ++end) {
      Matcher m(g.value());
      ASSERT_TRUE(m.advance_bytes(text.substr(0, end))) << schema << " " << text.substr(0, end);
      failures += check_all_tokens(m, fmt::format("{} after '{}'", schema, text.substr(0, end)));
    }
    EXPECT_EQ(failures, 0) << schema;
  }
}

// Random walks: at a few sampled steps of each generation, every token is checked.
void walk_and_check(GrammarCompiler& compiler, const std::string& schema, std::mt19937_64& rng, int* checks, int* failures) {
  auto g = compiler.compile(GrammarKind::kJsonSchema, schema);
  if (!g) return;  // unsupported schemas are not this test's business
  Matcher m(g.value());
  int step = 0;
  auto out = testing::generate(m, rng, 60, [&](const uint32_t*) {
    if (step++ % 7 != 3 || *failures > 0) return;
    ++*checks;
    *failures += check_all_tokens(m, fmt::format("{} after '{}'", schema.substr(0, 120), "<walk>"));
  });
  EXPECT_EQ(out.text.find("<advance failed"), std::string::npos) << schema << ": " << out.text;
}

TEST(MaskAcceptance, RandomWalksOnManySchemas) {
  GrammarCompiler compiler(reduced_vocabulary());
  std::mt19937_64 rng(2024);
  std::vector<std::string> schemas = {
      R"({})",
      R"({"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"array","items":{"type":"integer"},"minItems":1}},"required":["b"]})",
      R"({"type":"array","items":{"anyOf":[{"type":"string","format":"date"},{"type":"null"},{"enum":["a b","c\"d",3]}]},"maxItems":5})",
      R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"number"},"k":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["v"]}},"$ref":"#/$defs/n"})",
      R"({"type":"object","patternProperties":{"^x":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})",
      R"({"type":"string","pattern":"^[a-z]+(-[0-9]{2})?$","minLength":2,"maxLength":9})",
      R"({"type":"number","minimum":-2.5,"maximum":1000,"multipleOf":0.5})",
      R"({"type":"array","items":{"type":"string","maxLength":300,"pattern":"^[a-z ]*$"},"minItems":2,"maxItems":100000})",
      R"({"type":"object","additionalProperties":{"type":"string","minLength":3,"format":"email"},"maxProperties":1000})",
      R"({"type":"array","contains":{"type":"boolean"},"minContains":2,"items":{"enum":[true,false,null,"x\u00e9"]}})",
      R"({"type":"object","properties":{"kind":{"enum":["a","b"]},"n":{"type":"integer","not":{"const":0}}},"required":["kind"],
          "if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["n"]},"dependentRequired":{"n":["kind"]}})",
      R"({"oneOf":[{"type":"object","properties":{"op":{"const":"add"},"x":{"type":"number"}}},
          {"type":"object","properties":{"op":{"const":"neg"},"y":{"type":"string","not":{"pattern":"^-"}}}}]})",
      R"({"type":"array","items":{"enum":["r","g","b",1,null]},"uniqueItems":true})",
  };
  {
    std::string many = R"({"type":"object","properties":{)";
    for (int i = 0; i < 294; ++i) many += fmt::format("{}\"p{}\":{{}}", i ? "," : "", i);
    schemas.push_back(many + "}}");
  }
  std::ifstream bench(std::string(DI_BENCH_DIR) + "/grammar_schemas.json");
  for (const auto& s : Json::parse(bench)) schemas.push_back(s["schema"].dump());
  for (int i = 0; i < 12; ++i) schemas.push_back(testing::random_schema(rng).dump());
  // Every 12th schema of the JSON-Schema-Test-Suite.
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(DI_GOLDEN_DIR) / "json-schema-test-suite" / "draft2020-12")) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  size_t n = 0;
  for (const auto& f : files) {
    for (const auto& c : Json::parse(std::ifstream(f))) {
      if (n++ % 12 == 0) schemas.push_back(c["schema"].dump());
    }
  }
  int checks = 0, failures = 0;
  for (const auto& s : schemas) walk_and_check(compiler, s, rng, &checks, &failures);
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checks, 100);
}

}  // namespace
}  // namespace deepinfer::grammar
