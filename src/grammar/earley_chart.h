// Scannerless Earley parsing over bytes. A chart is a stack of item sets, one per byte consumed;
// push_byte() computes the next set and pop_to() undoes bytes, which is all the matcher needs for
// rollback and for trying token bytes during mask computation.
//
// Items waiting on a terminal carry the terminal's DFA state. Scanning a byte moves that state;
// reaching an accepting state also completes the terminal, so a terminal can end at any accepting
// state (no maximal munch) and the accepted language is exactly the grammar's.
//
// In context-free mode (used to precompute masks shared by all parser stacks), the first set holds
// one item whose origin is the unknown context. When its rule completes, the walk continues at the
// rule's parent site if there is exactly one; with several it continues at all of them, marking the
// items speculative: a result that depends on them is "uncertain" and is decided at run time.
#pragma once

#include "grammar/grammar.h"

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::grammar {

struct EarleyItem {
  uint32_t core = 0;
  uint32_t origin = 0;  // index of the set where the item's rule started
  uint32_t state = 0;   // DFA state when the core is at a terminal, else 0
  uint32_t flags = 0;
  uint32_t count = 0;   // code points so far in a counted (length-bounded) terminal, else 0
};

// 128-bit summary of a set and (recursively) of the sets its items started in. Equal signatures
// mean equal futures: the parser accepts the same continuations from both positions.
struct ChartSignature {
  uint64_t a = 0, b = 0;
  bool operator==(const ChartSignature&) const = default;
};

class EarleyChart {
 public:
  static constexpr uint32_t kContextOrigin = UINT32_MAX;
  static constexpr uint32_t kSpeculative = 1;
  // Work bound: a set that would grow beyond this (only highly ambiguous grammars come close)
  // makes push_byte fail with overflowed() set, so a bad grammar cannot stall decoding.
  static constexpr size_t kMaxItemsPerSet = 5000;

  explicit EarleyChart(const Grammar& grammar);

  // Full mode: set 0 predicts the root.
  void start_full();
  // Context-free mode: set 0 is the closure of `core` with an unknown origin.
  void start_context_free(uint32_t core);

  // Consumes one byte. Returns false (chart unchanged) when no item survives, or when the new set
  // would exceed kMaxItemsPerSet (then overflowed() is true until the next push_byte).
  bool push_byte(uint8_t byte);
  bool overflowed() const { return overflowed_; }
  void pop_to(size_t num_sets);

  size_t num_sets() const { return set_begin_.size() - 1; }
  std::span<const EarleyItem> set(size_t i) const {
    return {items_.data() + set_begin_[i], set_begin_[i + 1] - set_begin_[i]};
  }
  std::span<const EarleyItem> last_set() const { return set(num_sets() - 1); }
  ChartSignature last_signature() const { return signatures_.back(); }

  // Full mode: the input so far is a complete sentence.
  bool can_end() const;
  // Context-free mode: the last set holds an item that does not depend on a guessed context.
  bool has_certain_item() const;


 private:
  void begin_set();
  void end_set();
  void add(uint32_t core, uint32_t origin, uint32_t state, uint32_t flags, uint32_t count = 0);
  // Adds an item with its dot at `core`, starting a terminal's DFA where the dot is at one.
  void add_at(uint32_t core, uint32_t origin, uint32_t flags);
  void close_set();
  void complete(const EarleyItem& item, uint32_t current);
  void ascend(uint32_t rule, uint32_t flags);

  const Grammar& g_;
  std::vector<const Dfa*> core_dfa_;  // per core at a terminal
  std::vector<const CountedDfa*> core_counted_;  // per core at a counted terminal
  bool context_free_ = false;
  std::vector<EarleyItem> items_;
  std::vector<uint32_t> set_begin_;
  std::vector<ChartSignature> signatures_;
  // Large sets index their items waiting on a rule (rule, item) sorted by rule, so completing a
  // rule does not scan the whole origin set: set i's entries are waits_[wait_begin_[i], [i+1]).
  std::vector<std::pair<uint32_t, uint32_t>> waits_;
  std::vector<uint32_t> wait_begin_;
  bool overflowed_ = false;

  // Open-addressing index over the set being built (item positions, stamped per set).
  std::vector<uint32_t> slot_item_;
  std::vector<uint32_t> slot_stamp_;
  uint32_t stamp_ = 0;
  uint32_t building_begin_ = 0;
};

}  // namespace deepinfer::grammar
