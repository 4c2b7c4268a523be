// StreamingDetokenizer: pieces never split a UTF-8 character and add up to decode().
#include "golden_util.h"
#include "text/byte_level.h"
#include "text/streaming_detokenizer.h"
#include "text/utf8.h"

#include <gtest/gtest.h>

namespace deepinfer::text {
namespace {

using testing::deepseek;

// The token of one raw byte.
TokenId byte_token(unsigned char b) { return deepseek().token_to_id(bytes_to_token(std::string(1, char(b)))).value(); }

TEST(TextStreaming, PiecesAreWholeCharactersAndAddUpToDecode) {
  for (const bool skip : {false, true}) {
    for (const auto& row : testing::read_jsonl("expected.jsonl")) {
      const auto ids = row["ids"].get<std::vector<TokenId>>();
      StreamingDetokenizer stream(deepseek(), skip);
      std::string all;
      for (const TokenId id : ids) {
        auto piece = stream.push(id);
        ASSERT_TRUE(piece);
        EXPECT_EQ(find_invalid_utf8(piece.value()), std::string_view::npos);
        all += piece.value();
      }
      all += stream.flush();
      EXPECT_EQ(all, deepseek().decode(ids, skip).value());
    }
  }
}

TEST(TextStreaming, ByteByByteEmojiAndCjkAreHeldUntilComplete) {
  const std::string chars[] = {"😀", "中", "é", "👍🏽", "\u200d", "a"};
  StreamingDetokenizer stream(deepseek());
  for (const std::string& ch : chars) {
    std::string got;
    for (std::size_t i = 0; i < ch.size(); ++i) {
      const std::string piece = stream.push(byte_token(ch[i])).value();
      // Nothing comes out before the last byte of a character.
      if (i + 1 < ch.size() && (static_cast<unsigned char>(ch[i + 1]) & 0xC0) == 0x80) {
        EXPECT_EQ(piece, "");
      }
      got += piece;
    }
    EXPECT_EQ(got, ch);
  }
  EXPECT_EQ(stream.flush(), "");
}

TEST(TextStreaming, IncompleteAndInvalidBytes) {
  StreamingDetokenizer stream(deepseek());
  for (const unsigned char b : {0xF0, 0x9F, 0x98}) EXPECT_EQ(stream.push(byte_token(b)).value(), "");
  EXPECT_EQ(stream.flush(), "\uFFFD");  // the unfinished emoji
  // A byte that can never start a character is replaced at once; one that breaks a sequence
  // ends it as one replacement character.
  EXPECT_EQ(stream.push(byte_token(0xFF)).value(), "\uFFFD");
  EXPECT_EQ(stream.push(byte_token(0xE4)).value(), "");
  EXPECT_EQ(stream.push(byte_token('x')).value(), "\uFFFDx");
  const std::vector<TokenId> several = {byte_token(0xE4), byte_token(0xB8), byte_token(0xAD), byte_token(0xE6)};
  EXPECT_EQ(stream.push(several).value(), "中");
  EXPECT_EQ(stream.flush(), "\uFFFD");
}

TEST(TextStreaming, SkipSpecial) {
  StreamingDetokenizer stream(deepseek(), true);
  const TokenId bos = deepseek().bos_id().value(), eos = deepseek().eos_id().value();
  std::string all = stream.push(bos).value();
  const auto ids = deepseek().encode("Hi 世界").value();
  for (const TokenId id : ids) all += stream.push(id).value();
  all += stream.push(eos).value() + stream.flush();
  EXPECT_EQ(all, "Hi 世界");
  StreamingDetokenizer keep(deepseek());
  EXPECT_EQ(keep.push(eos).value(), "<｜end▁of▁sentence｜>");
}

}  // namespace
}  // namespace deepinfer::text
