#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

namespace deepinfer::grammar {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), chart_(grammar_->grammar()), scratch_(grammar_->grammar()) {
  chart_.start_full();
}

void Matcher::reset() {
  chart_.start_full();
  steps_.clear();
  terminated_ = false;
}

Error Matcher::overflow_error() const {
  return make_error(Code::kCapacity, "the grammar is too ambiguous: a parser state exceeded {} items",
                    EarleyChart::kMaxItemsPerSet);
}

bool Matcher::push_bytes(std::string_view bytes) {
  size_t before = chart_.num_sets();
  for (char c : bytes) {
    if (!chart_.push_byte(static_cast<uint8_t>(c))) {
      chart_.pop_to(before);
      return false;
    }
  }
  return true;
}

Result<void> Matcher::advance(int32_t token) {
  const TokenVocabulary& vocab = grammar_->vocabulary();
  if (token < 0 || static_cast<size_t>(token) >= vocab.size()) {
    return make_error(Code::kInvalidArgument, "token {} outside the vocabulary of {}", token, vocab.size());
  }
  if (terminated_) return make_error(Code::kState, "the grammar matcher already terminated");
  Step step{static_cast<uint32_t>(chart_.num_sets()), terminated_};
  if (vocab.is_eos(token)) {
    if (!chart_.can_end()) return make_error(Code::kInvalidArgument, "end-of-sequence token {} before the grammar can end", token);
    terminated_ = true;
    steps_.push_back(step);
    return ok();
  }
  std::string_view bytes = vocab.bytes(token);
  if (bytes.empty() || !push_bytes(bytes)) {
    if (chart_.overflowed()) return overflow_error();
    return make_error(Code::kInvalidArgument, "token {} is not allowed by the grammar here", token);
  }
  steps_.push_back(step);
  return ok();
}

Result<void> Matcher::advance_bytes(std::string_view bytes) {
  if (terminated_) return make_error(Code::kState, "the grammar matcher already terminated");
  Step step{static_cast<uint32_t>(chart_.num_sets()), terminated_};
  if (!push_bytes(bytes)) {
    if (chart_.overflowed()) return overflow_error();
    return make_error(Code::kInvalidArgument, "the bytes are not allowed by the grammar here");
  }
  steps_.push_back(step);
  return ok();
}

Result<void> Matcher::rollback(size_t n) {
  if (n > steps_.size()) return make_error(Code::kInvalidArgument, "cannot roll back {} steps, only {} taken", n, steps_.size());
  if (n == 0) return ok();
  const Step& target = steps_[steps_.size() - n];
  chart_.pop_to(target.sets_before);
  terminated_ = target.terminated_before;
  steps_.resize(steps_.size() - n);
  return ok();
}

bool Matcher::accepts_string(std::string_view bytes) {
  if (terminated_) return bytes.empty();
  size_t before = chart_.num_sets();
  if (!push_bytes(bytes)) return false;
  bool result = chart_.can_end();
  chart_.pop_to(before);
  return result;
}

void Matcher::fill_mask(uint32_t* words) {
  const TokenVocabulary& vocab = grammar_->vocabulary();
  size_t n = vocab.mask_words();
  if (terminated_) {
    std::memset(words, 0, n * sizeof(uint32_t));
  } else {
    ChartSignature sig = chart_.last_signature();
    if (auto cached = grammar_->find_state_mask(sig)) {
      cached->copy_into(words, n);
    } else {
      compute_mask(words);
      grammar_->store_state_mask(sig, std::make_shared<const TokenSet>(TokenSet::from_mask(words, n)));
    }
  }
  bool end = terminated_ || chart_.can_end();
  for (int32_t id : vocab.eos_ids()) {
    uint32_t bit = 1u << (id & 31);
    if (end) {
      words[static_cast<size_t>(id) >> 5] |= bit;
    } else {
      words[static_cast<size_t>(id) >> 5] &= ~bit;
    }
  }
}

