// Per terminal DFA state and vocabulary: which tokens the terminal consumes from that state. This
// is the stack-independent half of a mask (xgrammar's context-independent tokens), found by
// walking the token trie with DFA transitions only. It depends only on the language accepted from
// the state (its residual), so results are interned by residual and shared by every terminal and
// grammar that reaches an equal residual (e.g. the body of any unconstrained JSON string).
#pragma once

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
  std::vector<uint32_t> exits;
};

// 128-bit identity of the residual language of a DFA state.
struct ResidualKey {
  uint64_t a = 0, b = 0;
  bool operator==(const ResidualKey&) const = default;
};

class TerminalMasks;

// Interns terminal state masks (by residual) and TerminalMasks (by DFA language) for one
// vocabulary. Entries live as long as some grammar uses them.
class TerminalMaskTable : public std::enable_shared_from_this<TerminalMaskTable> {
 public:
  static std::shared_ptr<TerminalMaskTable> create(std::shared_ptr<const TokenVocabulary> vocab);

  std::shared_ptr<TerminalMasks> terminal(const std::shared_ptr<const Dfa>& dfa);
  std::shared_ptr<const TerminalStateMask> state_mask(const Dfa& dfa, uint32_t state);

 private:
  explicit TerminalMaskTable(std::shared_ptr<const TokenVocabulary> vocab) : vocab_(std::move(vocab)) {}
  std::unique_ptr<TerminalStateMask> walk(const Dfa& dfa, uint32_t state) const;

  struct KeyHash {
    size_t operator()(const ResidualKey& k) const { return static_cast<size_t>(k.a); }
  };
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::weak_ptr<TerminalMasks>> terminals_;
  std::unordered_map<ResidualKey, std::weak_ptr<const TerminalStateMask>, KeyHash> states_;
  size_t inserts_since_prune_ = 0;
};

// One terminal's state masks, filled in lazily (thread-safe).
class TerminalMasks {
 public:
  TerminalMasks(std::shared_ptr<const Dfa> dfa, std::shared_ptr<TerminalMaskTable> table);

  // The reference stays valid as long as this object.
  const TerminalStateMask& state_mask(uint32_t state) const;

 private:
  std::shared_ptr<const Dfa> dfa_;
  std::shared_ptr<TerminalMaskTable> table_;
  mutable std::shared_mutex mutex_;
  mutable std::vector<std::shared_ptr<const TerminalStateMask>> states_;
};

}  // namespace deepinfer::grammar
