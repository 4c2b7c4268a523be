// The parts of tokenizer.json beyond DeepSeek's, on a small hand-written tokenizer
// (tests/golden/tokenizer/small_tokenizer.json: the 256 byte tokens with id = byte, a few merges,
// and added tokens with each flag). Expected values are what HF tokenizers 0.23 gives.
#include "golden_util.h"
#include "text/pre_tokenizer.h"
#include "text/regex.h"

#include <gtest/gtest.h>

namespace deepinfer::text {
namespace {

nlohmann::json small_spec() {
  static const nlohmann::json spec = nlohmann::json::parse(std::ifstream(testing::golden_path("small_tokenizer.json")));
  return spec;
}

Tokenizer small(const nlohmann::json& spec = small_spec()) {
  auto t = Tokenizer::from_json(spec.dump());
  EXPECT_TRUE(t) << t.error().message;
  return std::move(t).value();
}

std::vector<TokenId> ids(const Tokenizer& t, std::string_view text) {
  auto r = t.encode(text);
  EXPECT_TRUE(r) << r.error().message;
  return r ? r.value() : std::vector<TokenId>{};
}

// Pieces of `step` followed by ByteLevel, as raw text.
std::vector<std::string> pieces(const nlohmann::json& step, std::string_view text) {
  const nlohmann::json seq = {{"type", "Sequence"},
                              {"pretokenizers", {step, {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  auto pre = PreTokenizer::from_json(seq);
  EXPECT_TRUE(pre) << pre.error().message;
  std::vector<std::string> out;
  auto r = pre.value().split(text, [&](std::string_view p) -> Result<void> {
    out.emplace_back(p);
    return ok();
  });
  EXPECT_TRUE(r);
  return out;
}

nlohmann::json split(nlohmann::json pattern, const char* behavior, bool invert) {
  return {{"type", "Split"}, {"pattern", std::move(pattern)}, {"behavior", behavior}, {"invert", invert}};
}

using Pieces = std::vector<std::string>;

TEST(TextComponents, AddedTokensLongestMatchAndFlags) {
  const Tokenizer t = small();
  // "<sp>x" beats "<sp>" where both match (leftmost-longest).
  EXPECT_EQ(ids(t, "<sp>x<sp> hello"), (std::vector<TokenId>{270, 269, 32, 259}));
  // <mask> has lstrip and rstrip: it takes the spaces around it (Unicode White_Space, U+3000 too).
  EXPECT_EQ(ids(t, "a <mask>  b"), (std::vector<TokenId>{97, 271, 98}));
  EXPECT_EQ(ids(t, "a\t<mask>\u3000b<mask>"), (std::vector<TokenId>{97, 271, 98, 271}));
  EXPECT_EQ(ids(t, "<mask><mask>"), (std::vector<TokenId>{271, 271}));
  // [W] is single_word: not next to a word character (letters, digits, _, marks).
  EXPECT_EQ(ids(t, "[W] x[W] [W]y [W]"), (std::vector<TokenId>{272, 32, 120, 91, 87, 93, 32, 91, 87, 93, 121, 32, 272}));
  EXPECT_EQ(ids(t, "[W]_[W] é[W] [W]-"),
            (std::vector<TokenId>{91, 87, 93, 95, 91, 87, 93, 32, 195, 169, 91, 87, 93, 32, 272, 45}));
  // "ﬁx" is normalized=true; with no normalizer it matches only itself.
  EXPECT_EQ(ids(t, "ﬁx fix ﬁ"), (std::vector<TokenId>{273, 32, 268, 32, 239, 172, 129}));
  EXPECT_TRUE(t.is_special(269));  // <sp>
  EXPECT_FALSE(t.is_special(270));
}

TEST(TextComponents, AddedTokenIdsAreAssignedAsHfDoes) {
  // HF numbers added tokens itself when it loads a file: the ids written there do not count.
  nlohmann::json spec = small_spec();
  spec["added_tokens"][0]["id"] = 300;
  spec["added_tokens"][1]["id"] = 280;
  spec["added_tokens"].push_back(spec["added_tokens"][2]);  // an exact repeat is ignored
  const Tokenizer t = small(spec);
  EXPECT_EQ(ids(t, "<sp> <sp>x <mask>"), (std::vector<TokenId>{269, 32, 270, 271}));
  EXPECT_EQ(t.token_to_id("<sp>").value(), 269);
  EXPECT_FALSE(t.has_token(300));
  EXPECT_EQ(t.vocab_size(), 274);
}

TEST(TextComponents, Normalizers) {
  struct Case {
    const char* form;
    std::vector<TokenId> ligature, mixed;
  };
  const Case cases[] = {
      {"NFC", {273, 32, 268, 32, 239, 172, 129}, {195, 169, 32, 195, 169, 32, 195, 133, 32, 226, 145, 160, 32, 239, 188, 161, 239, 188, 145}},
      {"NFD", {273, 32, 268, 32, 239, 172, 129}, {101, 204, 129, 32, 101, 204, 129, 32, 65, 204, 138, 32, 226, 145, 160, 32, 239, 188, 161, 239, 188, 145}},
      // The normalized added token "ﬁx" is looked for as its NFKC form "fix".
      {"NFKC", {273, 32, 273, 32, 267}, {195, 169, 32, 195, 169, 32, 195, 133, 32, 49, 32, 65, 49}},
      {"NFKD", {273, 32, 273, 32, 267}, {101, 204, 129, 32, 101, 204, 129, 32, 65, 204, 138, 32, 49, 32, 65, 49}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.form);
    nlohmann::json spec = small_spec();
    spec["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", c.form}}}}};
    const Tokenizer t = small(spec);
    EXPECT_EQ(ids(t, "ﬁx fix ﬁ"), c.ligature);
    EXPECT_EQ(ids(t, "e\u0301 é Å ① Ａ１"), c.mixed);
  }
}

TEST(TextComponents, SplitBehaviours) {
  const nlohmann::json dash = {{"String", "-"}};
  const nlohmann::json digits = {{"Regex", "\\d+"}};
  const std::string words = "the-final--countdown", mixed = "1ab23cd456";
  struct Case {
    const char* behavior;
    bool invert;
    Pieces dash, digits;
  };
  const Case cases[] = {
      {"Removed", false, {"the", "final", "countdown"}, {"ab", "cd"}},
      {"Removed", true, {"-", "-", "-"}, {"1", "23", "456"}},
      {"Isolated", false, {"the", "-", "final", "-", "-", "countdown"}, {"1", "ab", "23", "cd", "456"}},
      {"Isolated", true, {"the", "-", "final", "-", "-", "countdown"}, {"1", "ab", "23", "cd", "456"}},
      {"MergedWithPrevious", false, {"the-", "final-", "-", "countdown"}, {"1", "ab23", "cd456"}},
      {"MergedWithPrevious", true, {"the", "-final", "-", "-countdown"}, {"1ab", "23cd", "456"}},
      {"MergedWithNext", false, {"the", "-final", "-", "-countdown"}, {"1ab", "23cd", "456"}},
      {"MergedWithNext", true, {"the-", "final-", "-", "countdown"}, {"1", "ab23", "cd456"}},
      {"Contiguous", false, {"the", "-", "final", "--", "countdown"}, {"1", "ab", "23", "cd", "456"}},
      {"Contiguous", true, {"the", "-", "final", "--", "countdown"}, {"1", "ab", "23", "cd", "456"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.behavior) + (c.invert ? " inverted" : ""));
    EXPECT_EQ(pieces(split(dash, c.behavior, c.invert), words), c.dash);
    EXPECT_EQ(pieces(split(digits, c.behavior, c.invert), mixed), c.digits);
  }
}

TEST(TextComponents, EmptyMatchesIterateLikeOniguruma) {
  EXPECT_EQ(pieces(split({{"Regex", "x*"}}, "MergedWithNext", false), "abxxc"), (Pieces{"a", "b", "xxc"}));
  EXPECT_EQ(pieces(split({{"Regex", "x*"}}, "Isolated", false), "abxxc"), (Pieces{"a", "b", "xx", "c"}));
}

TEST(TextComponents, Digits) {
  EXPECT_EQ(pieces({{"type", "Digits"}, {"individual_digits", true}}, "a123b45٣٤"),
            (Pieces{"a", "1", "2", "3", "b", "4", "5", "٣", "٤"}));
  EXPECT_EQ(pieces({{"type", "Digits"}, {"individual_digits", false}}, "a123b45٣٤"), (Pieces{"a", "123", "b", "45٣٤"}));
}

TEST(TextComponents, ByteLevelPrefixSpaceAndRegex) {
  const std::string text = "hello world's  end";
  struct Case {
    bool prefix, regex;
    std::vector<TokenId> ids;
  };
  const Case cases[] = {{true, true, {32, 259, 264, 39, 115, 32, 32, 101, 110, 100}},
                        {true, false, {32, 259, 264, 39, 115, 32, 32, 101, 110, 100}},
                        {false, true, {259, 264, 39, 115, 32, 32, 101, 110, 100}}};
  for (const Case& c : cases) {
    nlohmann::json spec = small_spec();
    spec["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", c.prefix}, {"use_regex", c.regex}};
    EXPECT_EQ(ids(small(spec), text), c.ids) << c.prefix << c.regex;
  }
}

TEST(TextComponents, RegexTakesOnigurumaMeanings) {
  // \s includes NEL (U+0085) but not U+180E; \w includes combining marks.
  EXPECT_EQ(pieces(split({{"Regex", "\\s+"}}, "Removed", false), "a\u0085b\u180Ec"), (Pieces{"a", "b\u180Ec"}));
  EXPECT_EQ(pieces(split({{"Regex", "\\w+"}}, "Removed", false), "e\u0301-x"), (Pieces{"-"}));
  // U+1FAE8 (Unicode 15) is a symbol, as HF's Oniguruma (Unicode 16) knows.
  EXPECT_EQ(pieces(split({{"Regex", "\\p{S}+"}}, "Removed", false), "a\U0001FAE8b"), (Pieces{"a", "b"}));
  EXPECT_EQ(onig_to_pcre2("[^\\s\\p{L}]", false), "[^\\t-\\r\\x{85}\\p{Z}\\p{L}]");
}

TEST(TextComponents, TokenBytesAndVocabulary) {
  const Tokenizer t = small();
  EXPECT_EQ(t.vocab_size(), 274);
  EXPECT_EQ(t.token_bytes(259), "hello");
  EXPECT_EQ(t.token_bytes(32), " ");
  EXPECT_EQ(t.id_to_token(32).value(), "Ġ");
  EXPECT_EQ(t.token_to_id("Ġworld").value(), 264);
  EXPECT_EQ(t.token_to_id("<mask>").value(), 271);
  EXPECT_FALSE(t.token_to_id("nope").has_value());
  EXPECT_EQ(t.token_bytes(271), "<mask>");
  // An added token with a character outside the byte alphabet decodes to its own UTF-8.
  EXPECT_EQ(t.token_bytes(273), "ﬁx");
  EXPECT_FALSE(t.bos_id().has_value());
}

}  // namespace
}  // namespace deepinfer::text
