// A JSON string terminal with a length bound carried as a counter beside the automaton state,
// instead of unrolled into it: minLength / maxLength up to 2^31 cost no more states than the
// unbounded string.
//
// The automaton is the product of the quoted string's DFA (its pattern and format, unbounded) with
// a small transducer that marks the byte starting each code point (a raw character, an escape, a
// surrogate pair counting once). An item's state is a product state plus the count so far. Which
// counts can still complete from a state is an ultimately periodic set (a preperiod then a period),
// computed once, so "alive" and "complete" are table lookups.
#pragma once

#include "grammar/dfa.h"
#include "util/result.h"

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace deepinfer::grammar {

class CountedDfa {
 public:
  static constexpr uint32_t kAcceptBit = 1u << 31;  // the target accepts (the closing quote)
  static constexpr uint32_t kCountBit = 1u << 30;   // the byte starts a code point
  static constexpr uint32_t kStateMask = kCountBit - 1;
  static constexpr uint32_t kDead = 0;

  // `quoted`: a minimal DFA of '"' body '"' whose bodies are well-formed JSON string contents
  // (every spelling json_encode produces). max may be kUnbounded.
  static Result<std::shared_ptr<const CountedDfa>> create(const Dfa& quoted, uint32_t min, uint32_t max);

  uint32_t start() const { return start_; }
  // Target | kCountBit | kAcceptBit; kDead when the byte is refused.
  uint32_t entry(uint32_t state, uint8_t byte) const { return table_[static_cast<size_t>(state) * num_classes_ + byte_class_[byte]]; }
  const uint32_t* transitions() const { return table_.data(); }
  const uint8_t* byte_classes() const { return byte_class_.data(); }
  uint32_t num_classes() const { return num_classes_; }
  uint32_t num_states() const { return static_cast<uint32_t>(accepting_.size()); }

  // The state of the quoted string's DFA a product state stands for.
  uint32_t string_state(uint32_t state) const { return string_state_[state]; }
  // Some continuation from (state, count) ends the string with a count in [min, max].
  bool alive(uint32_t state, uint32_t count) const;
  // The string is complete here (closing quote with the count in bounds).
  bool complete(uint32_t state, uint32_t count) const { return accepting_[state] && count >= min_ && count <= max_; }
  // No string at all.
  bool empty() const { return !alive(start_, 0); }

  // The counts still wanted from a position, relative to it: [lo, hi] (hi = kUnbounded when the
  // maximum is). A mask over tokens of at most `depth` bytes depends on (state, window) only, and
  // window() shifts and clamps it so that positions with equal futures for such tokens share keys.
  struct Window {
    uint32_t lo = 0, hi = 0;
    bool operator==(const Window&) const = default;
  };
  Window window(uint32_t count, uint32_t depth) const;
  // The window of a position whose bounds decide nothing within `depth` counts (minimum reached,
  // maximum far): there the masks are those of the string DFA's state.
  Window unconstrained(uint32_t depth) const { return canonical(0, kNever, depth); }
  // The window for a shallower depth, from a window of a deeper one.
  Window narrow(const Window& w, uint32_t depth) const { return canonical(w.lo, w.hi, depth); }
  // alive() for a position `k` counts into a token, with the remaining window `w`.
  bool alive_in(uint32_t state, uint32_t k, const Window& w) const;
  bool complete_in(uint32_t state, uint32_t k, const Window& w) const { return accepting_[state] && k >= w.lo && k <= w.hi; }
  bool accepting(uint32_t state) const { return accepting_[state] != 0; }
  // Whether only the window's minimum can matter within `depth` counts: every state completes with
  // any count from its least on (the maximum is beyond them all) or is a closed string. alive_in(s,
  // k, w) is then s != kDead, or complete_in for a closed string: a walk differs from the string
  // DFA's only where the closing quote comes too early.
  bool only_minimum(const Window& w, uint32_t depth) const { return cofinite_or_closed_ && uint64_t{w.hi} >= uint64_t{depth} + max_least_; }

  // States alike on strings of at most `depth` bytes (bounded_classes of residual_keys.h, with the
  // count steps and the counts each state can still complete with): a walk over tokens that short
  // from (state, window) depends on (class, window) only.
  std::vector<uint32_t> bounded_classes(uint32_t depth) const;

  uint32_t min() const { return min_; }
  uint32_t max() const { return max_; }
  // Identity of the language and bounds (cache keys).
  const Dfa::Fingerprint& fingerprint() const { return fingerprint_; }

 private:
  static constexpr uint64_t kNever = UINT64_MAX;
  // The product automaton of `quoted` and the code point transducer.
  Result<void> build_product(const Dfa& quoted);
  // The counts that can still complete from each state (preperiod, period, next_).
  Result<void> tabulate_counts();
  // The smallest n >= x with n in L(state) (counts that can still complete), or kNever.
  uint64_t next_member(uint32_t state, uint64_t x) const;
  bool window_alive(uint32_t state, uint64_t lo, uint64_t hi) const;
  Window canonical(uint64_t lo, uint64_t hi, uint32_t depth) const;

  uint32_t num_classes_ = 1;
  std::array<uint8_t, 256> byte_class_{};
  std::vector<uint32_t> table_;
  std::vector<uint8_t> accepting_;
  uint32_t start_ = 0;
  uint32_t min_ = 0, max_ = 0;
  // L(state) below preperiod_ + period_: next_[state * span + i] is the smallest member >= i
  // (possibly past the span), or UINT32_MAX.
  uint32_t preperiod_ = 0, period_ = 1;
  std::vector<uint32_t> next_;
  // States whose completions take every count from least_[state] on (most string states): there
  // next_member is max(x, least).
  std::vector<uint8_t> cofinite_;
  std::vector<uint32_t> least_;
  bool cofinite_or_closed_ = true;  // every state but the dead one
  uint32_t max_least_ = 0;
  std::vector<uint32_t> string_state_;
  Dfa::Fingerprint fingerprint_;
};

}  // namespace deepinfer::grammar
