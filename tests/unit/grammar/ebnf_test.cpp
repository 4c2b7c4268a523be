// GBNF-compatible EBNF: syntax, errors, and the languages of a few classic grammars.
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "random_generation.h"
#include "test_vocabularies.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>

namespace deepinfer::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> compile(const std::string& ebnf) {
  static GrammarCompiler compiler(testing::byte_vocabulary());
  auto g = compiler.compile(GrammarKind::kEbnf, ebnf);
  EXPECT_TRUE(g) << (g ? "" : g.error().message);
  return g ? g.value() : nullptr;
}

void expect_language(const std::string& ebnf, const std::vector<std::string>& yes, const std::vector<std::string>& no) {
  auto g = compile(ebnf);
  ASSERT_TRUE(g);
  Matcher m(g);
  for (const auto& s : yes) EXPECT_TRUE(m.accepts_string(s)) << "should accept '" << s << "'\n" << ebnf;
  for (const auto& s : no) EXPECT_FALSE(m.accepts_string(s)) << "should reject '" << s << "'\n" << ebnf;
}

const char* kLlamaCppJson = R"g(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)g";

TEST(Ebnf, LlamaCppJsonGrammar) {
  expect_language(kLlamaCppJson, {"{}", "{\"a\": [1, 2.5, true, null]}", "{\"k\":{\"n\":\"\\u00e9\\n\"}}", "{ }"},
                  {"", "[]", "{\"a\":}", "{\"a\" 1}", "{\"a\":01}", "{\"a\":\"\x01\"}"});
}

TEST(Ebnf, ArithmeticWithLeftRecursionAndRepetition) {
  const char* g = R"g(
root ::= expr
expr ::= expr ("+" | "-") term | term
term ::= term "*" factor | factor
factor ::= [0-9]+ | "(" expr ")"
)g";
  expect_language(g, {"1", "1+2*3", "(1+2)*3-4", "((7))"}, {"", "1+", "(1", "1**2", "+1"});
}

TEST(Ebnf, BoundedRepetitionClassesAndEscapes) {
  expect_language(R"g(root ::= "a"{2,3} [^x-z]? "\u00e9" "\x41" [\]] . ("-" x){1,})g" "\n" R"g(x ::= "q" | "\"")g",
                  {"aaéA]!-q", "aaaéA]中-q-\""}, {"aéA]!-q", "aaaxéA]!-q", "aaéA]!"});
  expect_language("root ::= ( \"ab\" | \"a\" ) \"b\"*", {"a", "ab", "abbb"}, {"", "ba"});
  expect_language("root ::= item+\nitem ::= [a-c] | \"<\" root \">\"", {"a", "a<bc>", "<<a>>c"}, {"<>", "<a", "d"});
}

TEST(Ebnf, StackedQuantifiersMeanOne) {
  // (x+)* is x*, (x?)+ is x*, (x+)+ is x+, (x?)? is x?: one repetition, not nested ones (the
  // fuzzer's `item+++...*+++` took 1.7 s and 300 MB to compile, and matching it explored every
  // way of splitting a run between the nested repetitions).
  expect_language("root ::= [a-c]+* \"x\"", {"x", "ax", "abcabx"}, {"", "a", "dx"});
  expect_language("root ::= [a-c]?+ \"x\"", {"x", "ax", "abcabx"}, {"", "a"});
  expect_language("root ::= [a-c]++++++++++++++++*?+ \"x\"", {"x", "ax", "cccx"}, {"a"});
  expect_language("root ::= [a-c]+++ \"x\"", {"ax", "abcx"}, {"x"});
  expect_language("root ::= [a-c]?? \"x\"", {"x", "ax"}, {"abx"});
  expect_language("root ::= [a-c]{2}+ \"x\"", {"abx", "abcax"}, {"ax", "abcx"});  // not simple: kept nested
  expect_language("root ::= item+++++*+++\nitem ::= [a-c] | \"<\" root \">\"", {"", "a", "a<bc>", "<<a>>c"}, {"<a", "d"});
}

TEST(Ebnf, ErrorsNameTheProblem) {
  struct Case {
    const char* src;
    const char* needle;
  } cases[] = {{"rot ::= \"a\"", "no 'root'"},
               {"root ::= foo", "undefined rule 'foo'"},
               {"root ::= \"a", "unterminated string"},
               {"root ::= [a", "unterminated character class"},
               {"root ::= (\"a\"", "expected ')'"},
               {"root ::= \"a\"{3,1}", "out of order"},
               {"root ::= \"a\" \nroot ::= \"b\"", "defined twice"},
               {"root ::= x\nx ::= x \"a\"", "matches no string"}};
  for (const auto& c : cases) {
    auto r = GrammarCompiler::validate(GrammarKind::kEbnf, c.src);
    ASSERT_FALSE(r) << c.src;
    EXPECT_EQ(r.error().code, Code::kGrammar);
    EXPECT_NE(r.error().message.find(c.needle), std::string::npos) << r.error().message;
  }
}

// An ambiguous grammar makes Earley sets grow with the input; the work bound turns that into an
// error instead of ever slower steps.
TEST(Ebnf, AmbiguityIsBoundedByTheParserWorkLimit) {
  auto g = compile("root ::= item*\nitem ::= [a-z ]+ | \"(\" root \")\"");
  ASSERT_TRUE(g);
  Matcher m(g);
  ASSERT_TRUE(m.advance_bytes(std::string(100, 'a')));
  Result<void> r = ok();
  for (int i = 0; i < 100 && r; ++i) r = m.advance_bytes(std::string(100, 'b'));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kCapacity);
  EXPECT_TRUE(m.accepts_string(""));  // the state before the refused step is intact
}

// Outputs generated under llama.cpp's JSON grammar on the DeepSeek vocabulary parse as JSON
// (checked by Python's json module: nlohmann refuses numbers beyond double range).
TEST(RandomGeneration, EbnfJsonOutputsParse) {
  if (std::system("/usr/bin/python3 -c 'import jsonschema' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-jsonschema is not installed";
  }
  GrammarCompiler compiler(testing::deepseek_vocabulary());
  auto g = compiler.compile(GrammarKind::kEbnf, kLlamaCppJson);
  ASSERT_TRUE(g) << g.error().message;
  std::mt19937_64 rng(3);
  int outputs = 0;
  std::filesystem::path jsonl = std::filesystem::temp_directory_path() / ("di_ebnf_outputs_" + std::to_string(getpid()) + ".jsonl");
  std::ofstream file(jsonl);
  for (int run = 0; run < 40; ++run) {
    Matcher m(g.value());
    auto out = testing::generate(m, rng, 200);
    ASSERT_EQ(out.text.find("<advance failed"), std::string::npos) << out.text;
    if (!out.terminated) continue;
    ++outputs;
    file << nlohmann::json{{"schema", nlohmann::json::object()}, {"output", out.text}}.dump() << "\n";
  }
  file.close();
  std::string cmd = std::string("/usr/bin/python3 ") + DI_GRAMMAR_TEST_DIR + "/validate_outputs.py " + jsonl.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::filesystem::remove(jsonl);
  EXPECT_GT(outputs, 30);
}

}  // namespace
}  // namespace deepinfer::grammar
