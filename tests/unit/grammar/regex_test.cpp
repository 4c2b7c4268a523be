// The regex front end and automata: targeted cases, then random patterns checked against PCRE2
// (full match, UTF mode) both on the DFA and through the whole grammar matcher.
#include "grammar/dfa.h"
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "grammar/regex_parser.h"
#include "grammar/utf8.h"
#include "random_generation.h"
#include "test_vocabularies.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace deepinfer::grammar {
namespace {

Dfa dfa_of(const std::string& pattern) {
  auto re = parse_ecmascript_regex(pattern);
  EXPECT_TRUE(re) << pattern << ": " << (re ? "" : re.error().message);
  auto d = Dfa::from_regex(re.value());
  EXPECT_TRUE(d) << pattern;
  return std::move(d.value());
}

// ECMAScript's \s, spelled out for PCRE2 (whose \s lacks some Unicode spaces, e.g. U+FEFF).
const char* kEcmaSpace = "\\t\\n\\x{0b}\\f\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}";

// Rewrites \s and \S outside classes (the only places the generated patterns use them).
std::string with_ecma_spaces(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size() && (pattern[i + 1] == 's' || pattern[i + 1] == 'S')) {
      out += std::string(pattern[i + 1] == 's' ? "[" : "[^") + kEcmaSpace + "]";
      ++i;
    } else {
      if (pattern[i] == '\\' && i + 1 < pattern.size()) out += pattern[i++];
      out += pattern[i];
    }
  }
  return out;
}

// Full match with ECMAScript-compatible options: $ only at the very end, '.' excludes \r and \n.
class Pcre2 {
 public:
  explicit Pcre2(const std::string& ecma_pattern) {
    std::string pattern = with_ecma_spaces(ecma_pattern);
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_compile_context* ctx = pcre2_compile_context_create(nullptr);
    pcre2_set_newline(ctx, PCRE2_NEWLINE_ANYCRLF);
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_DOLLAR_ENDONLY,
                          &err, &off, ctx);
    pcre2_compile_context_free(ctx);
    data_ = code_ ? pcre2_match_data_create_from_pattern(code_, nullptr) : nullptr;
  }
  ~Pcre2() {
    if (data_) pcre2_match_data_free(data_);
    if (code_) pcre2_code_free(code_);
  }
  bool ok() const { return code_ != nullptr; }
  bool full_match(const std::string& s) const {
    int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED,
                         data_, nullptr);
    return rc >= 0;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* data_ = nullptr;
};

TEST(Regex, RejectsUnsupportedSyntaxWithAReason) {
  for (const char* p : {"a(?=b)", "(?!x)", "(?<=a)b", "(a)\\1", "\\bword", "\\p{Script=Greek}", "a**", "[b-a]", "(ab", "ab)", "x{3,2}"}) {
    auto r = parse_ecmascript_regex(p);
    ASSERT_FALSE(r) << p;
    EXPECT_EQ(r.error().code, Code::kGrammar);
    EXPECT_NE(r.error().message.find("regex"), std::string::npos) << r.error().message;
  }
}

TEST(Regex, MatchesEcmaScriptSemantics) {
  struct Case {
    const char* pattern;
    std::vector<std::string> yes, no;
  };
  std::vector<Case> cases = {
      {"\\d{2,3}", {"12", "123"}, {"1", "1234", "ab"}},
      {"[^a-c]x", {"dx", "éx", "中x"}, {"ax", "cx", "x"}},
      {".", {"a", "中", "😀"}, {"\n", "\r", "\u2028", "ab", ""}},
      {"^ab$|cd", {"ab", "cd"}, {"abcd", "c"}},
      {"a^b", {}, {"ab", "a^b"}},
      {"(?:ab)+?", {"ab", "abab"}, {"", "aba"}},
      {"[\\d\\-x]+", {"1-x", "x"}, {"y"}},
      {"\\u00e9\\x41\\u{1F600}", {"éA😀"}, {"eA😀"}},
      {"\\uD83D\\uDE00", {"😀"}, {"a"}},
      {"a{,3}", {"a{,3}"}, {"aaa"}},
      {"[]", {}, {"", "a"}},
      {"[^]", {"a", "\n"}, {""}},
      {"\\s\\S", {" a", "\u3000b"}, {"a ", "  "}},
      {"\\w\\W", {"a-", "_é"}, {"ab", "é_"}},
      {"\\cJ\\0", {std::string("\n") + '\0'}, {"\n0"}},
      {"\\p{Lu}\\p{digit}+\\P{L}", {"É৪2!", "A1 "}, {"é1!", "A1b", "Aa!"}},
      {"[\\p{Letter}\\d]+", {"abc日本9"}, {"a-b"}},
  };
  for (const auto& c : cases) {
    Dfa d = dfa_of(c.pattern);
    for (const auto& s : c.yes) EXPECT_TRUE(d.matches(s)) << c.pattern << " should match '" << s << "'";
    for (const auto& s : c.no) EXPECT_FALSE(d.matches(s)) << c.pattern << " should not match '" << s << "'";
  }
}

