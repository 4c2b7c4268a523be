// Structured outputs through the engine: generations sampled from the demo model under random JSON
// Schemas, regular expressions and EBNF grammars always match (every finished output validates,
// checked independently by python3-jsonschema and PCRE2; an output cut by max_tokens is a valid
// prefix); constrained and unconstrained requests share batches without affecting each other.
#include "engine_test_util.h"
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "random_schema.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace deepinfer {
namespace {

using testing::collect;
using testing::demo_config;

struct Request {
  grammar::GrammarKind kind;
  std::string spec;
  std::shared_ptr<const grammar::CompiledGrammar> compiled;
  std::shared_ptr<Session> session;
};

std::string output_text(const Engine& e, const std::vector<int32_t>& ids) {
  auto text = e.tokenizer().value()->decode(ids, /*skip_special=*/true);
  EXPECT_TRUE(text);
  return text ? text.value() : std::string();
}

bool pcre2_full_match(const std::string& pattern, const std::string& subject) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED,
                                 &err, &offset, nullptr);
  if (!re) return false;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  const int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  pcre2_code_free(re);
  return rc >= 0;
}

TEST(StructuredGeneration, EveryOutputMatchesItsConstraint) {
  auto e = testing::open_engine(demo_config());
  std::mt19937_64 rng(2026);
  std::vector<Request> requests;
  for (int i = 0; i < 10; ++i) requests.push_back({grammar::GrammarKind::kJsonSchema, grammar::testing::random_schema(rng).dump(), nullptr, nullptr});
  for (const char* re : {"[a-z]{3,8}@[a-z]{2,6}\\.(com|org)", "(0|[1-9][0-9]{0,5})(\\.[0-9]{1,3})?", "(yes|no|maybe)",
                         "[A-Z][a-z]+( [A-Z][a-z]+){0,3}", "\\d{4}-\\d{2}-\\d{2}"})
    requests.push_back({grammar::GrammarKind::kRegex, re, nullptr, nullptr});
  requests.push_back({grammar::GrammarKind::kEbnf, "root ::= \"(\" list \")\"\nlist ::= item (\",\" item)*\nitem ::= [0-9]+ | root", nullptr, nullptr});

  int compiled = 0;
  for (auto& r : requests) {
    auto g = e->compile_grammar(r.kind, r.spec, {});
    if (!g) {  // random schemas may use a feature that cannot be enforced: a clear error, never looser
      EXPECT_EQ(g.error().code, Code::kGrammar) << g.error().message << "\n" << r.spec;
      continue;
    }
    ++compiled;
    r.compiled = g.value();
    r.session = e->create_session().value();
    ASSERT_TRUE(r.session->add_text("Output: ", text::EncodeMode::kPlainText));
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = static_cast<uint64_t>(compiled);
    p.max_tokens = 200;
    p.n = 2;
    auto s = r.session->generate(p, r.compiled);
    ASSERT_TRUE(s) << s.error().message;
  }
  ASSERT_GE(compiled, 12);

  const auto jsonl = std::filesystem::temp_directory_path() / ("di_structured_" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream out(jsonl);
  int finished = 0, cut = 0;
  for (auto& r : requests) {
    if (!r.session) continue;
    auto o = collect(*r.session);
    ASSERT_EQ(o.finished.size(), 2u);
    for (const auto& [i, done] : o.finished) {
      const std::string text = output_text(*e, o.tokens[i]);
      grammar::Matcher m(r.compiled);
      if (done.reason == FinishReason::kLength) {  // cut short: still a prefix the grammar allows
        ++cut;
        EXPECT_TRUE(m.advance_bytes(text)) << r.spec << "\n" << text;
        continue;
      }
      ASSERT_EQ(done.reason, FinishReason::kStop) << (done.error ? done.error->message : "");
      ++finished;
      EXPECT_TRUE(m.accepts_string(text)) << r.spec << "\n" << text;
      if (r.kind == grammar::GrammarKind::kJsonSchema) {
        out << nlohmann::json{{"schema", nlohmann::json::parse(r.spec)}, {"output", text}}.dump() << "\n";
      } else if (r.kind == grammar::GrammarKind::kRegex) {
        EXPECT_TRUE(pcre2_full_match(r.spec, text)) << r.spec << "\n" << text;
      }
    }
  }
  out.close();
  EXPECT_GT(finished, cut) << "most outputs should complete within max_tokens";
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "python3-jsonschema missing: independent validation skipped";
  const std::string cmd = "/usr/bin/python3 " DI_GRAMMAR_VALIDATOR " " + jsonl.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "some JSON outputs do not validate (see above)";
  std::filesystem::remove(jsonl);
}

TEST(StructuredGeneration, ConstrainedAndFreeRequestsShareBatchesIndependently) {
  auto e = testing::open_engine(demo_config());
  std::mt19937 rng(8);
  const auto prompt = testing::random_prompt(rng, 40, *e);
  SamplingParams free_params;
  free_params.seed = 11;
  free_params.max_tokens = 24;
  free_params.ignore_eos = true;
  const auto alone = testing::generate_alone(*e, prompt, free_params).tokens.at(0);

  auto g = e->compile_grammar(grammar::GrammarKind::kRegex, "[0-9]{30,40}", {});
  ASSERT_TRUE(g) << g.error().message;
  std::vector<std::shared_ptr<Session>> constrained;
  for (int i = 0; i < 4; ++i) {
    auto s = e->create_session().value();
    ASSERT_TRUE(s->add_tokens(testing::random_prompt(rng, 10 + 7 * i, *e)));
    SamplingParams p;
    p.seed = 100 + i;
    p.max_tokens = 60;
    ASSERT_TRUE(s->generate(p, g.value()));
    constrained.push_back(s);
  }
  auto free_session = e->create_session().value();
  ASSERT_TRUE(free_session->add_tokens(prompt));
  ASSERT_TRUE(free_session->generate(free_params));
  EXPECT_EQ(collect(*free_session).tokens.at(0), alone);
  for (auto& s : constrained) {
    auto o = collect(*s);
    const std::string text = output_text(*e, o.tokens.at(0));
    EXPECT_EQ(o.finished.at(0).reason, FinishReason::kStop);
    EXPECT_TRUE(pcre2_full_match("[0-9]{30,40}", text)) << text;
  }
}

TEST(StructuredGeneration, GrammarFromAnotherVocabularyIsRejectedAtSubmission) {
  auto e = testing::open_engine(demo_config());
  auto other = grammar::TokenVocabulary::create({"a", "b"}, {});
  ASSERT_TRUE(other);
  grammar::GrammarCompiler compiler(other.value());
  auto g = compiler.compile(grammar::GrammarKind::kRegex, "a+", {});
  ASSERT_TRUE(g);
  auto s = e->create_session().value();
  ASSERT_TRUE(s->add_tokens(std::vector<int32_t>{5, 6, 7}));
  auto r = s->generate(SamplingParams{}, g.value());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer
