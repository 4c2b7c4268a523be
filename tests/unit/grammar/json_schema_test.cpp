// JSON Schema compiler: each supported keyword accepts exactly the right texts, and every
// unsupported constraint is a compile error naming it.
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "test_vocabularies.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>

namespace deepinfer::grammar {
namespace {

void expect_texts(const std::string& schema, const std::vector<std::string>& yes, const std::vector<std::string>& no,
                  GrammarOptions options = {}) {
  static GrammarCompiler compiler(testing::byte_vocabulary());
  auto g = compiler.compile(GrammarKind::kJsonSchema, schema, options);
  ASSERT_TRUE(g) << schema << ": " << g.error().message;
  Matcher m(g.value());
  for (const auto& s : yes) EXPECT_TRUE(m.accepts_string(s)) << schema << " should accept " << s;
  for (const auto& s : no) EXPECT_FALSE(m.accepts_string(s)) << schema << " should reject " << s;
}

void expect_error(const std::string& schema, const std::string& needle) {
  auto r = GrammarCompiler::validate(GrammarKind::kJsonSchema, schema);
  ASSERT_FALSE(r) << schema;
  EXPECT_EQ(r.error().code, Code::kGrammar);
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
}

TEST(JsonSchema, ObjectsFollowPropertyOrderAndRequired) {
  std::string s = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"],"additionalProperties":false})";
  expect_texts(s, {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({ "a" : 1 , "b" : "" })"},
               {R"({})", R"({"a":1})", R"({"b":"x","a":1})", R"({"a":1,"b":"x","c":2})", R"({"a":"1","b":"x"})", R"({"b":"x",})"});
}

TEST(JsonSchema, AdditionalPropertiesNeverShadowDeclaredOnes) {
  std::string s = R"({"type":"object","properties":{"a/b":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})";
  expect_texts(s, {R"({"a/b":1})", R"({"a/b":1,"c":true})", R"({"c":false,"d":true})", R"({})"},
               {R"({"a/b":true})", R"({"a\/b":true})", R"({"a\u002fb":true})", R"({"c":1})"});
  expect_texts(R"({"type":"object"})", {R"({"x":{"y":[1,{"z":null}]}})", R"({"":""})"}, {R"([])", R"({"x"})"});
}

TEST(JsonSchema, PropertyCountsAndNames) {
  expect_texts(R"({"type":"object","minProperties":1,"maxProperties":2,"additionalProperties":{"type":"integer"}})",
               {R"({"a":1})", R"({"a":1,"b":2})"}, {R"({})", R"({"a":1,"b":2,"c":3})"});
  expect_texts(R"({"type":"object","propertyNames":{"pattern":"^x"},"properties":{"xa":{},"ya":{}}})", {R"({"xa":1,"xb":2})"},
               {R"({"ya":1})", R"({"b":2})"});
}

TEST(JsonSchema, PatternPropertiesSplitKeysByPattern) {
  std::string s = R"({"type":"object","properties":{"x_id":{"type":"string"}},"patternProperties":{"^x_":{"type":"integer"},"id$":{"maxLength":2}},"additionalProperties":false})";
  // x_id: string (properties), integer (^x_) and maxLength: no value fits, so it cannot appear.
  expect_texts(s, {R"({"x_a":1})", R"({"bid":"ab"})", R"({"x_a":1,"b_id":"z"})", R"({})"},
               {R"({"x_id":"a"})", R"({"x_a":"1"})", R"({"other":1})", R"({"bid":"abc"})", R"({"x_id":1})"});
}

TEST(JsonSchema, UnevaluatedSeesInPlaceApplicatorsOnly) {
  std::string s = R"({"allOf":[{"properties":{"a":{"type":"integer"}}}],"anyOf":[{"properties":{"b":{}}},{"properties":{"c":{}}}],"unevaluatedProperties":false})";
  expect_texts(s, {R"({"a":1})", R"({"a":1,"b":2})", R"({"c":3})"}, {R"({"d":1})", R"({"b":1,"c":2})"});
  // A sibling's properties are not seen by the inner schema's unevaluatedProperties.
  expect_texts(R"({"allOf":[{"properties":{"a":{}},"unevaluatedProperties":false},{"properties":{"b":{}}}]})", {R"({"a":1})"},
               {R"({"b":1})"});
  expect_texts(R"({"prefixItems":[{"type":"integer"}],"unevaluatedItems":{"type":"string"}})", {"[1]", R"([1,"x","y"])"},
               {R"([1,2])"});
}

TEST(JsonSchema, ContainsCountsMatchingElements) {
  expect_texts(R"({"type":"array","contains":{"type":"integer"},"minContains":2,"maxItems":4})",
               {"[1,2]", R"(["a",1,"b",2])", "[1,2,3]"}, {"[]", "[1]", R"(["a","b",1])", "[1,2,3,4,5]"});
  expect_texts(R"({"contains":{"const":"x"},"items":{"type":"string"}})", {R"(["x"])", R"(["a","x","b"])"}, {"[]", R"(["a"])", R"([1,"x"])"});
}

TEST(JsonSchema, ArraysItemsPrefixItemsAndCounts) {
  expect_texts(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false})",
               {"[]", "[1]", R"([1,"a"])"}, {R"([1,"a",2])", R"(["a"])"});
  expect_texts(R"({"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3})", {"[true,false]", "[true, true ,false]"},
               {"[true]", "[true,true,true,true]", "[1,2]"});
  expect_texts(R"({"type":"array","items":{"type":"integer"}})", {"[]", "[1,2,3]", "[ 1 ]"}, {"[1,]", "[,1]"});
}

