// The DeepSeek tokenizer (the golden tokenizer.json, DI_FUZZ_TOKENIZER) for the harnesses that
// encode with it, loaded once. Including this also defines LLVMFuzzerInitialize: loading the 8 MB
// tokenizer.json takes seconds under the sanitizers, so it is done before the first input, outside
// libFuzzer's per-input timeout. Include it from one file of a harness only.
#pragma once

#include "text/tokenizer.h"

#include <cstdlib>
#include <utility>

namespace deepinfer::fuzz {

inline const text::Tokenizer& deepseek_tokenizer() {
  static const text::Tokenizer tok = [] {
    auto t = text::Tokenizer::from_file(DI_FUZZ_TOKENIZER);
    if (!t) std::abort();
    return std::move(t).value();
  }();
  return tok;
}

}  // namespace deepinfer::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)deepinfer::fuzz::deepseek_tokenizer();
  return 0;
}
