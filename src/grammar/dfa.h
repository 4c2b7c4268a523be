// A minimal, trimmed, complete DFA over bytes. State 0 is the dead state (absorbing, never
// accepting); every other state can still reach an accepting state, so "not dead" means "some
// continuation matches". Immutable once built; shared between grammars through TerminalTable.
#pragma once

#include "grammar/nfa.h"
#include "grammar/regex.h"
#include "util/result.h"

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace deepinfer::grammar {

class Dfa {
 public:
  static constexpr uint32_t kDead = 0;
  // Transition entries carry this bit when the target state accepts (saves a lookup in walks).
  static constexpr uint32_t kAcceptBit = 1u << 31;
  // Construction fails with kGrammar beyond this many states unless a caller passes its own limit.
  static constexpr size_t kDefaultMaxStates = 50000;

  static Result<Dfa> from_regex(const Regex& regex, size_t max_states = kDefaultMaxStates);
  // From an explicit automaton over states 0..num_states-1 (0 dead): next(s, byte) -> state.
  static Result<Dfa> from_function(uint32_t num_states, uint32_t start, const std::function<bool(uint32_t)>& accepting,
                                   const std::function<uint32_t(uint32_t, uint8_t)>& next);
  // From explicit tables: table[s * num_classes + byte_class[b]] -> state (0 dead), accepting[s].
  static Result<Dfa> from_table(uint32_t num_classes, const std::array<uint8_t, 256>& byte_class, std::vector<uint32_t> table,
                                std::vector<uint8_t> accepting, uint32_t start);
  // Language operations (results are minimal and trimmed).
  static Result<Dfa> intersect(const Dfa& a, const Dfa& b, size_t max_states = kDefaultMaxStates);
  static Result<Dfa> subtract(const Dfa& a, const Dfa& b, size_t max_states = kDefaultMaxStates);
  static Result<Dfa> unite(const Dfa& a, const Dfa& b, size_t max_states = kDefaultMaxStates);
  // One automaton's language from one of its states.
  struct Residual {
    const Dfa* dfa;
    uint32_t state;
  };
  // The union of the residual languages of `parts` (minimal and trimmed).
  static Result<Dfa> unite_residuals(std::span<const Residual> parts, size_t max_states = kDefaultMaxStates);
  // unit{min,max} for a prefix-free unit (no complete word extends to another; accepting states
  // have no live transitions), built by counting completed units. max may be kUnbounded.
  static Result<Dfa> repeat(const Dfa& unit, uint32_t min, uint32_t max, size_t max_states = kDefaultMaxStates);
  // open · L(this) · close, for a language where no complete word continues with `close`
  // (so the concatenation stays deterministic). Fails otherwise.
  Result<Dfa> wrap(uint8_t open, uint8_t close) const;
  // The same language without the empty string.
  Dfa without_empty() const;

  uint32_t start() const { return start_; }
  uint32_t next(uint32_t state, uint8_t byte) const {
    return table_[static_cast<size_t>(state) * num_classes_ + byte_class_[byte]] & ~kAcceptBit;
  }
  bool accepting(uint32_t state) const { return accepting_[state] != 0; }
  uint32_t num_states() const { return static_cast<uint32_t>(accepting_.size()); }
  bool empty_language() const { return start_ == kDead; }
  bool matches(std::string_view bytes) const;

  // Raw tables for tight loops: next(s, b) == transitions()[s * num_classes() + byte_classes()[b]]
  // without kAcceptBit.
  const uint32_t* transitions() const { return table_.data(); }
  const uint8_t* byte_classes() const { return byte_class_.data(); }
  uint32_t num_classes() const { return num_classes_; }

  // 128-bit identity of the language: equal languages (minimal, canonically numbered DFAs)
  // give equal fingerprints.
  struct Fingerprint {
    uint64_t a = 0, b = 0;
    bool operator==(const Fingerprint&) const = default;
  };
  const Fingerprint& fingerprint() const { return fingerprint_; }

 private:
  friend class DfaBuilder;
  uint32_t num_classes_ = 1;
  std::array<uint8_t, 256> byte_class_{};
  std::vector<uint32_t> table_;   // num_states x num_classes, targets tagged with kAcceptBit
  std::vector<uint8_t> accepting_;
  uint32_t start_ = kDead;
  Fingerprint fingerprint_;
};

}  // namespace deepinfer::grammar
