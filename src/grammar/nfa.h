// Thompson NFA over bytes, built from a code-point Regex by expanding classes into UTF-8 byte
// sequences. Only the DFA construction reads it.
#pragma once

#include "grammar/regex.h"
#include "util/result.h"

#include <cstdint>
#include <vector>

namespace deepinfer::grammar {

enum class NfaEdgeKind : uint8_t { kEpsilon, kBytes, kInputStart, kInputEnd };

struct NfaEdge {
  NfaEdgeKind kind = NfaEdgeKind::kEpsilon;
  uint8_t lo = 0;
  uint8_t hi = 0;
  uint32_t target = 0;
};

struct Nfa {
  std::vector<std::vector<NfaEdge>> states;
  uint32_t start = 0;
  uint32_t accept = 0;
};

// Fails with kGrammar when the automaton would exceed `max_states` (large bounded repetitions).
Result<Nfa> build_nfa(const Regex& regex, size_t max_states);

}  // namespace deepinfer::grammar
