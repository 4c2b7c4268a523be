#include "engine/grammar_vocabulary.h"

namespace deepinfer {

Result<std::shared_ptr<const grammar::TokenVocabulary>> grammar_vocabulary(const text::Tokenizer& tokenizer, int32_t vocab_size,
                                                                           std::span<const int32_t> eos_ids) {
  if (vocab_size <= 0) return make_error(Code::kInvalidArgument, "vocabulary size {} must be positive", vocab_size);
  std::vector<std::string> bytes(static_cast<size_t>(vocab_size));
  for (int32_t id = 0; id < vocab_size; ++id)
    if (tokenizer.has_token(id) && !tokenizer.is_special(id)) bytes[static_cast<size_t>(id)] = std::string(tokenizer.token_bytes(id));
  std::vector<int32_t> eos;
  for (int32_t e : eos_ids)
    if (e >= 0 && e < vocab_size) eos.push_back(e);
  return grammar::TokenVocabulary::create(std::move(bytes), std::move(eos));
}

}  // namespace deepinfer
