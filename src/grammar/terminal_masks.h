// Per terminal DFA state and vocabulary: which tokens the terminal consumes from that state. This
// is the stack-independent half of a mask (xgrammar's context-independent tokens), found by
// walking the token tries with DFA transitions only.
//
// Three kinds of sharing keep walks rare:
// - a state mask depends only on the language accepted from the state (its residual), so masks
//   are interned by residual across terminals and grammars (e.g. the body of any plain JSON
//   string is walked once per process);
// - a state's walk is the union of one walk per root subtree of a trie (the tokens starting with
//   one byte), and each of those depends only on the residual of the state that byte leads to:
//   subtree walks are interned by (subtree, residual) too. A state that differs from walked ones
//   in a few first bytes (object keys "any string but the declared names", a pattern's state
//   after its first character) walks only those subtrees;
// - tokens of at most TokenVocabulary::kShortTokenBytes bytes are walked once per behaviour on
//   strings up to that length (in large automata such as unrolled length counters, every state
//   with 16 or more characters left shares that walk): canonically across automata where the
//   unfolding is small, else within one automaton by bounded_classes (the positions of a
//   hostname's 63-character labels, of `[a-z]{0,40}`);
// - a string whose length bound can only demand more characters (a minLength) takes the string
//   body's mask, less what closes the string too early;
// - terminals that are first met together and each alive over much of the vocabulary (object keys
//   split into patternProperties regions) are walked once as their union (Matcher), each keeping
//   only its exits (state_exits).
// What was computed stays in a byte-bounded pool after the grammars that used it are gone, so
// later grammars find it.
#pragma once

#include "grammar/counted_dfa.h"
#include "grammar/dfa.h"
#include "grammar/residual_keys.h"
#include "grammar/token_set.h"
#include "grammar/token_vocabulary.h"
#include "grammar/trie_walk.h"

#include <bitset>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace deepinfer::grammar {

struct TerminalStateMask {
  // Tokens whose bytes are all consumed with the DFA still alive: allowed wherever an item
  // waits on this terminal in this state, whatever the parser stack.
  TokenSet inside;
  // Trie nodes (depth >= 1, with children) where the DFA accepts: the terminal may end there and
  // the token's remaining bytes must then be checked against what follows the terminal.
  std::vector<uint32_t> short_exits;  // nodes of TokenVocabulary::short_trie()
  std::vector<uint32_t> long_exits;   // nodes of TokenVocabulary::long_trie()
};

// The walk of one root subtree of a trie from one residual (SubtreeWalker::walk).
struct SubtreePart {
  TokenSet tokens;
  size_t count = 0;  // of tokens
  std::vector<uint32_t> exits;
};

class TerminalMasks;

// Interns TerminalMasks (by DFA language), residual keys (by DFA), state masks (by residual) and
// walks for one vocabulary. Entries live as long as some grammar uses them or the pool keeps them.
class TerminalMaskTable : public std::enable_shared_from_this<TerminalMaskTable> {
 public:
  // Recently computed walks, masks and residual keys kept for later grammars, in bytes (the
  // oldest go first).
  static constexpr size_t kPoolBytes = 64u << 20;

  static std::shared_ptr<TerminalMaskTable> create(std::shared_ptr<const TokenVocabulary> vocab);

  // `counted` (may be null) bounds the length of a string terminal.
  std::shared_ptr<TerminalMasks> terminal(const std::shared_ptr<const Dfa>& dfa, const std::shared_ptr<const CountedDfa>& counted);
  std::shared_ptr<ResidualKeys> residual_keys(const std::shared_ptr<const Dfa>& dfa);
  std::shared_ptr<const TerminalStateMask> find(const ResidualKey& key);
  // Keeps the first mask stored under a key and returns it.
  std::shared_ptr<const TerminalStateMask> insert(const ResidualKey& key, std::shared_ptr<const TerminalStateMask> mask);
  std::shared_ptr<const TrieWalk> find_short(const ResidualKey& key);
  std::shared_ptr<const TrieWalk> insert_short(const ResidualKey& key, std::shared_ptr<const TrieWalk> walk);
  // Subtree walks: out[i] = the part stored under keys[i], or null.
  void find_parts(const std::vector<ResidualKey>& keys, std::vector<std::shared_ptr<const SubtreePart>>& out);
  std::shared_ptr<const SubtreePart> insert_part(const ResidualKey& key, std::shared_ptr<const SubtreePart> part);
  const TokenVocabulary& vocabulary() const { return *vocab_; }
  // The tokens whose last byte is '"' (those that may close a string).
  const std::vector<int32_t>& quote_ending_tokens() const { return quote_ending_; }

 private:
  explicit TerminalMaskTable(std::shared_ptr<const TokenVocabulary> vocab) : vocab_(std::move(vocab)) {}
  // Holds `entry` in the pool (with mutex_ held).
  void keep(std::shared_ptr<const void> entry, size_t bytes);
  // Drops some entries nothing holds any more (with mutex_ held): bounded work per call.
  void sweep();
  static constexpr size_t kSweepBuckets = 4;  // per map and call

