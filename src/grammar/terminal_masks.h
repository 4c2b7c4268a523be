// Per terminal DFA and vocabulary: which tokens the terminal consumes from a given DFA state.
// This is the stack-independent half of a mask (xgrammar's context-independent tokens), found
// by walking the token trie with DFA transitions only. Computed lazily per state, shared by every
// grammar that uses the same terminal language (TerminalMaskTable interns them).
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

class TerminalMasks {
 public:
  TerminalMasks(std::shared_ptr<const Dfa> dfa, std::shared_ptr<const TokenVocabulary> vocab);

  // Thread-safe; the reference stays valid as long as this object.
  const TerminalStateMask& state_mask(uint32_t state) const;
  const Dfa& dfa() const { return *dfa_; }

 private:
  std::unique_ptr<TerminalStateMask> compute(uint32_t state) const;

  std::shared_ptr<const Dfa> dfa_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  mutable std::shared_mutex mutex_;
  mutable std::vector<std::unique_ptr<TerminalStateMask>> states_;
};

// Interns TerminalMasks by terminal language for one vocabulary; entries live while a grammar
// uses them.
class TerminalMaskTable {
 public:
  explicit TerminalMaskTable(std::shared_ptr<const TokenVocabulary> vocab) : vocab_(std::move(vocab)) {}
  std::shared_ptr<TerminalMasks> get(const std::shared_ptr<const Dfa>& dfa);

 private:
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::weak_ptr<TerminalMasks>> table_;
  size_t inserts_since_prune_ = 0;
};

}  // namespace deepinfer::grammar
