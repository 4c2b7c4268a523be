#include "../small_stack.h"
#include "util/json_excerpt.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace deepinfer {
namespace {

using json = nlohmann::json;

TEST(JsonExcerpt, ShortValuesAreTheirCompactJson) {
  const json v = json::parse(R"({"a": [1, 2.5, "x\"y", null, true], "b": {}})");
  EXPECT_EQ(json_excerpt(v), v.dump());
  EXPECT_EQ(json_excerpt(json(7)), "7");
  EXPECT_EQ(json_excerpt(json::array()), "[]");
}

TEST(JsonExcerpt, LongAndDeepValuesAreCutWithoutRecursion) {
  const std::string long_string(1 << 20, 'v');
  const std::string cut = json_excerpt(json(long_string), 20);
  EXPECT_LE(cut.size(), 30u);
  EXPECT_EQ(cut.substr(0, 4), "\"vvv");
  EXPECT_NE(cut.find("..."), std::string::npos);

  const std::size_t depth = 200000;
  const json deep = json::parse(std::string(depth, '[') + std::string(depth, ']'));
  testing::run_on_small_stack([&] {
    const std::string s = json_excerpt(deep, 30);
    EXPECT_EQ(s, std::string(30, '[') + "...");
  });
  json wide = json::array();
  for (int i = 0; i < 100000; ++i) wide.push_back(i);
  EXPECT_LE(json_excerpt(wide, 40).size(), 60u);
}

TEST(JsonExcerpt, CutsNeverSplitACharacter) {
  EXPECT_EQ(text_excerpt("h\xc3\xa9llo", 2), "h...");  // é is two bytes
  EXPECT_EQ(text_excerpt("abc", 3), "abc");
  const std::string s = json_excerpt(json("\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"), 4);  // €€€
  EXPECT_EQ(s, "\"\xe2\x82\xac...");  // the cut may take the closing quote
}

}  // namespace
}  // namespace deepinfer