TEST(Regex, CodepointClassesEncodeExactlyTheirUtf8) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    CodepointSet set;
    for (int k = 0; k < 3; ++k) {
      uint32_t lo = rng() % 0x110000;
      uint32_t hi = std::min<uint32_t>(0x10FFFF, lo + rng() % (1u << (rng() % 20)));
      set.add(lo, hi);
    }
    Dfa d = Dfa::from_regex(re_chars(set)).value();
    for (int k = 0; k < 2000; ++k) {
      uint32_t cp = (k % 2 == 0 && !set.ranges().empty()) ? set.ranges()[rng() % set.ranges().size()].lo + rng() % 3 : rng() % 0x110000;
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string s;
      utf8_append(s, cp);
      EXPECT_EQ(d.matches(s), set.contains(cp)) << std::hex << cp;
    }
  }
}

TEST(Dfa, LanguageOperationsAndCanonicalKeys) {
  Dfa a = dfa_of("[a-z]+"), b = dfa_of("a.*"), c = dfa_of("(?:a|[b-z])[a-z]*");
  EXPECT_EQ(a.fingerprint(), c.fingerprint());
  EXPECT_FALSE(a.fingerprint() == b.fingerprint());
  Dfa both = Dfa::intersect(a, b).value();
  EXPECT_TRUE(both.matches("abc"));
  EXPECT_FALSE(both.matches("bc"));
  EXPECT_FALSE(both.matches("a1"));
  Dfa minus = Dfa::subtract(a, b).value();
  EXPECT_TRUE(minus.matches("bc"));
  EXPECT_FALSE(minus.matches("abc"));
  Dfa any = Dfa::unite(dfa_of("x"), dfa_of("y+")).value();
  EXPECT_TRUE(any.matches("x"));
  EXPECT_TRUE(any.matches("yy"));
  EXPECT_FALSE(any.matches("xy"));
  Dfa wrapped = dfa_of("[a-z]*").wrap('"', '"').value();
  EXPECT_TRUE(wrapped.matches("\"\""));
  EXPECT_TRUE(wrapped.matches("\"ab\""));
  EXPECT_FALSE(wrapped.matches("\"ab"));
  EXPECT_FALSE(dfa_of("a*").without_empty().matches(""));
  EXPECT_TRUE(dfa_of("a*").without_empty().matches("aa"));
  // Dead states are trimmed: every live state can still reach acceptance.
  Dfa t = dfa_of("ab|cd");
  uint32_t s = t.next(t.start(), 'a');
  EXPECT_NE(s, Dfa::kDead);
  EXPECT_EQ(t.next(s, 'd'), Dfa::kDead);
}

TEST(Dfa, UnionOfResiduals) {
  // Each part from one of its states: "ab" after 'a' is "b"; nine parts (more than one byte-class
  // key could hold before) with classes of their own.
  Dfa ab = dfa_of("ab"), digits = dfa_of("[0-9]+x");
  const uint32_t after_a = ab.next(ab.start(), 'a');
  std::vector<Dfa> letters;
  for (char c = 'c'; c < 'c' + 7; ++c) letters.push_back(dfa_of(std::string(1, c) + "[" + std::string(1, c) + "-z]"));
  std::vector<Dfa::Residual> parts{{&ab, after_a}, {&digits, digits.start()}};
  for (const Dfa& d : letters) parts.push_back({&d, d.start()});
  Dfa u = Dfa::unite_residuals(parts).value();
  for (const char* yes : {"b", "12x", "cz", "ci", "iz", "ii"}) EXPECT_TRUE(u.matches(yes)) << yes;
  for (const char* no : {"ab", "a", "x", "cb", "ih", "12"}) EXPECT_FALSE(u.matches(no)) << no;
  EXPECT_EQ(Dfa::unite_residuals(std::vector<Dfa::Residual>{{&ab, after_a}}).value().fingerprint(), dfa_of("b").fingerprint());
  // Too large: a clear error.
  auto big = Dfa::unite_residuals(parts, 3);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, Code::kGrammar);
}

TEST(Dfa, RefusesBlowUp) {
  auto re = parse_ecmascript_regex("[ab]*a[ab]{30}");
  ASSERT_TRUE(re);
  auto d = Dfa::from_regex(re.value());
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, Code::kGrammar);
}

// Random patterns from constructs whose meaning ECMAScript and PCRE2 share.
class PatternGenerator {
 public:
  explicit PatternGenerator(uint32_t seed) : rng_(seed) {}

  std::string pattern(int depth = 0) {
    std::string out;
    int n = 1 + static_cast<int>(rng_() % 4);
    for (int i = 0; i < n; ++i) out += term(depth);
    if (depth < 2 && rng_() % 4 == 0) out += "|" + pattern(depth + 1);
    return out;
  }

  std::string subject() {
    std::string s;
    int n = static_cast<int>(rng_() % 8);
    for (int i = 0; i < n; ++i) s += kAlphabet[rng_() % kAlphabet.size()];
    return s;
  }

