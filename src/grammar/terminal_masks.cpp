#include "grammar/terminal_masks.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <type_traits>

namespace deepinfer::grammar {
namespace {

// DFAs above this many states (unrolled length counters, large patterns) also share the short
// tokens' walks between states that agree on strings up to kShortTokenBytes.
constexpr uint32_t kMaxCanonicalStates = 256;
// Bounded unfoldings larger than this are not worth canonicalizing (walk by subtrees instead): on
// the suite walk 1,024 left ~115 masks above 200 us, 256 ~78, 64 more again.
constexpr size_t kMaxBoundedNodes = 256;
// bounded_classes runs at most kShortTokenBytes rounds over states x byte classes: up to this many
// table entries (a few ms of compile time at most).
constexpr size_t kMaxClassedEntries = size_t{1} << 20;
constexpr uint32_t kNoClass = UINT32_MAX;  // a state alone in its class

// A counted terminal's state and window: tagged so that it never equals a plain residual key.
ResidualKey counted_key(const CountedDfa& cd, uint32_t state, const CountedDfa::Window& w, uint64_t tag) {
  ResidualKey key{0x9216d5d98979fb1bull ^ tag, 0xd1310ba698dfb5acull};
  key.a = hash_mix(hash_mix(hash_mix(key.a, cd.fingerprint().a), state), (uint64_t{w.lo} << 32) | w.hi);
  key.b = hash_mix(hash_mix(hash_mix(key.b, cd.fingerprint().b), uint64_t{w.hi} << 32 | w.lo), state + tag);
  return key;
}

// The key of a root subtree's walk from a residual.
ResidualKey part_key(const ResidualKey& residual, uint64_t trie_tag, uint32_t child) {
  return {hash_mix(hash_mix(residual.a, trie_tag), child), hash_mix(hash_mix(residual.b, child), trie_tag ^ 0x5bd1e995u)};
}

// The key of a short walk from one of bounded_classes (tagged apart from every other key).
ResidualKey class_key(const Dfa& dfa, uint32_t cls) {
  return {hash_mix(hash_mix(0x8a3c5e7d1f2b4c69ull, dfa.fingerprint().a), cls), hash_mix(hash_mix(0x1f83d9abfb41bd6bull, dfa.fingerprint().b), cls)};
}

// Classes with a single member replaced by kNoClass (nothing to share).
std::vector<uint32_t> shared_classes(std::vector<uint32_t> classes) {
  std::vector<uint32_t> members(classes.size(), 0);
  for (uint32_t c : classes) ++members[c];
  for (uint32_t& c : classes) c = members[c] > 1 ? c : kNoClass;
  return classes;
}

size_t mask_bytes(const TerminalStateMask& m) {
  return m.inside.memory_bytes() + (m.short_exits.size() + m.long_exits.size()) * sizeof(uint32_t) + 128;
}

}  // namespace

std::shared_ptr<TerminalMaskTable> TerminalMaskTable::create(std::shared_ptr<const TokenVocabulary> vocab) {
  auto table = std::shared_ptr<TerminalMaskTable>(new TerminalMaskTable(std::move(vocab)));
  const TokenVocabulary& v = *table->vocab_;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v.bytes(static_cast<int32_t>(i)).ends_with('"')) table->quote_ending_.push_back(static_cast<int32_t>(i));
  }
  return table;
}

void TerminalMaskTable::keep(std::shared_ptr<const void> entry, size_t bytes) {
  pool_.emplace_back(std::move(entry), bytes);
  pool_bytes_ += bytes;
  while (pool_bytes_ > kPoolBytes && !pool_.empty()) {
    pool_bytes_ -= pool_.front().second;
    pool_.pop_front();
  }
  sweep();
}

// A whole pass over the maps took milliseconds once they held ~100k walks, and it ran inside
// some mask's computation: each insert looks at a few buckets of each map instead, so expired
// entries go within one round of the buckets and no mask pays for all of them.
void TerminalMaskTable::sweep() {
  ++sweep_cursor_;
  auto sweep_map = [this](auto& map) {
    if (map.bucket_count() == 0) return;
    for (size_t i = 0; i < kSweepBuckets; ++i) {
      const size_t b = (sweep_cursor_ * kSweepBuckets + i) % map.bucket_count();
      using Key = typename std::decay_t<decltype(map)>::key_type;
      Key expired[8];
      size_t n = 0;
      for (auto it = map.begin(b); it != map.end(b) && n < std::size(expired); ++it) {
        if (it->second.expired()) expired[n++] = it->first;
      }
      for (size_t k = 0; k < n; ++k) map.erase(expired[k]);
    }
  };
  sweep_map(terminals_);
  sweep_map(counted_terminals_);
  sweep_map(residual_keys_);
  sweep_map(states_);
  sweep_map(short_walks_);
  sweep_map(parts_);
}

