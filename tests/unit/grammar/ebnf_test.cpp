// GBNF-compatible EBNF: syntax, errors, and the languages of a few classic grammars.
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "test_vocabularies.h"

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

TEST(Ebnf, LlamaCppJsonGrammar) {
  const char* json = R"g(
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
  expect_language(json, {"{}", "{\"a\": [1, 2.5, true, null]}", "{\"k\":{\"n\":\"\\u00e9\\n\"}}", "{ }"},
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

}  // namespace
}  // namespace deepinfer::grammar
