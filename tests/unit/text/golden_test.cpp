// Exact agreement with HF tokenizers / transformers on the golden corpus and conversations
// (tests/golden/tokenizer/make_golden.py wrote the expectations).
#include "golden_util.h"
#include "text/chat.h"

#include <gtest/gtest.h>

#include <thread>

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

TEST(TextGolden, ConcurrentEncodeAndDecodeAgree) {
  const auto rows = read_jsonl("expected.jsonl");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (const auto& row : rows) {
          const auto ids = row["ids"].get<std::vector<TokenId>>();
          const auto got = deepseek().encode(row["text"].get<std::string>());
          const auto text = deepseek().decode(ids);
          if (!got || got.value() != ids || !text || text.value() != row["decoded"]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace deepinfer::text