// Every length around the bounds: counts past the explicit positions are binary powers of a
// repeated unit, which must accept exactly the counts in range.
void expect_counts(const std::string& schema, uint64_t min, uint64_t max, uint64_t up_to, const std::string& open,
                   const std::function<std::string(uint64_t)>& member, const std::string& close) {
  static GrammarCompiler compiler(testing::byte_vocabulary());
  auto g = compiler.compile(GrammarKind::kJsonSchema, schema);
  ASSERT_TRUE(g) << schema << ": " << g.error().message;
  Matcher m(g.value());
  std::string text = open;
  for (uint64_t count = 0; count <= up_to; ++count) {
    if (count > 0) text += fmt::format("{}{}", count > 1 ? "," : "", member(count - 1));
    EXPECT_EQ(m.accepts_string(text + close), count >= min && count <= max) << schema << " with " << count;
  }
}

TEST(JsonSchema, ItemAndPropertyCountsBeyondTheExplicitPositions) {
  auto number = [](uint64_t i) { return std::to_string(i); };
  expect_counts(R"({"type":"array","maxItems":150})", 0, 150, 160, "[", number, "]");
  expect_counts(R"({"type":"array","minItems":70,"maxItems":137})", 70, 137, 140, "[", number, "]");
  expect_counts(R"({"type":"array","minItems":100})", 100, UINT64_MAX, 130, "[", number, "]");
  expect_counts(R"({"type":"array","prefixItems":[{"const":0},{"const":1}],"items":{"minimum":2},"minItems":1,"maxItems":99})", 1, 99, 101, "[",
                number, "]");
  expect_counts(R"({"type":"array","contains":{"const":3},"maxItems":200})", 4, 200, 205, "[", number, "]");
  expect_counts(R"({"type":"array","maxItems":1000000})", 0, 1000000, 70, "[", number, "]");
  auto member = [](uint64_t i) { return "\"k" + std::to_string(i) + "\":" + std::to_string(i); };
  expect_counts(R"({"type":"object","minProperties":3,"maxProperties":90})", 3, 90, 95, "{", member, "}");
  expect_counts(R"({"type":"object","properties":{"k0":{},"k1":{}},"minProperties":70})", 70, UINT64_MAX, 80, "{", member, "}");
  expect_counts(R"({"type":"object","properties":{"k0":{}},"required":["k0"],"maxProperties":66})", 1, 66, 70, "{", member, "}");
}

TEST(JsonSchema, StringLengthsCountCodePoints) {
  // An escape or a surrogate pair is one code point.
  expect_texts(R"({"type":"string","minLength":2,"maxLength":3})",
               {R"("ab")", R"("😀é")", R"("a\nb")", R"("\u0001\"\\")", R"("a\u00e9")", R"("\ud83d\ude00\u00E9")", R"("\/\/\/")"},
               {R"("a")", R"("abcd")", R"("😀")", R"("\ud83d\ude00")", R"("\/\/\/\/")"});
}

