// Identities of residual languages (what a DFA state accepts from there on), the keys under which
// token masks are shared between states, terminals and grammars.
#pragma once

#include "grammar/dfa.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace deepinfer::grammar {

// 128-bit identity of a residual language (or of something derived from one).
struct ResidualKey {
  uint64_t a = 0, b = 0;
  bool operator==(const ResidualKey&) const = default;
};

inline uint64_t hash_mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

// The residual keys of one DFA's states, each computed once (thread-safe). A residual whose
// automaton (the states reachable from it) is small is keyed canonically, so equal residuals of
// different DFAs get equal keys (the body of a JSON string in every string-like terminal); a
// larger one by its DFA's language and its state number, which the canonical numbering of
// minimal DFAs makes stable.
class ResidualKeys {
 public:
  static constexpr uint32_t kMaxCanonicalReach = 64;

  explicit ResidualKeys(std::shared_ptr<const Dfa> dfa);
  ResidualKey of(uint32_t state);
  // This and the DFA it holds.
  size_t memory_bytes() const {
    return keys_.size() * (sizeof(ResidualKey) + 1 + sizeof(int32_t) + sizeof(uint32_t) * dfa_->num_classes());
  }

 private:
  ResidualKey compute(uint32_t state);

  std::shared_ptr<const Dfa> dfa_;
  std::vector<uint16_t> runs_;  // the bytes where the DFA's byte class changes (0 first)
  std::mutex mutex_;
  std::vector<ResidualKey> keys_;
  std::vector<uint8_t> known_;
  std::vector<int32_t> ids_;  // BFS numbering scratch: all -1 between calls
};

// Identity of what `state` does on strings of at most `depth` bytes (which of them it accepts
// and which keep it alive): a canonical BFS numbering of its unfolding into (state, depth)
// nodes. Isomorphic unfoldings give equal keys (e.g. all the states of a length counter that
// are more than `depth` away from the bound). nullopt when the unfolding exceeds `max_nodes`.
std::optional<ResidualKey> bounded_residual_key(const Dfa& dfa, uint32_t state, uint32_t depth, size_t max_nodes);

// The same relation for all states of one DFA at once: classes[s] == classes[t] exactly when s
// and t accept the same strings of at most `depth` bytes and stay alive on the same ones (Moore's
// partition refinement stopped after `depth` rounds). Where unfoldings are too large to key, this
// still lets the states of one DFA share (e.g. the positions of a 63-character hostname label).
std::vector<uint32_t> bounded_classes(const Dfa& dfa, uint32_t depth);

// The refinement itself: `cls` the classes of round 0 (what sets states apart besides their
// transitions, numbered from 0), `table` num_states x nc entries whose target is entry &
// target_mask (the entry's other bits belong to the transition), `rounds` the string length.
std::vector<uint32_t> refine_classes(std::vector<uint32_t> cls, const uint32_t* table, uint32_t nc, uint32_t target_mask, uint32_t rounds);

}  // namespace deepinfer::grammar
