// tokenizer.json loading, then encode / decode / streaming with whatever loads.
// Input: tokenizer.json text, optionally NUL and text to encode.
#include "fuzz_input.h"
#include "text/streaming_detokenizer.h"
#include "text/tokenizer.h"

#include <cstdlib>

using namespace deepinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [json, rest] = fuzz::split_input(data, size);
  auto tok = text::Tokenizer::from_json(json);
  if (!tok) return 0;
  const text::Tokenizer& t = tok.value();
  const std::string_view inputs[] = {rest, "Hello, world! 123 \xe4\xbd\xa0\xe5\xa5\xbd  \n\t x"};
  for (const std::string_view input : inputs) {
    for (const auto mode : {text::EncodeMode::kRecognizeAddedTokens, text::EncodeMode::kPlainText}) {
      auto ids = t.encode(input, mode);
      if (!ids) continue;
      for (const text::TokenId id : ids.value())
        if (!t.has_token(id)) std::abort();  // encode produced an id decode cannot take
      auto back = t.decode(ids.value());
      if (!back) std::abort();
      text::StreamingDetokenizer stream(t);
      std::string streamed;
      for (const text::TokenId id : ids.value()) streamed += stream.push(id).value();
      streamed += stream.flush();
      if (streamed != back.value()) std::abort();  // streaming must equal decoding
    }
  }
  return 0;
}