TEST(JsonSchema, LengthBoundsAreCountersUpToAMillion) {
  // Bounds were unrolled into the automaton: maxLength above 3,333 was refused, ~200 with a format.
  std::string a4999(4999, 'a'), a5000(5000, 'a'), a5001(5001, 'a');
  expect_texts(R"({"type":"string","maxLength":5000})", {R"("")", "\"" + a5000 + "\"", "\"" + a4999 + "\\u0061\""},
               {"\"" + a5001 + "\"", "\"" + a5000 + "\\n\""});
  expect_texts(R"({"type":"string","minLength":5000,"maxLength":1000000})", {"\"" + a5000 + "\""}, {"\"" + a4999 + "\""});
  expect_texts(R"({"type":"string","minLength":1000000})", {"\"" + std::string(1000000, 'x') + "\""}, {"\"" + std::string(999999, 'x') + "\""});
  std::string local(64, 'a'), domain = std::string(63, 'b') + "." + std::string(63, 'c') + "." + std::string(57, 'd') + ".com";  // 254 characters in all
  expect_texts(R"({"type":"string","format":"email","maxLength":254})", {R"("a@b.org")", "\"" + local + "@" + domain + "\""},
               {"\"" + local + "x@" + domain + "\"", R"("a@@b.org")"});
  expect_texts(R"({"type":"string","format":"uri","maxLength":2048})", {R"("https://x.org/)" + std::string(2030, 'p') + "\""},
               {R"("https://x.org/)" + std::string(2040, 'p') + "\""});
  expect_texts(R"({"type":"string","pattern":"^(ab)*$","minLength":3,"maxLength":6})", {R"("abab")", R"("ababab")"},
               {R"("ab")", R"("aba")", R"("abababab")"});
  expect_error(R"({"type":"string","pattern":"^(ab)*$","minLength":3,"maxLength":3})", "matches no string");
}

TEST(JsonSchema, AnyEscapeOfAnAllowedValueIsAllowed) {
  // Python's json.dumps writes non-ASCII as \uXXXX (surrogate pairs above the BMP): such texts
  // were refused, and keys and enum/const strings accepted one spelling only.
  expect_texts(R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"mood":{"enum":["😀","é"]}},"required":["name"]})",
               {R"({"name": "Mar\u00eda Jos\u00e9"})", R"({"name":"Mar\u00EDa","mood":"\ud83d\ude00"})", R"({"name":"x","mood":"\u00e9"})",
                R"({"n\u0061me":"x"})", R"({"name":"\"\\\/\b\f\n\r\t"})"},
               {R"({"name":"\u00e"})", R"({"name":"\ud83d"})", R"({"name":"\ude00"})", R"({"name":"x","mood":"\u00e8"})",
                R"({"name":"\x41"})", R"({"name":"\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041\u0041"})"});
  expect_texts(R"({"type":"object","properties":{"a/b":{"const":"x/y"}},"additionalProperties":false})",
               {R"({"a\/b":"x\/y"})", R"({"a\u002Fb":"x\u002fy"})", R"({"a/b":"x/y"})"}, {R"({"a\\/b":"x/y"})", R"({"ab":"x/y"})"});
  expect_texts(R"({"type":"string","pattern":"^[a-c]+$"})", {R"("\u0061b\u0063")"}, {R"("\u0064")", R"("a\u000a")"});
}

TEST(JsonSchema, PatternsSearchUnlessAnchored) {
  expect_texts(R"({"type":"string","pattern":"b+c"})", {R"("abbcd")", R"("bc")"}, {R"("ac")", R"("")"});
  expect_texts(R"({"type":"string","pattern":"^[a-z]{2}-\\d$"})", {R"("ab-1")"}, {R"("xab-1")", R"("ab-12")"});
  expect_texts(R"({"type":"string","pattern":"^\"q\"\\\\$"})", {R"("\"q\"\\")"}, {R"("q\\")"});
}

