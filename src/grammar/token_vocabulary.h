// What the grammar engine needs to know about a tokenizer: the exact bytes each token decodes
// to, and which ids end the sequence. Built once per model and shared (immutable).
#pragma once

#include "grammar/token_trie.h"
#include "util/result.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::grammar {

class TokenVocabulary {
 public:
  // token_bytes[i] = the bytes of token i; empty for tokens a grammar must never allow (special
  // tokens, padding). The vocabulary size (mask width) is token_bytes.size(). `eos_ids` are the
  // tokens allowed exactly when the grammar can end; their bytes are ignored.
  static Result<std::shared_ptr<const TokenVocabulary>> create(std::vector<std::string> token_bytes,
                                                               std::vector<int32_t> eos_ids);

  size_t size() const { return bytes_.size(); }
  size_t mask_words() const { return (bytes_.size() + 31) / 32; }
  std::string_view bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  std::span<const int32_t> eos_ids() const { return eos_; }
  bool is_eos(int32_t id) const;
  // Tokens longer than this are kept apart (about 1% of a BPE vocabulary): walks over the short
  // ones can be shared by DFA states that agree on all strings up to this length.
  static constexpr size_t kShortTokenBytes = 16;
  // Hash of the bytes and eos ids: identifies the tokenizer in cache keys.
  uint64_t fingerprint() const { return fingerprint_; }
  const TokenTrie& trie() const { return trie_; }  // all tokens
  const TokenTrie& short_trie() const { return short_trie_; }
  const TokenTrie& long_trie() const { return long_trie_; }

 private:
  TokenVocabulary() = default;
  std::vector<std::string> bytes_;
  std::vector<int32_t> eos_;
  TokenTrie trie_, short_trie_, long_trie_;
  uint64_t fingerprint_ = 0;
};

}  // namespace deepinfer::grammar
