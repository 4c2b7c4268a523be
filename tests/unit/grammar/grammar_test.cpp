// GrammarBuilder normalization: the grammar the parser sees.
#include "grammar/grammar.h"
#include "grammar/regex_parser.h"

#include <gtest/gtest.h>

namespace deepinfer::grammar {
namespace {

uint32_t terminal(GrammarBuilder& b, const char* pattern) { return b.add_regex_terminal(parse_ecmascript_regex(pattern).value()).value(); }

TEST(GrammarBuilder, NormalizesTerminalsAndPrunesUselessRules) {
  GrammarBuilder b;
  uint32_t root = b.add_rule("root");
  uint32_t dead = b.add_rule("dead");          // only derives itself: unproductive
  uint32_t unused = b.add_rule("unused");      // never referenced
  uint32_t ws = terminal(b, "[ ]*");           // matches the empty string
  uint32_t word = terminal(b, "[a-z]+");
  EXPECT_EQ(terminal(b, "(?:[a-z])+"), word);  // same language, same terminal
  b.add_production(root, {Symbol::term(word), Symbol::term(ws), Symbol::term(word)});
  b.add_production(root, {Symbol::rule(dead)});
  b.add_production(dead, {Symbol::rule(dead), Symbol::term(word)});
  b.add_production(unused, {Symbol::term(word)});
  auto g = b.build(root);
  ASSERT_TRUE(g) << g.error().message;
  // The empty-matching terminal became an optional rule over its non-empty part.
  EXPECT_EQ(g.value().to_string(), "root ::= t0 optional0 t0\noptional0 ::= t1\noptional0 ::=\n");
  EXPECT_EQ(g.value().num_rules(), 2u);
  EXPECT_TRUE(g.value().nullable(1));
  EXPECT_FALSE(g.value().nullable(0));
}

TEST(GrammarBuilder, RefusesAnEmptyLanguage) {
  GrammarBuilder b;
  uint32_t root = b.add_rule("root");
  b.add_production(root, {Symbol::term(terminal(b, "[]"))});
  auto g = b.build(root);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().code, Code::kGrammar);
}

}  // namespace
}  // namespace deepinfer::grammar