TEST(JsonSchema, PatternIdentityEscapesAndTheIgnoreCaseFlag) {
  expect_texts(R"({"type":"string","pattern":"^a\\-b\\:c\\_d\\@e\\#f\\ g\\'h\\/i$"})", {R"("a-b:c_d@e#f g'h/i")"}, {R"("a-b:c_d@e#f g'h/j")"});
  expect_texts(R"({"type":"string","pattern":"(?i)^[a-c]x$"})", {R"("AX")", R"("bx")", R"("cX")"}, {R"("dx")", R"("ax ")"});
  expect_texts(R"({"type":"string","pattern":"^(?i:ab)c$"})", {R"("ABc")", R"("aBc")"}, {R"("ABC")"});
  expect_texts(R"({"type":"string","pattern":"(?i)^[^k]$"})", {R"("a")"}, {R"("k")", R"("K")", "\"\u212A\""});
  expect_error(R"({"type":"string","pattern":"(?m)^a$"})", "inline flag");
  expect_error(R"({"type":"string","pattern":"\\a"})", "invalid escape");
}

TEST(JsonSchema, Formats) {
  expect_texts(R"({"type":"string","format":"date"})", {R"("2024-02-29")", R"("2000-02-29")"},
               {R"("2023-02-29")", R"("1900-02-29")", R"("2024-04-31")", R"("2024-1-01")"});
  expect_texts(R"({"format":"date-time"})", {R"("2024-03-18T09:00:00+01:00")", R"("2024-03-18t09:00:00.5z")", "12"},
               {R"("2024-03-18T24:00:00Z")", R"("2024-03-18 09:00:00Z")"});
  expect_texts(R"({"type":"string","format":"email"})", {R"("a.b@example.com")", R"("\"a b\"@x.org")"}, {R"("a..b@x.com")", R"("@x.com")"});
  expect_texts(R"({"type":"string","format":"uuid"})", {R"("3f2b8c1e-9d4a-4e7b-8a21-5c6d7e8f9a0B")"}, {R"("3f2b8c1e9d4a4e7b8a215c6d7e8f9a0b")"});
  expect_texts(R"({"type":"string","format":"ipv4"})", {R"("10.0.0.255")"}, {R"("10.0.0.256")", R"("01.0.0.1")"});
  expect_texts(R"({"type":"string","format":"hostname"})", {R"("a--b.example.com")", R"("x")", R"("1host")"},
               {R"("-a.com")", R"("a_b")", R"("a.")", R"("xn--9n2bp8q")", ("\"" + std::string(64, 'a') + ".com\"")});
  expect_texts(R"({"type":"string","format":"uri"})", {R"("https://x.org/a?b=c#d")", R"("urn:isbn:0451450523")"},
               {R"("//x.org")", R"("a b:c")"});
}

TEST(JsonSchema, IntegerBoundsAreExact) {
  expect_texts(R"({"type":"integer","minimum":-12,"exclusiveMaximum":105})", {"-12", "0", "104", "-1", "99"},
               {"-13", "105", "1000", "-0", "1.0", "1e2"});
  expect_texts(R"({"type":"integer","minimum":18446744073709551615})", {"18446744073709551615", "99999999999999999999"},
               {"18446744073709551614", "-1"});
  expect_texts(R"({"type":"integer","exclusiveMinimum":1.5,"maximum":3.7})", {"2", "3"}, {"1", "4"});
}

TEST(JsonSchema, DecimalBoundsAreExact) {
  expect_texts(R"({"type":"number","minimum":0.5,"maximum":2})", {"0.5", "0.50", "0.51", "1", "2", "2.000", "1.999"},
               {"0.49", "0.4999", "2.001", "3", "-1", "5e-1"});
  expect_texts(R"({"type":"number","exclusiveMinimum":-1.25,"exclusiveMaximum":0})", {"-1.24", "-0.001", "-1"},
               {"-1.25", "-1.250", "0", "0.0", "-2"});
  expect_texts(R"({"type":"number"})", {"-0", "1.5e-7", "2E+10", "0.0"}, {"01", "1.", ".5", "+1", "1e"});
}

TEST(JsonSchema, MultipleOfIsExact) {
  expect_texts(R"({"type":"integer","multipleOf":7,"minimum":-20})", {"0", "7", "-14", "700"}, {"8", "-21", "7.0", "1"});
  expect_texts(R"({"type":"number","multipleOf":0.25})", {"0.5", "-1.75", "3", "2.50", "0.250000"}, {"0.1", "0.125", "1e2"});
  expect_texts(R"({"type":"number","multipleOf":1.5,"maximum":4.5})", {"1.5", "4.5", "-3", "0"}, {"6", "1", "4.4"});
  expect_texts(R"({"enum":[1,2.5,4],"multipleOf":2})", {"4"}, {"1", "2.5"});
}

TEST(JsonSchema, EnumAndConstAreValuesNotTexts) {
  expect_texts(R"({"enum":["a",1,null,{"k":[true]}]})", {R"("a")", "1", "1.0", "null", R"({"k":[true]})", R"({ "k" : [ true ] })"},
               {R"("b")", "2", R"({"k":[false]})", "true"});
  expect_texts(R"({"type":"string","enum":["a",1,"bb"],"maxLength":1})", {R"("a")"}, {"1", R"("bb")"});
  expect_texts(R"({"const":"tab\tquote\""})", {R"("tab\tquote\"")"}, {R"("tab	quote\"")"});
}

TEST(JsonSchema, CombinatorsAndReferences) {
  expect_texts(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})", {"5", R"("a")"}, {R"("ab")", "null"});
  expect_texts(R"({"oneOf":[{"type":"object","properties":{"k":{"const":"a"}},"required":["k"]},{"type":"object","properties":{"k":{"const":"b"},"n":{"type":"integer"}},"required":["k","n"]}]})",
               {R"({"k":"a"})", R"({"k":"b","n":1})"}, {R"({"k":"b"})", R"({"k":"c"})"});
  expect_texts(R"({"oneOf":[{"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":false},{"type":"object","properties":{"b":{}},"required":["b"],"additionalProperties":false}]})",
               {R"({"a":1})", R"({"b":2})"}, {R"({"a":1,"b":2})", R"({})"});
  expect_texts(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}}},{"properties":{"a":{"minimum":3}},"required":["a"]}]})",
               {R"({"a":3})"}, {R"({"a":2})", R"({})"});
  expect_texts(R"({"$defs":{"t":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/t"}}}}},"$ref":"#/$defs/t"})",
               {R"({})", R"({"c":[{"c":[]},{"c":[{}]}]})"}, {R"({"c":[1]})"});
  expect_texts(R"({"$id":"https://e.org/root","$defs":{"x":{"$id":"x.json","$anchor":"here","type":"integer"}},"properties":{"a":{"$ref":"x.json"},"b":{"$ref":"https://e.org/x.json#here"}}})",
               {R"({"a":1,"b":2})"}, {R"({"a":"1"})", R"({"b":true})"});
}