std::shared_ptr<TerminalMasks> TerminalMaskTable::terminal(const std::shared_ptr<const Dfa>& dfa,
                                                           const std::shared_ptr<const CountedDfa>& counted) {
  {
    std::lock_guard lock(mutex_);
    auto& slot = counted ? counted_terminals_[counted->fingerprint()] : terminals_[dfa->fingerprint()];
    if (auto existing = slot.lock()) return existing;
  }
  auto fresh = std::make_shared<TerminalMasks>(dfa, counted, shared_from_this());
  std::lock_guard lock(mutex_);
  auto& slot = counted ? counted_terminals_[counted->fingerprint()] : terminals_[dfa->fingerprint()];
  if (auto existing = slot.lock()) return existing;
  slot = fresh;
  sweep();
  return fresh;
}

std::shared_ptr<ResidualKeys> TerminalMaskTable::residual_keys(const std::shared_ptr<const Dfa>& dfa) {
  std::lock_guard lock(mutex_);
  auto& slot = residual_keys_[dfa->fingerprint()];
  if (auto existing = slot.lock()) return existing;
  auto fresh = std::make_shared<ResidualKeys>(dfa);
  slot = fresh;
  keep(fresh, fresh->memory_bytes());
  return fresh;
}

std::shared_ptr<const TerminalStateMask> TerminalMaskTable::find(const ResidualKey& key) {
  std::lock_guard lock(mutex_);
  auto it = states_.find(key);
  return it == states_.end() ? nullptr : it->second.lock();
}

std::shared_ptr<const TerminalStateMask> TerminalMaskTable::insert(const ResidualKey& key,
                                                                   std::shared_ptr<const TerminalStateMask> mask) {
  std::lock_guard lock(mutex_);
  auto& slot = states_[key];
  if (auto existing = slot.lock()) return existing;  // computed concurrently: keep the first
  slot = mask;
  keep(mask, mask_bytes(*mask));
  return mask;
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
  keep(walk, (walk->words.size() + walk->exits.size()) * sizeof(uint32_t) + 64);
  return walk;
}

void TerminalMaskTable::find_parts(const std::vector<ResidualKey>& keys, std::vector<std::shared_ptr<const SubtreePart>>& out) {
  out.assign(keys.size(), nullptr);
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = parts_.find(keys[i]);
    if (it != parts_.end()) out[i] = it->second.lock();
  }
}

std::shared_ptr<const SubtreePart> TerminalMaskTable::insert_part(const ResidualKey& key, std::shared_ptr<const SubtreePart> part) {
  std::lock_guard lock(mutex_);
  auto& slot = parts_[key];
  if (auto existing = slot.lock()) return existing;
  slot = part;
  keep(part, part->tokens.memory_bytes() + part->exits.size() * sizeof(uint32_t) + 64);
  return part;
}

