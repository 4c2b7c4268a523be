// Per-request grammar state: which tokens may come next, advancing by sampled tokens, and rolling
// back for speculative decoding. One thread at a time per matcher; matchers sharing a
// CompiledGrammar are independent.
#pragma once

#include "grammar/compiled_grammar.h"
#include "grammar/earley_chart.h"
#include "util/result.h"

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace deepinfer::grammar {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Consumes a token. Fails (state unchanged) when the grammar does not allow it here
  // (kInvalidArgument), or kCapacity when a pathologically ambiguous grammar exceeds the
  // parser's work bound. An EOS token is allowed exactly when the output so far is complete; it
  // terminates the matcher.
  Result<void> advance(int32_t token);
  // Consumes raw bytes as one step (tooling and tests; the engine advances by tokens).
  Result<void> advance_bytes(std::string_view bytes);
  // Undoes the last n steps (advance / advance_bytes calls).
  Result<void> rollback(size_t n);
  void reset();

  // words[i / 32] bit (i % 32) is set iff token i is allowed next; writes vocabulary().mask_words()
  // words. EOS tokens are allowed exactly when can_end(); after termination only they are set.
  void fill_mask(uint32_t* words);

  // The output so far is a complete match (EOS would be accepted).
  bool can_end() const { return !terminated_ && chart_.can_end(); }
  bool is_terminated() const { return terminated_; }
  // Whether `bytes` appended to the current output makes a complete match; the state is unchanged.
  bool accepts_string(std::string_view bytes);
  size_t num_steps() const { return steps_.size(); }
  const CompiledGrammar& compiled() const { return *grammar_; }

 private:
  struct Step {
    uint32_t sets_before;
    bool terminated_before;
  };
  bool push_bytes(std::string_view bytes);
  Error overflow_error() const;
  void compute_mask(uint32_t* words);
  void check_uncertain(uint32_t* words);
  std::shared_ptr<const TerminalMasks> union_of_broad_walks();
  // A terminal state whose walk covers less than 1/kBroadFraction of the tries walks alone.
  static constexpr size_t kBroadFraction = 8;

  std::shared_ptr<const CompiledGrammar> grammar_;
  EarleyChart chart_;
  EarleyChart scratch_;
  std::vector<Step> steps_;
  bool terminated_ = false;
  struct TerminalItem {
    uint32_t core, state, count;
    auto operator<=>(const TerminalItem&) const = default;
  };
  std::vector<TerminalItem> seen_items_;
  std::vector<const TerminalStateMask*> seen_terminals_;
  std::vector<CompiledGrammar::TerminalState> union_parts_;
  std::vector<int32_t> uncertain_;
};

}  // namespace deepinfer::grammar
