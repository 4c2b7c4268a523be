#include "grammar/token_trie.h"

#include <algorithm>

namespace deepinfer::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes) {
  std::vector<int32_t> order;
  for (size_t i = 0; i < token_bytes.size(); ++i) {
    if (!token_bytes[i].empty()) order.push_back(static_cast<int32_t>(i));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const auto& x = token_bytes[static_cast<size_t>(a)];
    const auto& y = token_bytes[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });
  node_of_token_.assign(token_bytes.size(), 0);
  nodes_.push_back(Node{0, 0, 0, 0, -1});
  token_begin_.push_back(0);
  std::vector<uint32_t> path{0};  // path[d] = node at depth d on the current branch
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = token_bytes[static_cast<size_t>(id)];
    size_t lcp = 0;
    if (prev) {
      size_t m = std::min(prev->size(), s.size());
      while (lcp < m && (*prev)[lcp] == s[lcp]) ++lcp;
    }
    // Close the nodes below the shared prefix.
    while (path.size() > lcp + 1) {
      nodes_[path.back()].end = num_nodes();
      path.pop_back();
    }
    for (size_t d = lcp; d < s.size(); ++d) {
      uint32_t node = num_nodes();
      nodes_.push_back(Node{static_cast<uint8_t>(s[d]), 0, static_cast<uint16_t>(std::min<size_t>(d + 1, UINT16_MAX)), 0, -1});
      token_begin_.push_back(static_cast<uint32_t>(token_ids_.size()));
      path.push_back(node);
    }
    Node& end = nodes_[path.back()];
    if (end.token < 0) {
      end.token = id;
    } else {
      end.more_tokens = 1;
    }
    token_ids_.push_back(id);
    node_of_token_[static_cast<size_t>(id)] = path.back();
    max_depth_ = std::max<uint32_t>(max_depth_, static_cast<uint32_t>(s.size()));
    prev = &s;
  }
  while (!path.empty()) {
    nodes_[path.back()].end = num_nodes();
    path.pop_back();
  }
  token_begin_.push_back(static_cast<uint32_t>(token_ids_.size()));
}

}  // namespace deepinfer::grammar
