#include "grammar/nfa.h"

#include "grammar/compile_budget.h"
#include "grammar/utf8.h"

namespace deepinfer::grammar {
namespace {

class Builder {
 public:
  explicit Builder(size_t max_states) : max_states_(max_states) {}

  Result<Nfa> build(const Regex& r) {
    uint32_t start = new_state();
    DI_TRY(end, emit(r, start));
    nfa_.start = start;
    nfa_.accept = end;
    if (overflow_) return too_large();
    return std::move(nfa_);
  }

 private:
  Error too_large() const {
    return make_error(Code::kGrammar, "regular expression too large (more than {} automaton states)", max_states_);
  }

  uint32_t new_state() {
    if (nfa_.states.size() >= max_states_) {
      overflow_ = true;
      return 0;
    }
    nfa_.states.emplace_back();
    return static_cast<uint32_t>(nfa_.states.size() - 1);
  }

  void edge(uint32_t from, NfaEdgeKind kind, uint32_t to, uint8_t lo = 0, uint8_t hi = 0) {
    if (overflow_) return;
    nfa_.states[from].push_back(NfaEdge{kind, lo, hi, to});
  }

  // Appends `r` after state `entry`; returns the state where it ends.
  Result<uint32_t> emit(const Regex& r, uint32_t entry) {
    if (overflow_) return too_large();
    DI_TRYV(CompileBudget::spend(1));
    switch (r->kind) {
      case RegexKind::kEmpty: return entry;
      case RegexKind::kChars: {
        uint32_t exit = new_state();
        for (const auto& range : r->chars.ranges()) {
          for (const auto& seq : utf8_sequences(range.lo, range.hi)) {
            uint32_t cur = entry;
            for (int i = 0; i < seq.length; ++i) {
              uint32_t next = i + 1 == seq.length ? exit : new_state();
              edge(cur, NfaEdgeKind::kBytes, next, seq.lo[i], seq.hi[i]);
              cur = next;
            }
          }
        }
        return exit;
      }
      case RegexKind::kConcat: {
        uint32_t cur = entry;
        for (const auto& it : r->items) {
          DI_TRY(next, emit(it, cur));
          cur = next;
        }
        return cur;
      }
      case RegexKind::kAlt: {
        uint32_t exit = new_state();
        for (const auto& it : r->items) {
          uint32_t branch = new_state();
          edge(entry, NfaEdgeKind::kEpsilon, branch);
          DI_TRY(end, emit(it, branch));
          edge(end, NfaEdgeKind::kEpsilon, exit);
        }
        return exit;
      }
      case RegexKind::kRepeat: {
        uint32_t cur = entry;
        for (uint32_t i = 0; i < r->min; ++i) {
          uint32_t fresh = new_state();
          edge(cur, NfaEdgeKind::kEpsilon, fresh);
          DI_TRY(next, emit(r->items[0], fresh));
          cur = next;
          if (overflow_) return too_large();
        }
        if (r->max == kUnbounded) {
          uint32_t loop = new_state();
          uint32_t body = new_state();
          edge(cur, NfaEdgeKind::kEpsilon, loop);
          edge(loop, NfaEdgeKind::kEpsilon, body);
          DI_TRY(end, emit(r->items[0], body));
          edge(end, NfaEdgeKind::kEpsilon, loop);
          return loop;
        }
        uint32_t exit = new_state();
        for (uint32_t i = r->min; i < r->max; ++i) {
          edge(cur, NfaEdgeKind::kEpsilon, exit);
          uint32_t fresh = new_state();
          edge(cur, NfaEdgeKind::kEpsilon, fresh);
          DI_TRY(next, emit(r->items[0], fresh));
          cur = next;
          if (overflow_) return too_large();
        }
        edge(cur, NfaEdgeKind::kEpsilon, exit);
        return exit;
      }
      case RegexKind::kInputStart:
      case RegexKind::kInputEnd: {
        uint32_t exit = new_state();
        edge(entry, r->kind == RegexKind::kInputStart ? NfaEdgeKind::kInputStart : NfaEdgeKind::kInputEnd, exit);
        return exit;
      }
    }
    return entry;
  }

  Nfa nfa_;
  size_t max_states_;
  bool overflow_ = false;
};

}  // namespace

Result<Nfa> build_nfa(const Regex& regex, size_t max_states) { return Builder(max_states).build(regex); }

}  // namespace deepinfer::grammar
