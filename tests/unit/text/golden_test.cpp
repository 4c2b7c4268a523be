// Exact agreement with HF tokenizers / transformers on the golden corpus and conversations
// (tests/golden/tokenizer/make_golden.py wrote the expectations).
#include "golden_util.h"
#include "text/chat.h"

#include <gtest/gtest.h>

namespace deepinfer::text {
namespace {

using testing::deepseek;
using testing::read_jsonl;

TEST(TextGolden, EncodeDecodeMatchHf) {
  const auto rows = read_jsonl("expected.jsonl");
  ASSERT_EQ(rows.size(), 171u) << "expected.jsonl missing or incomplete";
  int failures = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const std::string text = row["text"];
    const auto ids = row["ids"].get<std::vector<TokenId>>();
    SCOPED_TRACE("corpus line " + std::to_string(i + 1));
    auto got = deepseek().encode(text, EncodeMode::kRecognizeAddedTokens);
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_EQ(got.value(), ids);
    auto plain = deepseek().encode(text, EncodeMode::kPlainText);
    ASSERT_TRUE(plain) << plain.error().message;
    EXPECT_EQ(plain.value(), row["plain_ids"].get<std::vector<TokenId>>());
    auto decoded = deepseek().decode(ids);
    ASSERT_TRUE(decoded);
    EXPECT_EQ(decoded.value(), row["decoded"].get<std::string>());
    auto skipped = deepseek().decode(ids, true);
    ASSERT_TRUE(skipped);
    EXPECT_EQ(skipped.value(), row["decoded_skip_special"].get<std::string>());
    failures += ::testing::Test::HasFailure() ? 1 : 0;
    if (failures > 5) FAIL() << "stopping after 5 failing lines";
  }
}

TEST(TextGolden, ChatMatchesTransformersTemplate) {
  const auto rows = read_jsonl("chat_expected.jsonl");
  const auto convs = nlohmann::json::parse(std::ifstream(testing::golden_path("conversations.json")));
  ASSERT_EQ(rows.size(), 2 * convs.size()) << "chat_expected.jsonl missing or incomplete";
  for (const auto& row : rows) {
    const auto conv = std::find_if(convs.begin(), convs.end(), [&](const auto& c) { return c["name"] == row["name"]; });
    ASSERT_NE(conv, convs.end());
    const bool agp = row["add_generation_prompt"];
    SCOPED_TRACE(row["name"].get<std::string>() + (agp ? " +generation prompt" : ""));
    auto messages = chat_messages_from_json((*conv)["messages"]);
    ASSERT_TRUE(messages) << messages.error().message;
    auto text = render_chat(messages.value(), agp);
    ASSERT_TRUE(text) << text.error().message;
    EXPECT_EQ(text.value(), row["text"].get<std::string>());
    auto ids = encode_chat(deepseek(), messages.value(), agp);
    ASSERT_TRUE(ids) << ids.error().message;
    EXPECT_EQ(ids.value(), row["ids"].get<std::vector<TokenId>>());
  }
}

}  // namespace
}  // namespace deepinfer::text
