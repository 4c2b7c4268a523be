// Hostile specs: nesting, size and complexity never crash or stall the compiler — they compile
// (when legitimate) or fail with a kGrammar error naming the problem. Deep nesting is compiled on a
// thread with a 256 KB stack, a small stack for a host application's worker thread.
#include "grammar/compile_budget.h"
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "test_vocabularies.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <pthread.h>

#include <functional>

namespace deepinfer::grammar {
namespace {

// Runs `fn` on a thread with a `stack_bytes` stack and waits for it.
void run_with_stack(size_t stack_bytes, const std::function<void()>& fn) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, stack_bytes), 0);
  pthread_t thread;
  auto body = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, body, const_cast<std::function<void()>*>(&fn)), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

constexpr size_t kSmallStack = 256 * 1024;

Result<void> validate_on_small_stack(GrammarKind kind, const std::string& spec) {
  Result<void> result = ok();
  run_with_stack(kSmallStack, [&] { result = GrammarCompiler::validate(kind, spec); });
  return result;
}

void expect_grammar_error(const Result<void>& r, const std::string& needle) {
  ASSERT_FALSE(r) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(r.error().code, Code::kGrammar) << r.error().message;
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
}

std::string nest(const std::string& open, const std::string& inner, const std::string& close, int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  s += inner;
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

TEST(HostileSchema, DeepNestingIsAnErrorNotACrash) {
  for (int depth : {600, 3000}) {
    expect_grammar_error(validate_on_small_stack(GrammarKind::kJsonSchema, nest(R"({"items":)", "{}", "}", depth)), "too deep");
    expect_grammar_error(validate_on_small_stack(GrammarKind::kJsonSchema, nest(R"({"properties":{"a":)", "{}", "}}", depth)),
                         "too deep");
    expect_grammar_error(validate_on_small_stack(GrammarKind::kJsonSchema, nest(R"({"anyOf":[{"type":"null"},)", "{}", "]}", depth)),
                         "too deep");
    expect_grammar_error(validate_on_small_stack(GrammarKind::kJsonSchema, R"({"const":)" + nest("[", "1", "]", depth) + "}"),
                         "too deep");
    expect_grammar_error(validate_on_small_stack(GrammarKind::kJsonSchema, R"({"enum":[)" + nest(R"({"a":)", "1", "}", depth) + "]}"),
                         "too deep");
  }
}

TEST(HostileSchema, LongReferenceChainsCompileWithoutRecursion) {
  // A chain of definitions, each an array of the next, nests 3,000 deep without deep JSON: the
  // compiler walks it with loops, so it compiles even on a small stack.
  std::string defs = R"({"$ref":"#/$defs/d0","$defs":{)";
  for (int i = 0; i < 3000; ++i) defs += fmt::format(R"({}"d{}":{{"items":{{"$ref":"#/$defs/d{}"}}}})", i ? "," : "", i, i + 1);
  defs += R"(,"d3000":{"type":"integer"}}})";
  auto r = validate_on_small_stack(GrammarKind::kJsonSchema, defs);
  EXPECT_TRUE(r) << r.error().message;
  // Pure $ref chains too.
  std::string refs = R"({"$ref":"#/$defs/d0","$defs":{)";
  for (int i = 0; i < 3000; ++i) refs += fmt::format(R"({}"d{}":{{"$ref":"#/$defs/d{}"}})", i ? "," : "", i, i + 1);
  refs += R"(,"d3000":{"type":"integer"}}})";
  r = validate_on_small_stack(GrammarKind::kJsonSchema, refs);
  EXPECT_TRUE(r) << r.error().message;
  // An enum whose values are checked against the whole chain: a clear error, not a crash.
  std::string checked = R"({"enum":[1,"a"],)" + refs.substr(1);
  expect_grammar_error(validate_on_small_stack(GrammarKind::kJsonSchema, checked), "nest too deep");
}

TEST(HostileSchema, NestingAtTheLimitCompilesOnASmallStack) {
  // At the JSON depth limit (128 levels of objects and arrays): arrays of arrays..., objects of
  // objects..., anyOf in anyOf..., each ending in a pattern nested as deep as a regex may; const and
  // enum values as deep.
  constexpr int kLimit = 128;
  auto expect_ok = [](const Result<void>& r) { EXPECT_TRUE(r) << r.error().message; };
  std::string deep_pattern = R"({"type":"string","pattern":")" + nest("(a|b", "c", ")", 200) + R"("})";
  expect_ok(validate_on_small_stack(GrammarKind::kJsonSchema, nest(R"({"items":)", deep_pattern, "}", kLimit - 1)));
  expect_ok(validate_on_small_stack(GrammarKind::kJsonSchema, nest(R"({"properties":{"a":)", deep_pattern, "}}", (kLimit - 1) / 2)));
  expect_ok(validate_on_small_stack(GrammarKind::kJsonSchema, nest(R"({"anyOf":[{"type":"null"},)", deep_pattern, "]}", (kLimit - 1) / 2)));
  expect_ok(validate_on_small_stack(GrammarKind::kJsonSchema, R"({"const":)" + nest("[", "1", "]", kLimit - 1) + "}"));
  expect_ok(validate_on_small_stack(GrammarKind::kJsonSchema, R"({"enum":[)" + nest(R"({"a":)", "1", "}", kLimit - 2) + "]}"));
  expect_grammar_error(validate_on_small_stack(GrammarKind::kJsonSchema, R"({"const":)" + nest("[", "1", "]", kLimit) + "}"), "too deep");
}

TEST(HostileRegex, NestingAtTheLimitOnASmallStack) {
  // Groups alternating with sequences so that nothing flattens: (a|b(a|b(...))).
  EXPECT_TRUE(validate_on_small_stack(GrammarKind::kRegex, nest("(a|b", "c", ")", 200)));
  expect_grammar_error(validate_on_small_stack(GrammarKind::kRegex, nest("(a|b", "c", ")", 201)), "too deep");
  expect_grammar_error(validate_on_small_stack(GrammarKind::kRegex, nest("(", "a", ")", 100000)), "too deep");
}

TEST(HostileEbnf, NestingAtTheLimitOnASmallStack) {
  // 100 levels (the parser's limit), with a non-regular body so that the lowering recurses too.
  EXPECT_TRUE(validate_on_small_stack(GrammarKind::kEbnf, "root ::= " + nest("(\"a\" | \"b\" ", "\"c\"", ")", 100)));
  EXPECT_TRUE(validate_on_small_stack(GrammarKind::kEbnf, "root ::= " + nest("(\"a\" | \"b\" ", "root", ")", 100)));
  expect_grammar_error(validate_on_small_stack(GrammarKind::kEbnf, "root ::= " + nest("(\"a\" | \"b\" ", "\"c\"", ")", 101)), "too deep");
  expect_grammar_error(validate_on_small_stack(GrammarKind::kEbnf, "root ::= " + nest("(", "\"a\"", ")", 100000)), "too deep");
}

}  // namespace
}  // namespace deepinfer::grammar

namespace deepinfer::grammar {
namespace {

TEST(HostileSchema, ReferenceErrorsAreGrammarErrors) {
  // An array index beyond any integer type in a $ref pointer (it threw std::out_of_range).
  expect_grammar_error(GrammarCompiler::validate(GrammarKind::kJsonSchema, R"({"$defs":{"a":[{}]},"$ref":"#/$defs/a/99999999999999999999999"})"),
                       "does not resolve");
  // A schema that is only a reference to itself, or a cycle of references, has no meaning (it
  // compiled to "any JSON value").
  expect_grammar_error(GrammarCompiler::validate(GrammarKind::kJsonSchema, R"({"$ref":"#"})"), "refers to itself");
  expect_grammar_error(
      GrammarCompiler::validate(GrammarKind::kJsonSchema, R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"})"),
      "refers to itself");
  expect_grammar_error(GrammarCompiler::validate(GrammarKind::kJsonSchema, R"({"anyOf":[{"type":"string"},{"$ref":"#"}]})"), "refers to itself");
  // Recursion through a keyword that descends into the instance is fine.
  EXPECT_TRUE(GrammarCompiler::validate(GrammarKind::kJsonSchema, R"({"type":"array","items":{"$ref":"#"}})"));
}

}  // namespace
}  // namespace deepinfer::grammar

namespace deepinfer::grammar {
namespace {

// These shapes took from tens of seconds to minutes (or 1 GB) to compile; each is legitimate and
// now compiles in well under a second, or fails at once with a clear error.
TEST(HostileCompileTime, ReferencesToTheSameSchemaShareOneExpansion) {
  std::string defs = R"({"$ref":"#/$defs/l0","$defs":{)";
  for (int i = 0; i < 20; ++i) defs += fmt::format(R"("l{}":{{"anyOf":[{{"$ref":"#/$defs/l{}"}},{{"$ref":"#/$defs/l{}"}}]}},)", i, i + 1, i + 1);
  defs += R"("l20":{"type":"integer"}}})";
  GrammarCompiler compiler(testing::byte_vocabulary(), 0);
  auto g = compiler.compile(GrammarKind::kJsonSchema, defs);
  ASSERT_TRUE(g) << g.error().message;
  Matcher m(g.value());
  EXPECT_TRUE(m.accepts_string("12"));
  EXPECT_FALSE(m.accepts_string("\"a\""));
  EXPECT_LT(g.value()->grammar().num_rules(), 200u);
}

TEST(HostileCompileTime, LongEbnfRuleChains) {
  for (int n : {1000, 10000}) {
    std::string src = "root ::= r0\n";
    for (int i = 0; i < n; ++i) src += fmt::format("r{} ::= \"x\" r{} | \"y\"\n", i, i + 1);
    src += fmt::format("r{} ::= \"z\"\n", n);
    Result<void> r = ok();
    run_with_stack(kSmallStack, [&] { r = GrammarCompiler::validate(GrammarKind::kEbnf, src); });
    ASSERT_TRUE(r) << r.error().message;
    auto g = build_grammar(GrammarKind::kEbnf, src, {});
    ASSERT_TRUE(g);
    auto compiled = std::make_shared<const CompiledGrammar>(std::move(g.value()), testing::byte_vocabulary(),
                                                            *TerminalMaskTable::create(testing::byte_vocabulary()));
    Matcher m(compiled);
    EXPECT_TRUE(m.accepts_string("xxxy"));
    EXPECT_TRUE(m.accepts_string(std::string(500, 'x') + "y"));
    EXPECT_FALSE(m.accepts_string("xxz"));
  }
}

TEST(HostileCompileTime, LargeEnumsAndConstants) {
  std::string values;
  for (int i = 0; i < 100000; ++i) values += fmt::format("{}\"item-{}-{}\"", i ? "," : "", i, "abc"[i % 3]);
  GrammarCompiler compiler(testing::byte_vocabulary(), 0);
  auto g = compiler.compile(GrammarKind::kJsonSchema, R"({"enum":[)" + values + "]}");
  ASSERT_TRUE(g) << g.error().message;
  Matcher m(g.value());
  EXPECT_TRUE(m.accepts_string(R"("item-0-a")"));
  EXPECT_TRUE(m.accepts_string(R"("item-99999-a")"));
  EXPECT_TRUE(m.accepts_string(R"("item\u002D52-b")"));
  EXPECT_FALSE(m.accepts_string(R"("item-5-a")"));
  EXPECT_FALSE(m.accepts_string(R"("item-100000-b")"));
  // A 5 MB constant cannot become an automaton: an immediate error, not gigabytes.
  std::string big(5'000'000, 'a');
  expect_grammar_error(GrammarCompiler::validate(GrammarKind::kJsonSchema, R"({"const":")" + big + "\"}"), "too large");
  // Long constants within the limit compile.
  std::string long_value(5000, 'b');
  auto c = compiler.compile(GrammarKind::kJsonSchema, R"({"const":")" + long_value + "\"}");
  ASSERT_TRUE(c) << c.error().message;
  Matcher mc(c.value());
  EXPECT_TRUE(mc.accepts_string("\"" + long_value + "\""));
}

TEST(HostileCompileTime, WorkBeyondTheBudgetIsAnError) {
  std::string schema = R"({"type":"object","properties":{"a":{"type":"string","format":"email"},"b":{"type":"string","pattern":"^[a-z]{3,9}@x\\.org$"}}})";
  {
    CompileBudget::Scope small(1000);
    expect_grammar_error(GrammarCompiler::validate(GrammarKind::kJsonSchema, schema), "too complex");
  }
  CompileBudget::Scope full;
  EXPECT_TRUE(GrammarCompiler::validate(GrammarKind::kJsonSchema, schema));
  EXPECT_LT(CompileBudget::used(), CompileBudget::kDefaultSteps / 100);
}

TEST(HostileCompileTime, LargeSubsetsAreChargedWhatTheyCost) {
  // A long bounded repetition of an ambiguous unit: after k digits the automaton may be in any of
  // k copies, so its subset construction sorts and hashes sets of thousands of states. Charged a
  // step per set element, it spent 8 s and ~1 GB within the budget (an hour of fuzzing found it);
  // charged for the sorting and hashing too, it stops at the budget in well under a second.
  const char* spec = R"(root ::= "a"{233} [^xroot ::= .item+
? | ite-z]? "\u00e9" [\]] ws [^" ws [0-9]+{2333} [^xroot ::= .itroot ::= ws "{" ws (kv (ws "," ws kv)*)? ws "}"
kv ::=[^|"" [az-]+ "\"" ws ":" ws [&-8]+
ws ::= [ \t\n]*)";
  expect_grammar_error(GrammarCompiler::validate(GrammarKind::kEbnf, spec), "steps of work");  // the budget, not a state limit
  // A legitimate bounded repetition stays far below the budget.
  CompileBudget::Scope full;
  EXPECT_TRUE(GrammarCompiler::validate(GrammarKind::kEbnf, "root ::= [0-9]{1,2333} [a-z]+{3}"));
  EXPECT_LT(CompileBudget::used(), CompileBudget::kDefaultSteps / 100);
}

}  // namespace
}  // namespace deepinfer::grammar

namespace deepinfer::grammar {
namespace {

// One advance over a whole valid text must not hit the parser's work bound (a 2,500-element array
// returned a false kCapacity: each element's rule completed inside the previous one, and the
// closing bracket completed all of them in one set).
TEST(HostileMatcher, LongArraysAndObjectsInOneStep) {
  GrammarCompiler compiler(testing::byte_vocabulary(), 0);
  std::string array = "[";
  for (int i = 0; i < 20000; ++i) array += fmt::format("{}{}", i ? "," : "", i);
  array += "]";
  std::string object = "{";
  for (int i = 0; i < 20000; ++i) object += fmt::format("{}\"k{}\":{}", i ? "," : "", i, i);
  object += "}";
  for (const char* schema : {R"({})", R"({"type":"array","items":{"type":"integer"}})", R"({"type":"array","minItems":3,"maxItems":1000000})",
                             R"({"type":"array","contains":{"const":19999}})"}) {
    auto g = compiler.compile(GrammarKind::kJsonSchema, schema);
    ASSERT_TRUE(g) << g.error().message;
    Matcher m(g.value());
    auto r = m.advance_bytes(array);
    EXPECT_TRUE(r) << schema << ": " << r.error().message;
    EXPECT_TRUE(m.can_end()) << schema;
  }
  for (const char* schema : {R"({})", R"({"type":"object","additionalProperties":{"type":"integer"}})",
                             R"({"type":"object","properties":{"a":{}},"maxProperties":100000})"}) {
    auto g = compiler.compile(GrammarKind::kJsonSchema, schema);
    ASSERT_TRUE(g) << g.error().message;
    Matcher m(g.value());
    auto r = m.advance_bytes(object);
    EXPECT_TRUE(r) << schema << ": " << r.error().message;
    EXPECT_TRUE(m.can_end()) << schema;
  }
}

}  // namespace
}  // namespace deepinfer::grammar