  struct KeyHash {
    size_t operator()(const ResidualKey& k) const { return static_cast<size_t>(k.a); }
  };
  struct FingerprintHash {
    size_t operator()(const Dfa::Fingerprint& f) const { return static_cast<size_t>(f.a); }
  };
  template <typename T>
  using Interned = std::unordered_map<ResidualKey, std::weak_ptr<const T>, KeyHash>;

  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<int32_t> quote_ending_;
  std::mutex mutex_;
  std::unordered_map<Dfa::Fingerprint, std::weak_ptr<TerminalMasks>, FingerprintHash> terminals_, counted_terminals_;
  std::unordered_map<Dfa::Fingerprint, std::weak_ptr<ResidualKeys>, FingerprintHash> residual_keys_;
  Interned<TerminalStateMask> states_;
  Interned<TrieWalk> short_walks_;
  Interned<SubtreePart> parts_;
  std::deque<std::pair<std::shared_ptr<const void>, size_t>> pool_;
  size_t pool_bytes_ = 0;
  size_t sweep_cursor_ = 0;
};

// One terminal's state masks, filled in lazily (thread-safe). A counted terminal's masks depend on
// the state and the count's window (CountedDfa::window over the longest token).
class TerminalMasks {
 public:
  TerminalMasks(std::shared_ptr<const Dfa> dfa, std::shared_ptr<const CountedDfa> counted, std::shared_ptr<TerminalMaskTable> table);

  // The reference stays valid as long as this object. `count` only matters for counted terminals.
  const TerminalStateMask& state_mask(uint32_t state, uint32_t count = 0) const;
  // Whether a plain terminal's state mask is known (here or, by residual, in the table).
  bool walked(uint32_t state) const;
  // About how many trie nodes the first state_mask of a plain terminal's state would walk: the
  // subtrees whose walks from it are not known yet (0 once its mask is known). Otherwise adds the
  // first bytes alive from the state to `first_bytes`.
  size_t walk_cost(uint32_t state, std::bitset<256>& first_bytes) const;
  // A plain terminal's exits alone (`inside` left empty), taken from `cover`: the mask of an
  // automaton that accepts, from its state, every string this one accepts from `state` (a walk of
  // the paths to cover's exits instead of the whole trie).
  const TerminalStateMask& state_exits(uint32_t state, const TerminalStateMask& cover) const;
  const std::shared_ptr<const Dfa>& dfa() const { return dfa_; }
  const CountedDfa* counted() const { return counted_.get(); }
  // The window a counted terminal's mask at `count` depends on ({0, 0} for plain terminals).
  CountedDfa::Window window(uint32_t count) const;

 private:
  const TerminalStateMask& plain_state_mask(uint32_t state) const;  // of the DFA's state
  std::shared_ptr<const TerminalStateMask> compute(uint32_t state) const;
  std::shared_ptr<const TerminalStateMask> compute_counted(uint32_t state, const CountedDfa::Window& w) const;
  std::shared_ptr<const TerminalStateMask> minimum_only_mask(uint32_t state, const CountedDfa::Window& w) const;
  // The root subtrees of `trie` alive from `state`: their nodes, the DFA's states after their
  // bytes, and the keys of their walks.
  void subtree_keys(const TokenTrie& trie, uint64_t trie_tag, uint32_t state, std::vector<uint32_t>& children,
                    std::vector<uint32_t>& targets, std::vector<ResidualKey>& keys) const;
  // The subtree parts of `trie` from `state` (appended to `parts`) and their exits.
  void walk_by_subtrees(const TokenTrie& trie, uint64_t trie_tag, uint32_t state, std::vector<std::shared_ptr<const SubtreePart>>& parts,
                        std::vector<uint32_t>& exits) const;

  std::shared_ptr<const Dfa> dfa_;
  std::shared_ptr<const CountedDfa> counted_;
  std::shared_ptr<TerminalMaskTable> table_;
  std::shared_ptr<ResidualKeys> residuals_;
  // bounded_classes over kShortTokenBytes, the short walks' key where no canonical one was found;
  // a state alone in its class has UINT32_MAX (empty: small or too large a DFA).
  std::vector<uint32_t> short_classes_;
  std::vector<uint32_t> counted_classes_;  // the same for the counted DFA's states
  uint32_t depth_ = 0;                     // the longest token, in bytes
  mutable std::shared_mutex mutex_;
  mutable std::vector<std::shared_ptr<const TerminalStateMask>> states_;
  mutable std::unordered_map<uint32_t, std::shared_ptr<const TerminalStateMask>> exits_only_;
  struct CountedKey {
    uint32_t state;
    CountedDfa::Window window;
    bool operator==(const CountedKey&) const = default;
  };
  struct CountedKeyHash {
    size_t operator()(const CountedKey& k) const {
      return static_cast<size_t>((uint64_t{k.state} * 0x9e3779b97f4a7c15ull) ^ (uint64_t{k.window.lo} << 32) ^ k.window.hi);
    }
  };
  mutable std::unordered_map<CountedKey, std::shared_ptr<const TerminalStateMask>, CountedKeyHash> counted_states_;
};

}  // namespace deepinfer::grammar
