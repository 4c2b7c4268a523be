// The vocabulary's non-empty token byte strings as a trie laid out in preorder (= lexicographic
// order). A subtree is the contiguous node range [i, subtree_end(i)), so a walk skips a rejected
// prefix with one assignment. Node 0 is the root (the empty prefix).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace deepinfer::grammar {

class TokenTrie {
 public:
  TokenTrie() = default;
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  uint32_t num_nodes() const { return static_cast<uint32_t>(byte_.size()); }
  uint8_t byte(uint32_t node) const { return byte_[node]; }
  uint32_t depth(uint32_t node) const { return depth_[node]; }
  uint32_t subtree_end(uint32_t node) const { return end_[node]; }
  bool has_children(uint32_t node) const { return end_[node] > node + 1; }
  std::span<const int32_t> tokens(uint32_t node) const {
    return {token_ids_.data() + token_begin_[node], token_begin_[node + 1] - token_begin_[node]};
  }
  // The node whose prefix is token `id`'s bytes (0 for empty tokens).
  uint32_t node_of(int32_t id) const { return node_of_token_[static_cast<size_t>(id)]; }
  uint32_t max_depth() const { return max_depth_; }

 private:
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> end_;
  std::vector<uint32_t> token_begin_;
  std::vector<int32_t> token_ids_;
  std::vector<uint32_t> node_of_token_;
  uint32_t max_depth_ = 0;
};

}  // namespace deepinfer::grammar
