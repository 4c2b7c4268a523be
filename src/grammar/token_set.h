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

  void or_into(uint32_t* words) const;
  void copy_into(uint32_t* words, size_t num_words) const;
  size_t memory_bytes() const { return ids_.size() * sizeof(int32_t) + bits_.size() * sizeof(uint32_t); }

 private:
  std::vector<int32_t> ids_;
  std::vector<uint32_t> bits_;
};

}  // namespace deepinfer::grammar
