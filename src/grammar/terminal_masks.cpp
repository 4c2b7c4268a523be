#include "grammar/terminal_masks.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

namespace deepinfer::grammar {
namespace {

// Residuals of small DFAs are compared across DFAs; in larger ones (where the canonical walk
// would cost more than it saves) a state is identified by its DFA's language and its number,
// which the canonical numbering makes stable.
constexpr uint32_t kMaxCanonicalStates = 256;
// Bounded unfoldings larger than this are not worth canonicalizing (walk instead).
constexpr size_t kMaxBoundedNodes = 1024;

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
    key.a = mix(mix(key.a, dfa.fingerprint().a), state | (1ull << 40));
    key.b = mix(mix(key.b, dfa.fingerprint().b), state | (1ull << 41));
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

// Identity of what `state` does on strings of at most `depth` bytes (which of them it accepts
// and which keep it alive): a canonical BFS numbering of its unfolding into (state, depth)
// nodes. Isomorphic unfoldings give equal keys (e.g. all the states of a length counter that
// are more than `depth` away from the bound). nullopt when the unfolding exceeds `max_nodes`.
std::optional<ResidualKey> bounded_residual_key(const Dfa& dfa, uint32_t state, uint32_t depth, size_t max_nodes) {
  ResidualKey key{0x452821e638d01377ull, 0xbe5466cf34e90c6cull};
  std::unordered_map<uint64_t, uint32_t> ids;  // (state, depth) -> canonical id; 0 = dead
  std::vector<std::pair<uint32_t, uint32_t>> order{{state, 0}};
  ids.emplace(static_cast<uint64_t>(state) << 8, 1);
  const uint8_t* cls = dfa.byte_classes();
  std::vector<uint32_t> by_class(dfa.num_classes());
  std::vector<int> run_starts;  // bytes where the class changes: transitions are emitted per run
  for (int b = 0; b < 256; ++b) {
    if (b == 0 || cls[b] != cls[b - 1]) run_starts.push_back(b);
  }
  for (size_t i = 0; i < order.size(); ++i) {
    auto [s, d] = order[i];
    key.a = mix(key.a, dfa.accepting(s) ? 0xacce : 0x0);
    key.b = mix(key.b, dfa.accepting(s) ? 0xbeef : 0x1);
    if (d == depth) continue;
    for (uint32_t c = 0; c < dfa.num_classes(); ++c) {
      uint32_t t = dfa.transitions()[static_cast<size_t>(s) * dfa.num_classes() + c] & ~Dfa::kAcceptBit;
      if (t == Dfa::kDead) {
        by_class[c] = 0;
        continue;
      }
      auto [it, fresh] = ids.emplace(static_cast<uint64_t>(t) << 8 | (d + 1), static_cast<uint32_t>(order.size() + 1));
      if (fresh) {
        if (order.size() >= max_nodes) return std::nullopt;
        order.push_back({t, d + 1});
      }
      by_class[c] = it->second;
    }
    uint32_t run_target = UINT32_MAX;
    for (int b : run_starts) {  // transitions as byte runs: independent of the class split
      uint32_t target = by_class[cls[b]];
      if (target != run_target) {
        run_target = target;
        key.a = mix(key.a, (static_cast<uint64_t>(b) << 32) | target);
        key.b = mix(key.b, (static_cast<uint64_t>(target) << 9) ^ static_cast<uint64_t>(b));
      }
    }
  }
  return key;
}

// A counted terminal's state and window: tagged so that it never equals a plain residual key.
ResidualKey counted_key(const CountedDfa& cd, uint32_t state, const CountedDfa::Window& w, uint64_t tag) {
  ResidualKey key{0x9216d5d98979fb1bull ^ tag, 0xd1310ba698dfb5acull};
  key.a = mix(mix(mix(key.a, cd.fingerprint().a), state), (uint64_t{w.lo} << 32) | w.hi);
  key.b = mix(mix(mix(key.b, cd.fingerprint().b), uint64_t{w.hi} << 32 | w.lo), state + tag);
  return key;
}

struct CountedWalkContext {
  const TokenTrie& trie;
  const TokenTrie::Node* nodes;
  const uint32_t* table;
  const uint8_t* cls;
  uint32_t nc;
  const uint8_t* alive;  // (state, count) -> 0/1
  uint32_t stride;
  CountedDfa::Window w;
  uint32_t* bits;
  uint32_t scratch_bit;
};

// One node of one cursor of a counted walk (as walk_step, with the count beside the state).
[[gnu::always_inline]] inline void counted_step(const CountedWalkContext& c, uint32_t& i, uint32_t* st, uint32_t* count,
                                                std::vector<uint32_t>& exits) {
  const TokenTrie::Node node = c.nodes[i];
  uint32_t e = c.table[static_cast<size_t>(st[node.depth - 1]) * c.nc + c.cls[node.byte]];
  uint32_t s = e & CountedDfa::kStateMask;
  uint32_t k = count[node.depth - 1] + ((e >> 30) & 1u);
  if (!c.alive[static_cast<size_t>(s) * c.stride + k]) {  // the dead state is never alive
    i = node.end;
    return;
  }
  st[node.depth] = s;
  count[node.depth] = k;
  uint32_t id = node.token >= 0 ? static_cast<uint32_t>(node.token) : c.scratch_bit;
  c.bits[id >> 5] |= 1u << (id & 31);
  if (node.more_tokens) {
    for (int32_t more : c.trie.tokens(i)) c.bits[static_cast<size_t>(more) >> 5] |= 1u << (more & 31);
  }
  if ((e & CountedDfa::kAcceptBit) && k >= c.w.lo && k <= c.w.hi && node.end > i + 1) exits.push_back(i);
  ++i;
}

// Walks all of `trie` from (state, window) of a counted terminal, two cursors as walk() does.
TrieWalk walk_counted(const TokenTrie& trie, size_t mask_words, const CountedDfa& cd, uint32_t state, const CountedDfa::Window& w) {
  TrieWalk out;
  out.words.assign(mask_words + 1, 0);  // one scratch word past the mask
  const TokenTrie::Node* nodes = trie.nodes();
  const uint32_t n = trie.num_nodes();
  const uint32_t depth = trie.max_depth();
  // alive_in for every (state, count) a token can reach (a token adds at most `depth` counts).
  const uint32_t stride = depth + 1;
  std::vector<uint8_t> alive(static_cast<size_t>(cd.num_states()) * stride, 0);
  for (uint32_t s = 1; s < cd.num_states(); ++s) {
    for (uint32_t k = 0; k <= depth; ++k) alive[static_cast<size_t>(s) * stride + k] = cd.alive_in(s, k, w) ? 1 : 0;
  }
  uint32_t mid = 1;
  while (mid < n && mid < n / 2) mid = nodes[mid].end;
  std::vector<uint32_t> st_a(depth + 1, 0), st_b(depth + 1, 0), count_a(depth + 1, 0), count_b(depth + 1, 0);
  st_a[0] = st_b[0] = state;
  std::vector<uint32_t> exits_b;
  CountedWalkContext c{trie, nodes, cd.transitions(), cd.byte_classes(), cd.num_classes(), alive.data(), stride, w,
                       out.words.data(), static_cast<uint32_t>(mask_words * 32)};
  uint32_t ia = 1, ea = mid, ib = mid, eb = n;
  while (ia < ea && ib < eb) {
    counted_step(c, ia, st_a.data(), count_a.data(), out.exits);
    counted_step(c, ib, st_b.data(), count_b.data(), exits_b);
  }
  while (ia < ea) counted_step(c, ia, st_a.data(), count_a.data(), out.exits);
  while (ib < eb) counted_step(c, ib, st_b.data(), count_b.data(), exits_b);
  out.exits.insert(out.exits.end(), exits_b.begin(), exits_b.end());
  out.words.pop_back();
  return out;
}

// Walks all of `trie` from `state` with DFA transitions.
TrieWalk walk(const TokenTrie& trie, size_t mask_words, const Dfa& dfa, uint32_t state) {
  TrieWalk out;
  out.words.assign(mask_words + 1, 0);  // one scratch word past the mask
  const TokenTrie::Node* nodes = trie.nodes();
  const uint32_t n = trie.num_nodes();
  // Each node's state depends on its parent's, so a walk is a chain of dependent loads. Two
  // cursors over the two halves of the trie (split at a root subtree) overlap their latencies.
  uint32_t mid = 1;
  while (mid < n && mid < n / 2) mid = nodes[mid].end;
  std::vector<uint32_t> stack_a(trie.max_depth() + 1, 0), stack_b(trie.max_depth() + 1, 0);
  stack_a[0] = stack_b[0] = state;
  std::vector<uint32_t> exits_b;
  WalkContext w{trie, nodes, dfa.transitions(), dfa.byte_classes(), dfa.num_classes(), out.words.data(),
                static_cast<uint32_t>(mask_words * 32)};
  uint32_t ia = 1, ea = mid, ib = mid, eb = n;
  uint32_t* sa = stack_a.data();
  uint32_t* sb = stack_b.data();
  while (ia < ea && ib < eb) {
    walk_step(w, ia, sa, out.exits);
    walk_step(w, ib, sb, exits_b);
  }
  while (ia < ea) walk_step(w, ia, sa, out.exits);
  while (ib < eb) walk_step(w, ib, sb, exits_b);
  out.exits.insert(out.exits.end(), exits_b.begin(), exits_b.end());
  out.words.pop_back();
  return out;
}

}  // namespace

std::shared_ptr<TerminalMaskTable> TerminalMaskTable::create(std::shared_ptr<const TokenVocabulary> vocab) {
  return std::shared_ptr<TerminalMaskTable>(new TerminalMaskTable(std::move(vocab)));
}

std::shared_ptr<TerminalMasks> TerminalMaskTable::terminal(const std::shared_ptr<const Dfa>& dfa,
                                                           const std::shared_ptr<const CountedDfa>& counted) {
  std::lock_guard lock(mutex_);
  auto& slot = counted ? counted_terminals_[counted->fingerprint()] : terminals_[dfa->fingerprint()];
  if (auto existing = slot.lock()) return existing;
  auto fresh = std::make_shared<TerminalMasks>(dfa, counted, shared_from_this());
  slot = fresh;
  if (++inserts_since_prune_ >= 1024) {  // drop entries whose grammars are gone
    inserts_since_prune_ = 0;
    std::erase_if(terminals_, [](const auto& kv) { return kv.second.expired(); });
    std::erase_if(counted_terminals_, [](const auto& kv) { return kv.second.expired(); });
    std::erase_if(states_, [](const auto& kv) { return kv.second.expired(); });
    std::erase_if(short_walks_, [](const auto& kv) { return kv.second.expired(); });
  }
  return fresh;
}

std::shared_ptr<const TerminalStateMask> TerminalMaskTable::find(const ResidualKey& key) {
  std::lock_guard lock(mutex_);
  auto it = states_.find(key);
  return it == states_.end() ? nullptr : it->second.lock();
}

std::shared_ptr<const TrieWalk> TerminalMaskTable::find_short(const ResidualKey& key) {
  std::lock_guard lock(mutex_);
  auto it = short_walks_.find(key);
  return it == short_walks_.end() ? nullptr : it->second.lock();
}

std::shared_ptr<const TrieWalk> TerminalMaskTable::insert_short(const ResidualKey& key, std::shared_ptr<const TrieWalk> walk) {
  std::lock_guard lock(mutex_);
  auto& slot = short_walks_[key];
  if (auto existing = slot.lock()) return existing;
  slot = walk;
  return walk;
}

std::shared_ptr<const TerminalStateMask> TerminalMaskTable::insert(const ResidualKey& key,
                                                                   std::shared_ptr<const TerminalStateMask> mask) {
  std::lock_guard lock(mutex_);
  auto& slot = states_[key];
  if (auto existing = slot.lock()) return existing;  // computed concurrently: keep the first
  slot = mask;
  return mask;
}

TerminalMasks::TerminalMasks(std::shared_ptr<const Dfa> dfa, std::shared_ptr<const CountedDfa> counted,
                             std::shared_ptr<TerminalMaskTable> table)
    : dfa_(std::move(dfa)), counted_(std::move(counted)), table_(std::move(table)) {
  states_.resize(dfa_->num_states());
  const TokenVocabulary& vocab = table_->vocabulary();
  depth_ = std::max<uint32_t>({vocab.short_trie().max_depth(), vocab.long_trie().max_depth(), 1});
}

CountedDfa::Window TerminalMasks::window(uint32_t count) const {
  return counted_ ? counted_->window(count, depth_) : CountedDfa::Window{};
}

const TerminalStateMask& TerminalMasks::state_mask(uint32_t state, uint32_t count) const {
  if (counted_) {
    CountedKey key{state, window(count)};
    // Where the bounds decide nothing for any token, the string DFA's own state mask applies
    // (shared with the unbounded string of the same pattern, across grammars).
    if (key.window == counted_->unconstrained(depth_)) return plain_state_mask(counted_->string_state(state));
    {
      std::shared_lock lock(mutex_);
      auto it = counted_states_.find(key);
      if (it != counted_states_.end()) return *it->second;
    }
    auto mask = compute_counted(state, key.window);
    std::unique_lock lock(mutex_);
    return *counted_states_.emplace(key, std::move(mask)).first->second;
  }
  return plain_state_mask(state);
}

const TerminalStateMask& TerminalMasks::plain_state_mask(uint32_t state) const {
  {
    std::shared_lock lock(mutex_);
    if (states_[state]) return *states_[state];
  }
  auto mask = compute(state);
  std::unique_lock lock(mutex_);
  if (!states_[state]) states_[state] = std::move(mask);
  return *states_[state];
}

std::shared_ptr<const TerminalStateMask> TerminalMasks::compute_counted(uint32_t state, const CountedDfa::Window& w) const {
  const CountedDfa& cd = *counted_;
  ResidualKey key = counted_key(cd, state, w, 1);
  if (auto known = table_->find(key)) return known;
  const TokenVocabulary& vocab = table_->vocabulary();
  // Short tokens see only the window over kShortTokenBytes: shared by more positions.
  CountedDfa::Window near = cd.narrow(w, TokenVocabulary::kShortTokenBytes);
  ResidualKey short_key = counted_key(cd, state, near, 2);
  std::shared_ptr<const TrieWalk> short_part = table_->find_short(short_key);
  if (!short_part) {
    short_part = table_->insert_short(
        short_key, std::make_shared<const TrieWalk>(walk_counted(vocab.short_trie(), vocab.mask_words(), cd, state, near)));
  }
  TrieWalk long_part = walk_counted(vocab.long_trie(), vocab.mask_words(), cd, state, w);
  for (size_t i = 0; i < long_part.words.size(); ++i) long_part.words[i] |= short_part->words[i];
  auto mask = std::make_shared<TerminalStateMask>();
  mask->inside = TokenSet::from_mask(long_part.words.data(), long_part.words.size());
  mask->short_exits = short_part->exits;
  mask->long_exits = std::move(long_part.exits);
  return table_->insert(key, std::move(mask));
}

std::shared_ptr<const TerminalStateMask> TerminalMasks::compute(uint32_t state) const {
  ResidualKey key = residual_key(*dfa_, state);
  if (auto known = table_->find(key)) return known;
  const TokenVocabulary& vocab = table_->vocabulary();
  // Short tokens: shared by states that agree on strings up to their length. Only large DFAs
  // (length counters) have many such states.
  std::shared_ptr<const TrieWalk> short_part;
  std::optional<ResidualKey> short_key;
  if (dfa_->num_states() > kMaxCanonicalStates) {
    short_key = bounded_residual_key(*dfa_, state, TokenVocabulary::kShortTokenBytes, kMaxBoundedNodes);
  }
  if (short_key) short_part = table_->find_short(*short_key);
  if (!short_part) {
    short_part = std::make_shared<const TrieWalk>(walk(vocab.short_trie(), vocab.mask_words(), *dfa_, state));
    if (short_key) short_part = table_->insert_short(*short_key, short_part);
  }
  TrieWalk long_part = walk(vocab.long_trie(), vocab.mask_words(), *dfa_, state);
  for (size_t i = 0; i < long_part.words.size(); ++i) long_part.words[i] |= short_part->words[i];
  auto mask = std::make_shared<TerminalStateMask>();
  mask->inside = TokenSet::from_mask(long_part.words.data(), long_part.words.size());
  mask->short_exits = short_part->exits;
  mask->long_exits = std::move(long_part.exits);
  return table_->insert(key, std::move(mask));
}

}  // namespace deepinfer::grammar
