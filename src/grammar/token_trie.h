// The vocabulary's non-empty token byte strings as a trie laid out in preorder (= lexicographic
// order). A subtree is the contiguous node range [i, subtree_end(i)), so a walk skips a rejected
// prefix with one assignment. Node 0 is the root (the empty prefix). Nodes are packed (12 bytes)
// because mask computation walks them linearly.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace deepinfer::grammar {

class TokenTrie {
 public:
  struct Node {
    uint8_t byte;
    uint8_t more_tokens;  // other tokens with the same bytes exist (see tokens())
    uint16_t depth;
    uint32_t end;         // one past the last node of the subtree
    int32_t token;        // a token whose bytes end here, or -1
  };

  TokenTrie() = default;
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  uint32_t num_nodes() const { return static_cast<uint32_t>(nodes_.size()); }
  const Node* nodes() const { return nodes_.data(); }
  uint8_t byte(uint32_t node) const { return nodes_[node].byte; }
  uint32_t depth(uint32_t node) const { return nodes_[node].depth; }
  uint32_t subtree_end(uint32_t node) const { return nodes_[node].end; }
  bool has_children(uint32_t node) const { return nodes_[node].end > node + 1; }
  // All tokens whose bytes end at `node`.
  std::span<const int32_t> tokens(uint32_t node) const {
    return {token_ids_.data() + token_begin_[node], token_begin_[node + 1] - token_begin_[node]};
  }
  // The node whose prefix is token `id`'s bytes (0 for empty tokens).
  uint32_t node_of(int32_t id) const { return node_of_token_[static_cast<size_t>(id)]; }
  uint32_t max_depth() const { return max_depth_; }

 private:
  std::vector<Node> nodes_;
  std::vector<uint32_t> token_begin_;
  std::vector<int32_t> token_ids_;
  std::vector<uint32_t> node_of_token_;
  uint32_t max_depth_ = 0;
};

}  // namespace deepinfer::grammar
