#include "grammar/terminal_masks.h"

namespace deepinfer::grammar {

TerminalMasks::TerminalMasks(std::shared_ptr<const Dfa> dfa, std::shared_ptr<const TokenVocabulary> vocab)
    : dfa_(std::move(dfa)), vocab_(std::move(vocab)) {
  states_.resize(dfa_->num_states());
}

const TerminalStateMask& TerminalMasks::state_mask(uint32_t state) const {
  {
    std::shared_lock lock(mutex_);
    if (states_[state]) return *states_[state];
  }
  auto computed = compute(state);
  std::unique_lock lock(mutex_);
  if (!states_[state]) states_[state] = std::move(computed);
  return *states_[state];
}

std::unique_ptr<TerminalStateMask> TerminalMasks::compute(uint32_t state) const {
  const TokenTrie& trie = vocab_->trie();
  const Dfa& dfa = *dfa_;
  auto out = std::make_unique<TerminalStateMask>();
  std::vector<uint32_t> words(vocab_->mask_words(), 0);
  std::vector<uint32_t> at_depth(trie.max_depth() + 1, 0);
  at_depth[0] = state;
  uint32_t n = trie.num_nodes();
  for (uint32_t i = 1; i < n;) {
    uint32_t d = trie.depth(i);
    uint32_t s = dfa.next(at_depth[d - 1], trie.byte(i));
    if (s == Dfa::kDead) {
      i = trie.subtree_end(i);
      continue;
    }
    at_depth[d] = s;
    for (int32_t id : trie.tokens(i)) words[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
    if (dfa.accepting(s) && trie.has_children(i)) out->exits.push_back(i);
    ++i;
  }
  out->inside = TokenSet::from_mask(words.data(), words.size());
  return out;
}

std::shared_ptr<TerminalMasks> TerminalMaskTable::get(const std::shared_ptr<const Dfa>& dfa) {
  std::lock_guard lock(mutex_);
  auto& slot = table_[dfa->canonical_key()];
  if (auto existing = slot.lock()) return existing;
  auto fresh = std::make_shared<TerminalMasks>(dfa, vocab_);
  slot = fresh;
  if (++inserts_since_prune_ >= 1024) {  // drop entries whose grammars are gone
    inserts_since_prune_ = 0;
    std::erase_if(table_, [](const auto& kv) { return kv.second.expired(); });
  }
  return fresh;
}

}  // namespace deepinfer::grammar
