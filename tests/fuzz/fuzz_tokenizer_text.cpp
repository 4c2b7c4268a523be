// The DeepSeek tokenizer on arbitrary text and ids: encode in both modes, decode, stream.
// Input: text (also read as little-endian int32 ids for decode).
#include "deepseek_tokenizer.h"
#include "text/streaming_detokenizer.h"
#include "text/tokenizer.h"

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace deepinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const text::Tokenizer& t = fuzz::deepseek_tokenizer();
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (const auto mode : {text::EncodeMode::kRecognizeAddedTokens, text::EncodeMode::kPlainText}) {
    auto ids = t.encode(input, mode);
    if (!ids) continue;  // invalid UTF-8
    auto back = t.decode(ids.value());
    if (!back) std::abort();
    // Byte-level BPE without a normalizer is lossless on valid UTF-8.
    if (back.value() != input) std::abort();
  }
  std::vector<text::TokenId> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  auto decoded = t.decode(ids, size % 2 == 1);
  text::StreamingDetokenizer stream(t, size % 2 == 1);
  std::string streamed;
  bool all_known = true;
  for (const text::TokenId id : ids) {
    auto piece = stream.push(id);
    if (!piece) {
      all_known = false;
      break;
    }
    streamed += piece.value();
  }
  streamed += stream.flush();
  if (all_known != decoded.has_value()) std::abort();
  if (decoded && decoded.value() != streamed) std::abort();
  return 0;
}