TerminalMasks::TerminalMasks(std::shared_ptr<const Dfa> dfa, std::shared_ptr<const CountedDfa> counted,
                             std::shared_ptr<TerminalMaskTable> table)
    : dfa_(std::move(dfa)), counted_(std::move(counted)), table_(std::move(table)) {
  residuals_ = table_->residual_keys(dfa_);
  states_.resize(dfa_->num_states());
  const TokenVocabulary& vocab = table_->vocabulary();
  depth_ = std::max<uint32_t>({vocab.short_trie().max_depth(), vocab.long_trie().max_depth(), 1});
  // DFAs whose residuals may be keyed by state number (ResidualKeys::kMaxCanonicalReach): states
  // alike on short strings (a bounded repetition's positions) share their short walk.
  if (dfa_->num_states() > ResidualKeys::kMaxCanonicalReach && size_t{dfa_->num_states()} * dfa_->num_classes() <= kMaxClassedEntries) {
    short_classes_ = shared_classes(bounded_classes(*dfa_, TokenVocabulary::kShortTokenBytes));
  }
  // Counted strings: the positions of a bounded repetition inside (a hostname's labels) too.
  if (counted_ && counted_->num_states() > ResidualKeys::kMaxCanonicalReach &&
      size_t{counted_->num_states()} * counted_->num_classes() <= kMaxClassedEntries)
    counted_classes_ = shared_classes(counted_->bounded_classes(TokenVocabulary::kShortTokenBytes));
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

bool TerminalMasks::walked(uint32_t state) const {
  {
    std::shared_lock lock(mutex_);
    if (states_[state]) return true;
  }
  return table_->find(residuals_->of(state)) != nullptr;
}

const TerminalStateMask& TerminalMasks::state_exits(uint32_t state, const TerminalStateMask& cover) const {
  {
    std::shared_lock lock(mutex_);
    if (states_[state]) return *states_[state];
    auto it = exits_only_.find(state);
    if (it != exits_only_.end()) return *it->second;
  }
  const TokenVocabulary& vocab = table_->vocabulary();
  auto mask = std::make_shared<TerminalStateMask>();
  mask->short_exits = filter_exits(vocab.short_trie(), cover.short_exits, *dfa_, state);
  mask->long_exits = filter_exits(vocab.long_trie(), cover.long_exits, *dfa_, state);
  std::unique_lock lock(mutex_);
  return *exits_only_.emplace(state, std::move(mask)).first->second;
}

std::shared_ptr<const TerminalStateMask> TerminalMasks::compute_counted(uint32_t state, const CountedDfa::Window& w) const {
  const CountedDfa& cd = *counted_;
  ResidualKey key = counted_key(cd, state, w, 1);
  if (auto known = table_->find(key)) return known;
  const TokenVocabulary& vocab = table_->vocabulary();
  if (cd.only_minimum(w, depth_)) return table_->insert(key, minimum_only_mask(state, w));
  // Short tokens see only the window over kShortTokenBytes: shared by more positions.
  CountedDfa::Window near = cd.narrow(w, TokenVocabulary::kShortTokenBytes);
  const bool classed = !counted_classes_.empty() && counted_classes_[state] != kNoClass;
  // (a class stands for its states: tag 3 keeps its keys apart from the states' own)
  ResidualKey short_key = counted_key(cd, classed ? counted_classes_[state] : state, near, classed ? 3 : 2);
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

// The string DFA's mask without what closes the string before the window's minimum (tokens that
// end with the closing quote, exits at it): the string body's mask is shared by all strings, so a
// minLength costs a pass over the quote-ending tokens instead of walks of the tries.
std::shared_ptr<const TerminalStateMask> TerminalMasks::minimum_only_mask(uint32_t state, const CountedDfa::Window& w) const {
  const CountedDfa& cd = *counted_;
  const TerminalStateMask& plain = plain_state_mask(cd.string_state(state));
  const TokenVocabulary& vocab = table_->vocabulary();
  // Whether `bytes` from `state` close the string too early (a quote that is not the closing one
  // leaves the DFA open: nothing to drop).
  auto closes_short = [&](std::string_view bytes) {
    uint32_t s = state, k = 0;
    for (unsigned char b : bytes) {
      const uint32_t e = cd.transitions()[static_cast<size_t>(s) * cd.num_classes() + cd.byte_classes()[b]];
      s = e & CountedDfa::kStateMask;
      k += (e >> 30) & 1u;
      if (s == CountedDfa::kDead) return false;
    }
    return cd.accepting(s) && !cd.complete_in(s, k, w);
  };
  std::vector<uint32_t> words(vocab.mask_words(), 0);
  plain.inside.or_into(words.data());
  for (int32_t t : table_->quote_ending_tokens()) {
    uint32_t& word = words[static_cast<size_t>(t) >> 5];
    if (((word >> (t & 31)) & 1u) && closes_short(vocab.bytes(t))) word &= ~(1u << (t & 31));
  }
  auto mask = std::make_shared<TerminalStateMask>();
  mask->inside = TokenSet::from_mask(words.data(), words.size());
  // An exit node's bytes: a prefix of every token below it (it has children, so some token is there).
  auto keep_exit = [&](const TokenTrie& trie, uint32_t node) {
    const TokenTrie::Node* nodes = trie.nodes();
    uint32_t j = node;
    while (nodes[j].token < 0) ++j;
    return !closes_short(vocab.bytes(nodes[j].token).substr(0, nodes[node].depth));
  };
  for (uint32_t e : plain.short_exits)
    if (keep_exit(vocab.short_trie(), e)) mask->short_exits.push_back(e);
  for (uint32_t e : plain.long_exits)
    if (keep_exit(vocab.long_trie(), e)) mask->long_exits.push_back(e);
  return mask;
}

void TerminalMasks::subtree_keys(const TokenTrie& trie, uint64_t trie_tag, uint32_t state, std::vector<uint32_t>& children,
                                 std::vector<uint32_t>& targets, std::vector<ResidualKey>& keys) const {
  const TokenTrie::Node* nodes = trie.nodes();
  for (uint32_t c = 1; c < trie.num_nodes(); c = nodes[c].end) {
    uint32_t t = dfa_->next(state, nodes[c].byte);
    if (t == Dfa::kDead) continue;
    // Consecutive first bytes mostly lead to the same state: one residual lookup per run.
    ResidualKey r = !targets.empty() && targets.back() == t ? keys.back() : residuals_->of(t);
    children.push_back(c);
    targets.push_back(t);
    keys.push_back(r);
  }
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = part_key(keys[i], trie_tag, children[i]);
}

size_t TerminalMasks::walk_cost(uint32_t state, std::bitset<256>& first_bytes) const {
  if (walked(state)) return 0;
  for (int b = 0; b < 256; ++b) {
    if (dfa_->next(state, static_cast<uint8_t>(b)) != Dfa::kDead) first_bytes.set(static_cast<size_t>(b));
  }
  const TokenVocabulary& vocab = table_->vocabulary();
  size_t cost = 0;
  std::vector<uint32_t> children, targets;
  std::vector<ResidualKey> keys;
  std::vector<std::shared_ptr<const SubtreePart>> found;
  for (const TokenTrie* trie : {&vocab.short_trie(), &vocab.long_trie()}) {
    children.clear();
    targets.clear();
    keys.clear();
    subtree_keys(*trie, trie == &vocab.short_trie() ? 1 : 2, state, children, targets, keys);
    table_->find_parts(keys, found);
    for (size_t i = 0; i < children.size(); ++i) {
      if (!found[i]) cost += trie->subtree_end(children[i]) - children[i];
    }
  }
  return cost;
}

void TerminalMasks::walk_by_subtrees(const TokenTrie& trie, uint64_t trie_tag, uint32_t state,
                                     std::vector<std::shared_ptr<const SubtreePart>>& parts, std::vector<uint32_t>& exits) const {
  std::vector<uint32_t> children, targets;
  std::vector<ResidualKey> keys;
  subtree_keys(trie, trie_tag, state, children, targets, keys);
  std::vector<std::shared_ptr<const SubtreePart>> found;
  table_->find_parts(keys, found);
  std::optional<SubtreeWalker> walker;
  std::vector<int32_t> ids;
  for (size_t i = 0; i < children.size(); ++i) {
    if (!found[i]) {
      if (!walker) walker.emplace(trie);
      auto part = std::make_shared<SubtreePart>();
      ids.clear();
      walker->walk(*dfa_, children[i], targets[i], ids, part->exits);
      part->count = ids.size();
      part->tokens = TokenSet::from_ids(ids, table_->vocabulary().mask_words());
      found[i] = table_->insert_part(keys[i], std::move(part));
    }
    exits.insert(exits.end(), found[i]->exits.begin(), found[i]->exits.end());
    parts.push_back(std::move(found[i]));
  }
}

std::shared_ptr<const TerminalStateMask> TerminalMasks::compute(uint32_t state) const {
  ResidualKey key = residuals_->of(state);
  if (auto known = table_->find(key)) return known;
  const TokenVocabulary& vocab = table_->vocabulary();
  const size_t mask_words = vocab.mask_words();
  auto mask = std::make_shared<TerminalStateMask>();
  // Short tokens of large DFAs: shared by states that agree on strings up to their length.
  std::optional<ResidualKey> short_key;
  std::shared_ptr<const TrieWalk> short_walk;
  if (dfa_->num_states() > kMaxCanonicalStates)
    short_key = bounded_residual_key(*dfa_, state, TokenVocabulary::kShortTokenBytes, kMaxBoundedNodes);
  // (a class key is shared within this DFA only: the canonical one first)
  if (!short_key && !short_classes_.empty() && short_classes_[state] != kNoClass) short_key = class_key(*dfa_, short_classes_[state]);
  if (short_key) short_walk = table_->find_short(*short_key);
  std::vector<std::shared_ptr<const SubtreePart>> parts;
  if (short_key && !short_walk) {
    TrieWalk w;
    walk_by_subtrees(vocab.short_trie(), 1, state, parts, w.exits);
    w.words.assign(mask_words, 0);
    for (const auto& p : parts) p->tokens.or_into(w.words.data());
    parts.clear();
    short_walk = table_->insert_short(*short_key, std::make_shared<const TrieWalk>(std::move(w)));
  }
  if (short_walk) {
    mask->short_exits = short_walk->exits;
  } else {
    walk_by_subtrees(vocab.short_trie(), 1, state, parts, mask->short_exits);
  }
  walk_by_subtrees(vocab.long_trie(), 2, state, parts, mask->long_exits);
  // Few tokens stay a list (no pass over the whole mask); many are merged as bitsets.
  size_t count = 0;
  for (const auto& p : parts) count += p->count;
  if (!short_walk && TokenSet::list_form(count, mask_words)) {
    std::vector<int32_t> ids;
    ids.reserve(count);
    for (const auto& p : parts) p->tokens.append_to(ids);
    mask->inside = TokenSet::from_ids(std::move(ids), mask_words);
  } else {
    std::vector<uint32_t> words = short_walk ? short_walk->words : std::vector<uint32_t>(mask_words, 0);
    for (const auto& p : parts) p->tokens.or_into(words.data());
    mask->inside = short_walk ? TokenSet::from_mask(words.data(), words.size()) : TokenSet::from_dense_mask(std::move(words));
  }
  return table_->insert(key, std::move(mask));
}

}  // namespace deepinfer::grammar
