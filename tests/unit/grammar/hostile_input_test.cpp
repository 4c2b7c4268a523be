// Hostile specs: nesting, size and complexity never crash or stall the compiler — they compile
// (when legitimate) or fail with a kGrammar error naming the problem. Deep nesting is compiled on a
// thread with a 256 KB stack, a small stack for a host application's worker thread.
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
