// A set of token ids in the form that is cheapest to merge into a mask: a sorted list when small,
// a bitset over the vocabulary otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace deepinfer::grammar {

class TokenSet {
 public:
  TokenSet() = default;
  // From a mask of `num_words` words (bit i = token i).
  static TokenSet from_mask(const uint32_t* words, size_t num_words);
  // From distinct ids below num_words * 32, in any order.
  static TokenSet from_ids(std::vector<int32_t> ids, size_t num_words);
  // Whether from_ids keeps `count` ids as a list (else as a bitset).
  static bool list_form(size_t count, size_t num_words) { return count < num_words * 32 / kListFraction; }
  // A mask known to hold at least as many members as list_form allows.
  static TokenSet from_dense_mask(std::vector<uint32_t> words);

  void append_to(std::vector<int32_t>& ids) const;

  void or_into(uint32_t* words) const;
  void copy_into(uint32_t* words, size_t num_words) const;
  size_t memory_bytes() const { return ids_.size() * sizeof(int32_t) + bits_.size() * sizeof(uint32_t); }

 private:
  // A list costs 32 bits per member, a bitset 1 bit per vocabulary entry.
  static constexpr size_t kListFraction = 32;
  std::vector<int32_t> ids_;
  std::vector<uint32_t> bits_;
};

}  // namespace deepinfer::grammar
