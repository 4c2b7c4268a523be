// StreamingDetokenizer: turns generated token ids into text as they arrive. A token may end in
// the middle of a UTF-8 character (byte-level BPE splits emoji and CJK across tokens); those bytes
// are held back until the character is complete, so no piece ever contains half a character.
// The concatenation of all pieces plus flush() equals Tokenizer::decode of all the ids.
#pragma once

#include "text/tokenizer.h"

#include <span>
#include <string>

namespace deepinfer::text {

class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(Tokenizer tokenizer, bool skip_special = false)
      : tokenizer_(std::move(tokenizer)), skip_special_(skip_special) {}

  // The text completed by `id` (possibly empty). An id without a token is Code::kInvalidArgument
  // and changes nothing.
  Result<std::string> push(TokenId id);
  Result<std::string> push(std::span<const TokenId> ids);

  // The held-back tail at the end of the stream: an incomplete character becomes U+FFFD. The
  // detokenizer is then empty and may be reused.
  std::string flush();

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  std::string pending_;  // bytes of a character not yet complete (at most 3)
};

}  // namespace deepinfer::text
