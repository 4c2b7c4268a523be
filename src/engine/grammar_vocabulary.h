// The grammar engine's view of a tokenizer: the exact bytes of every token id up to the model's
// vocabulary size (special tokens and ids the tokenizer lacks are never allowed by a grammar), and
// the end-of-sequence ids, which a grammar allows exactly when its output is complete.
#pragma once

#include "grammar/token_vocabulary.h"
#include "text/tokenizer.h"
#include "util/result.h"

#include <memory>
#include <span>

namespace deepinfer {

Result<std::shared_ptr<const grammar::TokenVocabulary>> grammar_vocabulary(const text::Tokenizer& tokenizer, int32_t vocab_size,
                                                                           std::span<const int32_t> eos_ids);

}  // namespace deepinfer