void Matcher::compute_mask(uint32_t* words) {
  const Grammar& g = grammar_->grammar();
  std::memset(words, 0, grammar_->vocabulary().mask_words() * sizeof(uint32_t));
  seen_items_.clear();
  for (const auto& it : chart_.last_set()) {
    if (g.core_kind(it.core) == CoreKind::kTerminal) seen_items_.push_back({it.core, it.state, it.count});
  }
  std::sort(seen_items_.begin(), seen_items_.end());
  seen_items_.erase(std::unique(seen_items_.begin(), seen_items_.end()), seen_items_.end());
  std::shared_ptr<const TerminalMasks> united = union_of_broad_walks();
  const TerminalStateMask* cover = nullptr;
  if (united) {
    cover = &united->state_mask(united->dfa()->start());
    cover->inside.or_into(words);
  }
  seen_terminals_.clear();
  uncertain_.clear();
  for (const TerminalItem& item : seen_items_) {
    const TerminalMasks& masks = grammar_->terminal_masks(item.core);
    const bool covered = cover && std::binary_search(union_parts_.begin(), union_parts_.end(), CompiledGrammar::TerminalState{&masks, item.state});
    const TerminalStateMask& tm = covered ? masks.state_exits(item.state, *cover) : masks.state_mask(item.state, item.count);
    const CoreMask& cm = grammar_->core_mask(item.core, item.state, item.count, scratch_, &tm);
    if (!covered && std::find(seen_terminals_.begin(), seen_terminals_.end(), &tm) == seen_terminals_.end()) {
      seen_terminals_.push_back(&tm);
      tm.inside.or_into(words);
    }
    for (int32_t id : cm.accepted) words[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
    uncertain_.insert(uncertain_.end(), cm.uncertain.begin(), cm.uncertain.end());
  }
  if (!uncertain_.empty()) check_uncertain(words);
}

// Small plain terminals in states no mask has walked yet, each alive over much of the vocabulary:
// one walk of their union's automaton gives their insides together, and each then finds its
// exits among the union's. That pays where their walks overlap (object keys split into
// patternProperties regions are several terminals whose union is any string, walked once per
// process). Narrow terminals (a declared key, a value's first byte) walk little on their own;
// large automata keep their own walks, which are shared across grammars. Sets union_parts_ to the
// parts; null where walking them apart is about as short.
std::shared_ptr<const TerminalMasks> Matcher::union_of_broad_walks() {
  const TokenVocabulary& vocab = grammar_->vocabulary();
  const size_t trie_nodes = vocab.short_trie().num_nodes() + vocab.long_trie().num_nodes();
  union_parts_.clear();
  for (const TerminalItem& item : seen_items_) {
    const TerminalMasks& masks = grammar_->terminal_masks(item.core);
    if (!masks.counted() && masks.dfa()->num_states() <= CompiledGrammar::kMaxUnionPartStates)
      union_parts_.push_back({&masks, item.state});
  }
  std::sort(union_parts_.begin(), union_parts_.end());
  union_parts_.erase(std::unique(union_parts_.begin(), union_parts_.end()), union_parts_.end());
  if (union_parts_.size() < 2) return nullptr;
  std::bitset<256> first_bytes;
  size_t apart = 0;
  std::erase_if(union_parts_, [&](const CompiledGrammar::TerminalState& part) {
    std::bitset<256> own;
    const size_t cost = part.first->walk_cost(part.second, own);
    if (cost * kBroadFraction < trie_nodes) return true;
    apart += cost;
    first_bytes |= own;
    return false;
  });
  if (union_parts_.size() < 2) return nullptr;
  // The union's walk: at most every subtree alive for some part.
  size_t together = 0;
  for (const TokenTrie* trie : {&vocab.short_trie(), &vocab.long_trie()}) {
    for (uint32_t c = 1; c < trie->num_nodes(); c = trie->subtree_end(c)) {
      if (first_bytes.test(trie->byte(c))) together += trie->subtree_end(c) - c;
    }
  }
  return together * 3 < apart * 2 ? grammar_->union_terminal(union_parts_) : nullptr;
}

// Runs the tokens that only some parser stacks allow through the real parser, in trie order so
// that shared prefixes are parsed once and a dead prefix rejects all tokens below it.
void Matcher::check_uncertain(uint32_t* words) {
  const TokenVocabulary& vocab = grammar_->vocabulary();
  const TokenTrie& trie = vocab.trie();
  std::erase_if(uncertain_, [&](int32_t id) { return (words[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u; });
  std::sort(uncertain_.begin(), uncertain_.end(), [&](int32_t a, int32_t b) { return trie.node_of(a) < trie.node_of(b); });
  uncertain_.erase(std::unique(uncertain_.begin(), uncertain_.end()), uncertain_.end());
  size_t base = chart_.num_sets();
  std::string_view prev;
  size_t pushed = 0;
  size_t dead_prefix = SIZE_MAX;  // length of prev's shortest prefix the parser rejects
  for (int32_t id : uncertain_) {
    std::string_view bytes = vocab.bytes(id);
    size_t lcp = 0;
    size_t m = std::min(prev.size(), bytes.size());
    while (lcp < m && prev[lcp] == bytes[lcp]) ++lcp;
    if (dead_prefix != SIZE_MAX && lcp >= dead_prefix) continue;
    size_t keep = std::min(lcp, pushed);
    chart_.pop_to(base + keep);
    pushed = keep;
    dead_prefix = SIZE_MAX;
    for (size_t j = keep; j < bytes.size(); ++j) {
      if (!chart_.push_byte(static_cast<uint8_t>(bytes[j]))) {
        dead_prefix = j + 1;
        break;
      }
      ++pushed;
    }
    if (dead_prefix == SIZE_MAX) words[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
    prev = bytes;
  }
  chart_.pop_to(base);
}

}  // namespace deepinfer::grammar