TEST(JsonSchema, WhitespaceOptions) {
  std::string s = R"({"type":"object","properties":{"a":{"type":"array"}}})";
  expect_texts(s, {R"({"a":[1,2]})"}, {R"({ "a":[1,2]})", R"({"a":[1, 2]})"}, {Whitespace::kCompact, 0});
  expect_texts(s, {"{\n \"a\": [\n 1\n ]\n}", "{  \"a\":[]}"}, {"{\n  \"a\":[]}", "{   \"a\":[]}", "{\"a\":[1 \n\n ,2]}"},
               {Whitespace::kAny, 2});
  expect_texts(s, {"{\n\n\n\n\n\n\"a\" : [ ] }"}, {}, {Whitespace::kAny, 0});
}

TEST(JsonSchema, UnsupportedConstraintsAreErrorsNamingThem) {
  expect_error(R"({"not":{"additionalProperties":false}})", "'additionalProperties' cannot be negated");
  expect_error(R"({"if":{"multipleOf":2},"then":{"minimum":1}})", "'multipleOf' cannot be negated");
  expect_error(R"({"not":{"const":{"a":1}}})", "excluding an object or array value");
  expect_error(R"({"type":"array","contains":{"type":"integer"},"maxContains":2})", "'maxContains'");
  expect_error(R"({"patternProperties":{"(":{}}})", "patternProperties");
  expect_error(R"({"type":"array","uniqueItems":true})", "uniqueItems is supported for arrays whose items are at most 12");
  expect_error(R"({"multipleOf":0})", "multipleOf must be greater than 0");
  expect_error(R"({"$ref":"https://example.com/other.json"})", "remote references are not supported");
  expect_error(R"({"type":"string","format":"idn-hostname"})", "format 'idn-hostname'");
  expect_error(R"({"oneOf":[{"type":"integer"},{"minimum":0}]})", "oneOf");
  expect_error(R"s({"type":"string","pattern":"(?=x)"})s", "lookaround");
  expect_error(R"({"type":"strin"})", "unknown type 'strin'");
  expect_error(R"({"minLength":-1})", "minLength must be a non-negative integer");
  expect_error(R"({"minLength":1e30})", "minLength is too large");  // once a float-to-integer overflow
  expect_error(R"({"minLength":2.5})", "minLength must be a non-negative integer");
  expect_error(R"({"type":"object")", "not valid JSON");
  expect_error(R"({"type":"string","minLength":3,"maxLength":2})", "matches no string");
  expect_error(R"({"$ref":"#/$defs/missing"})", "does not resolve");
}

TEST(JsonSchema, NotInTheShapesSchemasUse) {
  expect_texts(R"({"not":{"type":"string"}})", {"1", "null", "[]", "{}", "1.5"}, {R"("a")"});
  expect_texts(R"({"type":"number","not":{"type":"integer"}})", {"1.5", "-0.25"}, {"1", "1.0", "2"});
  expect_texts(R"({"type":"string","not":{"enum":["a","b"]}})", {R"("c")", R"("ab")", R"("")"}, {R"("a")", R"("\u0062")"});
  expect_texts(R"({"type":"integer","not":{"const":3}})", {"2", "4", "-3"}, {"3", "3.0"});
  expect_texts(R"({"type":"boolean","not":{"const":false}})", {"true"}, {"false"});
  expect_texts(R"({"type":"object","not":{"required":["secret"]}})", {R"({"a":1})", "{}"}, {R"({"secret":1})", R"({"a":1,"s\u0065cret":2})"});
  expect_texts(R"({"type":"object","properties":{"a":{}},"not":{"anyOf":[{"required":["a"]},{"required":["b"]}]}})", {R"({"c":1})"},
               {R"({"a":1})", R"({"b":1})"});
  expect_texts(R"({"type":"object","propertyNames":{"not":{"pattern":"^x-"}}})", {R"({"a":1})"}, {R"({"x-a":1})"});
  expect_texts(R"({"type":"string","not":{"minLength":3}})", {R"("ab")"}, {R"("abc")"});
  expect_texts(R"({"type":"integer","not":{"minimum":10}})", {"9", "-100"}, {"10", "11"});
  expect_texts(R"({"type":"string","not":{"pattern":"^a"}})", {R"("ba")"}, {R"("ab")", R"("\u0061")"});
  expect_error(R"({"not":{}})", "matches no string");
  expect_error(R"({"not":true,"type":"string"})", "matches no string");
  expect_texts(R"({"not":false})", {"1", R"("a")"}, {});
  expect_texts(R"({"type":"object","properties":{"kind":{"type":"string"}},"not":{"properties":{"kind":{"const":"x"}}}})",
               {R"({"kind":"y"})"}, {R"({"kind":"x"})", R"({})"});
}

TEST(JsonSchema, IfThenElse) {
  std::string s = R"({"type":"object","properties":{"kind":{"enum":["a","b"]},"n":{"type":"integer"}},"required":["kind"],
      "if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["n"]},"else":{"not":{"required":["n"]}}})";
  expect_texts(s, {R"({"kind":"a","n":1})", R"({"kind":"b"})"}, {R"({"kind":"a"})", R"({"kind":"b","n":1})"});
  expect_texts(R"({"if":{"type":"string"},"then":{"maxLength":2},"else":{"type":"integer"}})", {R"("ab")", "3"}, {R"("abc")", "1.5", "null"});
  expect_texts(R"({"if":{"minimum":10},"then":{"multipleOf":5}})", {"15", "3", "10"}, {"11"});
}

TEST(JsonSchema, DependentRequiredAndSchemas) {
  expect_texts(R"({"type":"object","properties":{"card":{},"billing":{}},"dependentRequired":{"card":["billing"]}})",
               {R"({})", R"({"billing":1})", R"({"card":1,"billing":2})"}, {R"({"card":1})"});
  expect_texts(R"({"type":"object","properties":{"a":{},"b":{}},"dependentSchemas":{"a":{"properties":{"b":{"type":"integer"}},"required":["b"]}}})",
               {R"({"b":"x"})", R"({"a":1,"b":2})"}, {R"({"a":1})", R"({"a":1,"b":"x"})"});
  expect_texts(R"({"type":"object","properties":{"a":{},"b":{}},"dependencies":{"a":["b"],"b":{"properties":{"a":{"type":"string"}}}}})",
               {R"({"a":"x","b":1})", R"({})"}, {R"({"a":"x"})", R"({"a":1,"b":1})"});
}

TEST(JsonSchema, UniqueItemsOfEnumeratedScalars) {
  expect_texts(R"({"type":"array","items":{"enum":["r","g","b"]},"uniqueItems":true})", {"[]", R"(["r"])", R"(["b","r","g"])"},
               {R"(["r","r"])", R"(["r","g","r"])", R"(["r","\u0072"])"});
  expect_texts(R"({"type":"array","items":{"enum":[1,2]},"uniqueItems":true,"minItems":2})", {"[1,2]", "[2,1.0]"}, {"[1]", "[1,1.0]"});
  expect_texts(R"({"type":"array","items":{"type":"boolean"},"uniqueItems":true})", {"[true,false]"}, {"[true,true]"});
}

TEST(JsonSchema, OneOfWithoutProofNarrowsToExclusiveBranches) {
  // Function-call unions: the constant discriminator is made required.
  std::string shapes = R"({"oneOf":[
      {"type":"object","properties":{"shape":{"const":"circle"},"r":{"type":"number"}},"additionalProperties":false},
      {"type":"object","properties":{"shape":{"const":"square"},"side":{"type":"number"}},"additionalProperties":false}]})";
  expect_texts(shapes, {R"({"shape":"circle","r":1})", R"({"shape":"square","side":2})"},
               {R"({"r":1})", R"({})", R"({"shape":"circle","side":1})", R"({"shape":"oval"})"});
  // Required sets: the keys only the other branch requires are absent.
  expect_texts(R"({"oneOf":[{"required":["a"]},{"required":["b"]}],"type":"object"})", {R"({"a":1})", R"({"b":1})", R"({"a":1,"c":2})"},
               {R"({"a":1,"b":2})", R"({})"});
}

