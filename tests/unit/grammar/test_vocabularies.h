// Vocabularies for grammar tests and the benchmark. Test-only: the engine takes token bytes from
// the tokenizer module (di_text) in production.
#pragma once

#include "grammar/token_vocabulary.h"
#include "util/result.h"

#include <memory>
#include <string>

namespace deepinfer::grammar::testing {

// The DeepSeek vocabulary from a HF tokenizer.json (ByteLevel BPE): token bytes recovered through
// the inverse of GPT-2's bytes_to_unicode, special added tokens empty, padded with empty entries
// to `vocab_size`; EOS = the tokenizer's <｜end▁of▁sentence｜>.
Result<std::shared_ptr<const TokenVocabulary>> load_hf_vocabulary(const std::string& tokenizer_json, size_t vocab_size);

// tests/golden/tokenizer/tokenizer.json padded to DeepSeek-V4's 129,280 logits (cached per process).
std::shared_ptr<const TokenVocabulary> deepseek_vocabulary();

// 256 one-byte tokens (id = byte value) plus EOS (id 256): every byte string is tokenizable.
std::shared_ptr<const TokenVocabulary> byte_vocabulary();

}  // namespace deepinfer::grammar::testing
