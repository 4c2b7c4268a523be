#include "text/streaming_detokenizer.h"

#include "text/utf8.h"

namespace deepinfer::text {

Result<std::string> StreamingDetokenizer::push(TokenId id) { return push(std::span<const TokenId>(&id, 1)); }

Result<std::string> StreamingDetokenizer::push(std::span<const TokenId> ids) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!tokenizer_.has_token(ids[i])) {
      return make_error(Code::kInvalidArgument, "unknown token id {} (position {})", ids[i], i);
    }
  }
  std::string bytes = std::move(pending_);
  for (const TokenId id : ids) {
    if (!(skip_special_ && tokenizer_.is_special(id))) bytes += tokenizer_.token_bytes(id);
  }
  const std::size_t ready = emittable_utf8_prefix(bytes);
  std::string text;
  append_utf8_lossy(text, std::string_view(bytes).substr(0, ready));
  pending_ = bytes.substr(ready);
  return text;
}

std::string StreamingDetokenizer::flush() {
  std::string text;
  append_utf8_lossy(text, pending_);
  pending_.clear();
  return text;
}

}  // namespace deepinfer::text