TEST(JsonSchema, FormatsOfOpenApiAndUnknownOnes) {
  expect_texts(R"({"type":"integer","format":"int32"})", {"0", "-2147483648", "2147483647"}, {"2147483648", "-2147483649"});
  expect_texts(R"({"type":"number","format":"int64"})", {"9223372036854775807"}, {"9223372036854775808", "1.5"});
  expect_texts(R"({"type":"string","format":"byte"})", {R"("")", R"("aGk=")", R"("aGVsbG8=")", R"("YWJj")"}, {R"("aGk")", R"("a===")", R"("a b=")"});
  expect_texts(R"({"type":"string","format":"phone-number"})", {R"("anything")"}, {"1"});
  expect_texts(R"({"format":"int32","type":["string","integer"]})", {R"("x")", "5"}, {"3000000000"});
}

// `format: "regex"` was an error; it takes any string (its syntax nests, so nothing exact could check it).
TEST(JsonSchema, FormatRegexTakesAnyString) {
  expect_texts(R"({"type":"string","format":"regex"})", {R"("([abc])+\\s+$")", R"("^(abc]")", R"("")", R"("(?<=x)\u0041")"},
               {"1", R"("a)"});
  expect_texts(R"({"format":"regex","maxLength":3})", {R"("(a]")", "12", "null"}, {R"("(abc")"});
}

TEST(JsonSchema, PropertiesFollowTheOrderOfRequired) {
  expect_texts(R"({"properties":{"a":{},"b":{}},"required":["b","a"]})", {R"({"b":1,"a":2})"}, {R"({"a":2,"b":1})"});
  // Optional properties keep their places; the required ones take required's order.
  expect_texts(R"({"properties":{"a":{},"x":{},"b":{}},"required":["b","a"]})", {R"({"b":1,"x":0,"a":2})", R"({"b":1,"a":2})"},
               {R"({"a":2,"x":0,"b":1})"});
}

TEST(JsonSchema, ManyPatternProperties) {
  std::string s = R"({"type":"object","patternProperties":{)";
  for (int i = 0; i < 64; ++i) s += fmt::format(R"({}"^p{}_":{{"const":{}}})", i ? "," : "", i, i);
  s += R"(},"additionalProperties":false})";
  expect_texts(s, {R"({"p0_a":0,"p63_x":63})", "{}"}, {R"({"p1_a":0})", R"({"q":1})"});
}


}  // namespace
}  // namespace deepinfer::grammar
