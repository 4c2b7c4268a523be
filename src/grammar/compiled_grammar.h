// A grammar compiled for one vocabulary: immutable in meaning and shared by every request that
// uses the same spec. It also owns the mask caches, which fill in as matchers run (thread-safe):
// per parser position (CoreMask) and per whole parser state (ChartSignature -> full mask).
#pragma once

#include "grammar/core_mask.h"
#include "grammar/earley_chart.h"
#include "grammar/grammar.h"
#include "grammar/grammar_options.h"
#include "grammar/terminal_masks.h"
#include "grammar/token_set.h"
#include "grammar/token_vocabulary.h"

#include <memory>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace deepinfer::grammar {

class TerminalMaskTable;

class CompiledGrammar {
 public:
  // Whole-state masks kept per grammar, in bytes; the cache restarts empty beyond it.
  static constexpr size_t kMaxStateMaskBytes = 64u << 20;

  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab, TerminalMaskTable& terminals);

  const Grammar& grammar() const { return grammar_; }
  const TokenVocabulary& vocabulary() const { return *vocab_; }

  // The masks of the terminal a terminal core waits on.
  const TerminalMasks& terminal_masks(uint32_t core) const { return *terminal_masks_[grammar_.core_symbol(core)]; }
  // Cached; `scratch` is a chart over this grammar that may be reset. `count` is the item's count
  // in a counted terminal (else 0). `exits`, where given, is the terminal's state mask or
  // TerminalMasks::state_exits (only its exits are read).
  const CoreMask& core_mask(uint32_t core, uint32_t state, uint32_t count, EarleyChart& scratch,
                            const TerminalStateMask* exits = nullptr) const;
  // The automaton of the union of plain terminals' languages from their states (sorted, distinct,
  // at least two), started at its start state: its insides are the union of theirs, its exits
  // include theirs. Null where it would be too large. Kept per grammar, in kMaxUnions entries.
  using TerminalState = std::pair<const TerminalMasks*, uint32_t>;
  std::shared_ptr<const TerminalMasks> union_terminal(const std::vector<TerminalState>& parts) const;
  static constexpr size_t kMaxUnions = 4096;
  static constexpr size_t kMaxUnionStates = 4096;
  static constexpr uint32_t kMaxUnionPartStates = 256;  // of each part's DFA
  std::shared_ptr<const TokenSet> find_state_mask(const ChartSignature& sig) const;
  void store_state_mask(const ChartSignature& sig, std::shared_ptr<const TokenSet> mask) const;

 private:
  struct SigHash {
    size_t operator()(const ChartSignature& s) const { return static_cast<size_t>(s.a ^ (s.b * 0x9e3779b97f4a7c15ull)); }
  };

  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<std::shared_ptr<TerminalMasks>> terminal_masks_;  // per terminal id
  std::shared_ptr<TerminalMaskTable> table_;

  struct UnionHash {
    size_t operator()(const std::vector<TerminalState>& parts) const;
  };
  mutable std::shared_mutex union_mutex_;
  mutable std::unordered_map<std::vector<TerminalState>, std::shared_ptr<const TerminalMasks>, UnionHash> unions_;

  mutable std::shared_mutex core_mutex_;
  struct CoreKey {
    uint32_t core, state;
    CountedDfa::Window window;
    bool operator==(const CoreKey&) const = default;
  };
  struct CoreKeyHash {
    size_t operator()(const CoreKey& k) const {
      return static_cast<size_t>(((uint64_t{k.core} << 32 | k.state) * 0x9e3779b97f4a7c15ull) ^ (uint64_t{k.window.lo} << 32) ^ k.window.hi);
    }
  };
  mutable std::unordered_map<CoreKey, std::unique_ptr<CoreMask>, CoreKeyHash> core_masks_;
  mutable std::shared_mutex state_mutex_;
  mutable std::unordered_map<ChartSignature, std::shared_ptr<const TokenSet>, SigHash> state_masks_;
  mutable size_t state_mask_bytes_ = 0;
};

}  // namespace deepinfer::grammar
