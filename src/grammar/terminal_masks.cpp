#include "grammar/terminal_masks.h"

#include <deque>

namespace deepinfer::grammar {
namespace {

// Residuals of small DFAs are compared across DFAs; in larger ones (where the canonical walk
// would cost more than it saves) a state is identified by its DFA's language and its number,
// which the canonical numbering makes stable.
constexpr uint32_t kMaxCanonicalStates = 256;

inline uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

// Numbers the states reachable from `state` in BFS order (bytes ascending) and hashes acceptance
// plus transitions as byte runs: equal residual languages give equal keys (minimal DFAs).
ResidualKey residual_key(const Dfa& dfa, uint32_t state) {
  ResidualKey key{0x243f6a8885a308d3ull, 0x13198a2e03707344ull};
  if (dfa.num_states() > kMaxCanonicalStates) {
    for (char c : dfa.canonical_key()) {
      key.a = mix(key.a, static_cast<uint8_t>(c));
      key.b = mix(key.b, static_cast<uint8_t>(c) ^ 0x5a);
    }
    key.a = mix(key.a, state | (1ull << 40));
    key.b = mix(key.b, state | (1ull << 41));
    return key;
  }
  std::vector<int32_t> id(dfa.num_states(), -1);
  std::vector<uint32_t> order{state};
  id[Dfa::kDead] = 0;
  id[state] = 1;
  for (size_t i = 0; i < order.size(); ++i) {
    uint32_t s = order[i];
    key.a = mix(key.a, dfa.accepting(s) ? 0xacce : 0x0);
    key.b = mix(key.b, dfa.accepting(s) ? 0xbeef : 0x1);
    uint32_t run_target = UINT32_MAX;
    for (int b = 0; b < 256; ++b) {
      uint32_t t = dfa.next(s, static_cast<uint8_t>(b));
      if (id[t] < 0) {
        id[t] = static_cast<int32_t>(order.size() + 1);
        order.push_back(t);
      }
      if (static_cast<uint32_t>(id[t]) != run_target) {  // a new run starts at byte b
        run_target = static_cast<uint32_t>(id[t]);
        key.a = mix(key.a, (static_cast<uint64_t>(b) << 32) | run_target);
        key.b = mix(key.b, (static_cast<uint64_t>(run_target) << 9) ^ static_cast<uint64_t>(b));
      }
    }
  }
  return key;
}

}  // namespace

std::shared_ptr<TerminalMaskTable> TerminalMaskTable::create(std::shared_ptr<const TokenVocabulary> vocab) {
  return std::shared_ptr<TerminalMaskTable>(new TerminalMaskTable(std::move(vocab)));
}

std::shared_ptr<TerminalMasks> TerminalMaskTable::terminal(const std::shared_ptr<const Dfa>& dfa) {
  std::lock_guard lock(mutex_);
  auto& slot = terminals_[dfa->canonical_key()];
  if (auto existing = slot.lock()) return existing;
  auto fresh = std::make_shared<TerminalMasks>(dfa, shared_from_this());
  slot = fresh;
  if (++inserts_since_prune_ >= 1024) {  // drop entries whose grammars are gone
    inserts_since_prune_ = 0;
    std::erase_if(terminals_, [](const auto& kv) { return kv.second.expired(); });
    std::erase_if(states_, [](const auto& kv) { return kv.second.expired(); });
  }
  return fresh;
}

std::shared_ptr<const TerminalStateMask> TerminalMaskTable::state_mask(const Dfa& dfa, uint32_t state) {
  ResidualKey key = residual_key(dfa, state);
  {
    std::lock_guard lock(mutex_);
    auto it = states_.find(key);
    if (it != states_.end()) {
      if (auto existing = it->second.lock()) return existing;
    }
  }
  std::shared_ptr<const TerminalStateMask> computed = walk(dfa, state);
  std::lock_guard lock(mutex_);
  auto& slot = states_[key];
  if (auto existing = slot.lock()) return existing;  // computed concurrently: keep the first
  slot = computed;
  return computed;
}

namespace {

// Walks the trie nodes [i, end) (whole root subtrees) with DFA transitions from depth_state[0].
struct WalkCursor {
  uint32_t i, end;
  uint32_t* depth_state;
  std::vector<uint32_t>* exits;
};

struct WalkContext {
  const TokenTrie& trie;
  const TokenTrie::Node* nodes;
  const uint32_t* table;
  const uint8_t* cls;
  uint32_t nc;
  uint32_t* bits;
  uint32_t scratch_bit;
};

// One node of one cursor.
[[gnu::always_inline]] inline void walk_step(const WalkContext& w, uint32_t& i, uint32_t* st, std::vector<uint32_t>& exits) {
  const TokenTrie::Node node = w.nodes[i];
  uint32_t t = w.table[static_cast<size_t>(st[node.depth - 1]) * w.nc + w.cls[node.byte]];
  uint32_t s = t & ~Dfa::kAcceptBit;
  if (s == Dfa::kDead) {
    i = node.end;
    return;
  }
  st[node.depth] = s;
  // Branch-free: about half the nodes end a token, in no predictable pattern. Nodes without one
  // set a bit in a scratch word past the mask.
  uint32_t id = node.token >= 0 ? static_cast<uint32_t>(node.token) : w.scratch_bit;
  w.bits[id >> 5] |= 1u << (id & 31);
  if (node.more_tokens) {
    for (int32_t more : w.trie.tokens(i)) w.bits[static_cast<size_t>(more) >> 5] |= 1u << (more & 31);
  }
  if ((t & Dfa::kAcceptBit) && node.end > i + 1) exits.push_back(i);
  ++i;
}

}  // namespace

std::unique_ptr<TerminalStateMask> TerminalMaskTable::walk(const Dfa& dfa, uint32_t state) const {
  const TokenTrie& trie = vocab_->trie();
  std::vector<uint32_t> words(vocab_->mask_words() + 1, 0);
  const TokenTrie::Node* nodes = trie.nodes();
  const uint32_t n = trie.num_nodes();
  // Each node's state depends on its parent's, so a walk is a chain of dependent loads. Two
  // cursors over the two halves of the trie (split at a root subtree) overlap their latencies.
  uint32_t mid = 1;
  while (mid < n && mid < n / 2) mid = nodes[mid].end;
  std::vector<uint32_t> stack_a(trie.max_depth() + 1, 0), stack_b(trie.max_depth() + 1, 0);
  stack_a[0] = stack_b[0] = state;
  std::vector<uint32_t> exits_a, exits_b;
  WalkContext w{trie, nodes, dfa.transitions(), dfa.byte_classes(), dfa.num_classes(), words.data(),
                static_cast<uint32_t>(vocab_->mask_words() * 32)};
  uint32_t ia = 1, ea = mid, ib = mid, eb = n;
  uint32_t* sa = stack_a.data();
  uint32_t* sb = stack_b.data();
  while (ia < ea && ib < eb) {
    walk_step(w, ia, sa, exits_a);
    walk_step(w, ib, sb, exits_b);
  }
  while (ia < ea) walk_step(w, ia, sa, exits_a);
  while (ib < eb) walk_step(w, ib, sb, exits_b);
  auto out = std::make_unique<TerminalStateMask>();
  out->exits = std::move(exits_a);
  out->exits.insert(out->exits.end(), exits_b.begin(), exits_b.end());
  out->inside = TokenSet::from_mask(words.data(), vocab_->mask_words());
  return out;
}

TerminalMasks::TerminalMasks(std::shared_ptr<const Dfa> dfa, std::shared_ptr<TerminalMaskTable> table)
    : dfa_(std::move(dfa)), table_(std::move(table)) {
  states_.resize(dfa_->num_states());
}

const TerminalStateMask& TerminalMasks::state_mask(uint32_t state) const {
  {
    std::shared_lock lock(mutex_);
    if (states_[state]) return *states_[state];
  }
  auto mask = table_->state_mask(*dfa_, state);
  std::unique_lock lock(mutex_);
  if (!states_[state]) states_[state] = std::move(mask);
  return *states_[state];
}

}  // namespace deepinfer::grammar