 private:
  std::string term(int depth) {
    std::string atom;
    switch (rng_() % 11) {
      case 0: atom = "."; break;
      case 1: atom = rng_() % 2 ? "\\d" : "\\s"; break;
      case 2: atom = rng_() % 2 ? "\\w" : "\\W"; break;
      case 3: atom = rng_() % 2 ? "[a-c]" : "[^b1é]"; break;
      case 9: atom = rng_() % 2 ? "\\S" : "[^a-z\\d]"; break;
      case 4:
        if (depth < 2) {
          atom = "(?:" + pattern(depth + 1) + ")";
          break;
        }
        [[fallthrough]];
      case 5: atom = rng_() % 2 ? "\\D" : "[x-z0-2]"; break;
      default: atom = kAlphabet[rng_() % 6]; break;
    }
    static const char* kQuant[] = {"", "", "", "*", "+", "?", "{2}", "{1,3}", "{0,2}", "*?", "{2,}"};
    std::string q = kQuant[rng_() % (sizeof kQuant / sizeof *kQuant)];
    std::string anchor = rng_() % 12 == 0 ? (rng_() % 2 ? "^" : "$") : "";
    return anchor + atom + q;
  }

  std::mt19937 rng_;
  const std::vector<std::string> kAlphabet = {"a", "b", "c", "x", "1", "é", "z", "0", "_", "-", " ", "\n", "中", "😀"};
};

TEST(RegexFuzz, DfaAgreesWithPcre2) {
  PatternGenerator gen(12345);
  int checked = 0, too_complex = 0;
  for (int i = 0; i < 400; ++i) {
    std::string p = gen.pattern();
    Pcre2 ref(p);
    ASSERT_TRUE(ref.ok()) << p;
    auto re = parse_ecmascript_regex(p);
    ASSERT_TRUE(re) << p << ": " << re.error().message;
    auto d = Dfa::from_regex(re.value());
    if (!d) {  // nested counted repetitions can need more DFA states than allowed: a clean error
      EXPECT_NE(d.error().message.find("too complex"), std::string::npos) << d.error().message;
      ++too_complex;
      continue;
    }
    for (int k = 0; k < 200; ++k) {
      std::string s = gen.subject();
      ASSERT_EQ(d.value().matches(s), ref.full_match(s)) << "/" << p << "/ on '" << s << "'";
      ++checked;
    }
  }
  EXPECT_LE(too_complex, 8);
  EXPECT_EQ(checked + too_complex * 200, 80000);
}

TEST(RegexFuzz, MatcherAgreesWithPcre2) {
  PatternGenerator gen(777);
  GrammarCompiler compiler(testing::byte_vocabulary());
  for (int i = 0; i < 150; ++i) {
    std::string p = gen.pattern();
    Pcre2 ref(p);
    auto g = compiler.compile(GrammarKind::kRegex, p);
    if (!g && g.error().message.find("too complex") != std::string::npos) continue;
    if (!g) {  // a pattern that matches nothing cannot constrain output: a compile error
      EXPECT_NE(g.error().message.find("matches no string"), std::string::npos) << p << ": " << g.error().message;
      for (int k = 0; k < 100; ++k) ASSERT_FALSE(ref.full_match(gen.subject())) << p;
      continue;
    }
    Matcher m(g.value());
    for (int k = 0; k < 100; ++k) {
      std::string s = gen.subject();
      ASSERT_EQ(m.accepts_string(s), ref.full_match(s)) << "/" << p << "/ on '" << s << "'";
    }
  }
}

// Outputs generated on the DeepSeek vocabulary with random weights must fully match per PCRE2.
TEST(RandomGeneration, RegexOutputsMatchPcre2) {
  PatternGenerator gen(4242);
  GrammarCompiler compiler(testing::deepseek_vocabulary());
  std::mt19937_64 rng(11);
  int outputs = 0;
  std::vector<std::string> patterns = {"[a-z]{3,8}( [a-z]{3,8}){0,4}\\.", "(\\d{1,3}\\.){3}\\d{1,3}", "\\w+@\\w+\\.(com|org)",
                                       "[^\\n]{0,40}\\n", "(yes|no|maybe)!?", "\"[^\"]*\"", "[一-鿿]{2,6}"};
  for (int i = 0; i < 120; ++i) patterns.push_back(gen.pattern());
  for (const auto& p : patterns) {
    auto g = compiler.compile(GrammarKind::kRegex, p);
    if (!g) continue;  // matches nothing
    Pcre2 ref(p);
    for (int run = 0; run < 3; ++run) {
      Matcher m(g.value());
      auto out = testing::generate(m, rng, 60);
      ASSERT_EQ(out.text.find("<advance failed"), std::string::npos) << p << ": " << out.text;
      if (!out.terminated) continue;
      ++outputs;
      ASSERT_TRUE(ref.full_match(out.text)) << "/" << p << "/ generated '" << out.text << "'";
    }
  }
  EXPECT_GT(outputs, 300);
}

}  // namespace
}  // namespace deepinfer::grammar
