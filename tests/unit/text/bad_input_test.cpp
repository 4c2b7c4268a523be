// Bad input never crashes: invalid UTF-8, unknown ids, malformed or unsupported tokenizer.json.
#include "golden_util.h"
#include "text/chat.h"
#include "text/streaming_detokenizer.h"

#include <gtest/gtest.h>

namespace deepinfer::text {
namespace {

using testing::deepseek;

nlohmann::json small_spec() { return nlohmann::json::parse(std::ifstream(testing::golden_path("small_tokenizer.json"))); }

void expect_error(const Result<Tokenizer>& r, Code code, std::string_view needle) {
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, code) << r.error().message;
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
}

TEST(TextBadInput, InvalidUtf8IsRejectedWithItsOffset) {
  const std::pair<std::string, std::size_t> cases[] = {
      {"a\xff" "b", 1},          // never valid
      {"ok \xe4\xbd", 3},        // truncated character
      {"\xc0\xaf", 0},           // overlong
      {"ab\xed\xa0\x80", 2},     // surrogate
      {"x\xf4\x90\x80\x80", 1},  // above U+10FFFF
  };
  for (const auto& [text, offset] : cases) {
    for (const EncodeMode mode : {EncodeMode::kRecognizeAddedTokens, EncodeMode::kPlainText}) {
      auto r = deepseek().encode(text, mode);
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error().code, Code::kInvalidArgument);
      EXPECT_NE(r.error().message.find("byte offset " + std::to_string(offset)), std::string::npos) << r.error().message;
    }
  }
  const ChatMessage bad[] = {{"user", std::string("hi \xff"), {}}};
  EXPECT_FALSE(encode_chat(deepseek(), bad, true));
}

TEST(TextBadInput, UnknownIdsOnDecode) {
  for (const TokenId id : {-1, deepseek().vocab_size(), 1 << 30}) {
    const std::vector<TokenId> ids = {19923, id};
    auto r = deepseek().decode(ids);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kInvalidArgument);
    EXPECT_NE(r.error().message.find(std::to_string(id)), std::string::npos);
    EXPECT_TRUE(deepseek().token_bytes(id).empty());
    EXPECT_FALSE(deepseek().id_to_token(id).has_value());
  }
  StreamingDetokenizer stream(deepseek());
  EXPECT_FALSE(stream.push(-5));
  EXPECT_EQ(stream.push(19923).value(), "Hello");
}

TEST(TextBadInput, MalformedTokenizerJson) {
  const std::string good = small_spec().dump();
  expect_error(Tokenizer::from_json(good.substr(0, good.size() / 2)), Code::kModelFormat, "not valid JSON");
  expect_error(Tokenizer::from_json("[1, 2]"), Code::kModelFormat, "not a JSON object");
  expect_error(Tokenizer::from_file("/nonexistent/tokenizer.json"), Code::kNotFound, "/nonexistent/tokenizer.json");

  auto with = [](auto edit) {
    nlohmann::json j = small_spec();
    edit(j);
    return Tokenizer::from_json(j.dump());
  };
  expect_error(with([](auto& j) { j.erase("model"); }), Code::kModelFormat, "no \"model\"");
  expect_error(with([](auto& j) { j["model"]["type"] = "WordPiece"; }), Code::kUnsupported, "WordPiece");
  expect_error(with([](auto& j) { j["model"].erase("vocab"); }), Code::kModelFormat, "vocab");
  expect_error(with([](auto& j) { j["model"]["merges"].push_back("zz qq"); }), Code::kModelFormat, "zz qq");
  expect_error(with([](auto& j) { j["model"]["merges"].push_back("nospace"); }), Code::kModelFormat, "nospace");
  expect_error(with([](auto& j) { j["model"]["dropout"] = 0.1; }), Code::kUnsupported, "dropout");
  expect_error(with([](auto& j) { j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Metaspace"}}; }),
               Code::kUnsupported, "Metaspace");
  expect_error(with([](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; }),
               Code::kModelFormat, "bad regex \"(unclosed\"");
  expect_error(with([](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; }),
               Code::kModelFormat, "Sideways");
  expect_error(with([](auto& j) { j["pre_tokenizer"] = nullptr; }), Code::kUnsupported, "ByteLevel");
  expect_error(with([](auto& j) { j["normalizer"] = {{"type", "Lowercase"}}; }), Code::kUnsupported, "Lowercase");
  expect_error(with([](auto& j) { j["decoder"] = {{"type", "WordPiece"}}; }), Code::kUnsupported, "WordPiece");
  expect_error(with([](auto& j) { j["truncation"] = {{"max_length", 8}}; }), Code::kUnsupported, "truncation");
  expect_error(with([](auto& j) { j["added_tokens"][0]["id"] = "x"; }), Code::kModelFormat, "added_tokens");
  expect_error(with([](auto& j) { j["added_tokens"][1]["content"] = "<sp>"; }), Code::kModelFormat, "twice");
}

TEST(TextBadInput, ChatMessagesTheTemplateCannotRender) {
  const ChatMessage unknown_role[] = {{"developer", std::string("x"), {}}};
  auto r = render_chat(unknown_role, false);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("developer"), std::string::npos);
  const ChatMessage no_content[] = {{"user", std::nullopt, {}}};
  EXPECT_FALSE(encode_chat(deepseek(), no_content, false));
  EXPECT_FALSE(chat_messages_from_json(nlohmann::json::parse(R"([{"role": 3}])")));
  EXPECT_FALSE(chat_messages_from_json(nlohmann::json::parse(
      R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}])")));
}

}  // namespace
}  // namespace deepinfer::text
