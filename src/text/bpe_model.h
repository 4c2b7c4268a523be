// BpeModel: the "model" of a byte-level BPE tokenizer.json: vocabulary, ranked merges, and the
// merge loop of HF `tokenizers` (lowest rank first, leftmost on ties), with unk_token / fuse_unk /
// ignore_merges. Its input pieces are raw bytes, each standing for its byte-level character.
#pragma once

#include "text/token_id.h"
#include "util/result.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace deepinfer::text {

class BpeModel {
 public:
  static Result<BpeModel> from_json(const nlohmann::json& model);

  // Appends the ids of one pre-tokenized piece.
  void encode(std::string_view piece, std::vector<TokenId>& out) const;

  // Vocabulary entries as tokenizer.json spells them (byte-level characters).
  const std::unordered_map<std::string, TokenId>& vocab() const { return vocab_; }

 private:
  struct Merge {
    uint32_t rank;
    TokenId merged;
  };
  // Open addressing over (left id, right id): the merge table is probed on every pair of every word.
  class MergeTable {
   public:
    void reserve(std::size_t n);
    void insert(TokenId left, TokenId right, Merge m);
    const Merge* find(TokenId left, TokenId right) const;

   private:
    static uint64_t key(TokenId l, TokenId r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }
    std::vector<uint64_t> keys_;
    std::vector<Merge> values_;
    std::size_t mask_ = 0;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};

  void merge_word(std::string_view piece, std::vector<TokenId>& out) const;

  std::unordered_map<std::string, TokenId> vocab_;
  std::unordered_map<std::string, TokenId> vocab_by_bytes_;  // for ignore_merges: raw bytes → id
  std::array<TokenId, 256> byte_ids_{};                      // -1 where the vocabulary lacks the byte
  MergeTable merges_;
  TokenId unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

}  // namespace deepinfer::text
