// Per terminal DFA state and vocabulary: which tokens the terminal consumes from that state. This
// is the stack-independent half of a mask (xgrammar's context-independent tokens), found by
// walking the token tries with DFA transitions only.
//
// Two kinds of sharing keep walks rare:
// - a state mask depends only on the language accepted from the state (its residual), so masks
//   are interned by residual across terminals and grammars (e.g. the body of any plain JSON
//   string is walked once per process);
// - tokens of at most TokenVocabulary::kShortTokenBytes bytes are walked once per behaviour on
//   strings up to that length (in strings with maxLength 64 or 100, every state with 16 or more
//   characters left shares that walk); the few longer tokens are walked per state.
#pragma once

#include "grammar/counted_dfa.h"
#include "grammar/dfa.h"
#include "grammar/token_set.h"
#include "grammar/token_vocabulary.h"

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
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

// 128-bit identity of the residual language of a DFA state.
struct ResidualKey {
  uint64_t a = 0, b = 0;
  bool operator==(const ResidualKey&) const = default;
};

// One walk of one trie from one DFA state.
struct TrieWalk {
  std::vector<uint32_t> words;  // mask of the tokens consumed
  std::vector<uint32_t> exits;
};

class TerminalMasks;

// Interns TerminalMasks (by DFA language) and state masks (by residual) for one vocabulary.
// Entries live as long as some grammar uses them.
class TerminalMaskTable : public std::enable_shared_from_this<TerminalMaskTable> {
 public:
  static std::shared_ptr<TerminalMaskTable> create(std::shared_ptr<const TokenVocabulary> vocab);

  // `counted` (may be null) bounds the length of a string terminal.
  std::shared_ptr<TerminalMasks> terminal(const std::shared_ptr<const Dfa>& dfa, const std::shared_ptr<const CountedDfa>& counted);
  std::shared_ptr<const TerminalStateMask> find(const ResidualKey& key);
  std::shared_ptr<const TrieWalk> find_short(const ResidualKey& key);
  std::shared_ptr<const TrieWalk> insert_short(const ResidualKey& key, std::shared_ptr<const TrieWalk> walk);
  // Keeps the first mask stored under a key and returns it.
  std::shared_ptr<const TerminalStateMask> insert(const ResidualKey& key, std::shared_ptr<const TerminalStateMask> mask);
  const TokenVocabulary& vocabulary() const { return *vocab_; }

 private:
  explicit TerminalMaskTable(std::shared_ptr<const TokenVocabulary> vocab) : vocab_(std::move(vocab)) {}

  struct KeyHash {
    size_t operator()(const ResidualKey& k) const { return static_cast<size_t>(k.a); }
  };
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::mutex mutex_;
  struct FingerprintHash {
    size_t operator()(const Dfa::Fingerprint& f) const { return static_cast<size_t>(f.a); }
  };
  std::unordered_map<Dfa::Fingerprint, std::weak_ptr<TerminalMasks>, FingerprintHash> terminals_, counted_terminals_;
  std::unordered_map<ResidualKey, std::weak_ptr<const TerminalStateMask>, KeyHash> states_;
  std::unordered_map<ResidualKey, std::weak_ptr<const TrieWalk>, KeyHash> short_walks_;
  size_t inserts_since_prune_ = 0;
};

// One terminal's state masks, filled in lazily (thread-safe). A counted terminal's masks depend on
// the state and the count's window (CountedDfa::window over the longest token).
class TerminalMasks {
 public:
  TerminalMasks(std::shared_ptr<const Dfa> dfa, std::shared_ptr<const CountedDfa> counted, std::shared_ptr<TerminalMaskTable> table);

  // The reference stays valid as long as this object. `count` only matters for counted terminals.
  const TerminalStateMask& state_mask(uint32_t state, uint32_t count = 0) const;
  const CountedDfa* counted() const { return counted_.get(); }
  // The window a counted terminal's mask at `count` depends on ({0, 0} for plain terminals).
  CountedDfa::Window window(uint32_t count) const;

 private:
  const TerminalStateMask& plain_state_mask(uint32_t state) const;  // of the DFA's state
  std::shared_ptr<const TerminalStateMask> compute(uint32_t state) const;
  std::shared_ptr<const TerminalStateMask> compute_counted(uint32_t state, const CountedDfa::Window& w) const;

  std::shared_ptr<const Dfa> dfa_;
  std::shared_ptr<const CountedDfa> counted_;
  std::shared_ptr<TerminalMaskTable> table_;
  uint32_t depth_ = 0;  // the longest token, in bytes
  mutable std::shared_mutex mutex_;
  mutable std::vector<std::shared_ptr<const TerminalStateMask>> states_;
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
