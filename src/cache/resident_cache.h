// Model state kept for its owner (a session) between the owner's generations: the sequence that
// holds it and the ids processed into it. A new generation of the owner continues from it when
// those ids are a strict prefix of its context (at least one token is left to process, whose
// logits are sampled from); otherwise the state is dropped and the context recomputed. Idle state
// is what the scheduler evicts first, least recently used first. The prefix cache grows here.
// Not thread-safe (the engine's step thread).
#pragma once

#include "cache/sequence_table.h"

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace deepinfer {

class ResidentCache {
 public:
  struct Resident {
    int32_t seq = -1;                // in the SequenceTable
    std::vector<int32_t> processed;  // ids in its state, in order
    uint64_t last_used = 0;          // the step it became idle in
  };
  // The state an owner's generation continues from.
  struct Reuse {
    int32_t seq = -1;
    std::vector<int32_t> processed;
  };

  explicit ResidentCache(SequenceTable& table) : table_(table) {}

  // The owner's state becomes idle, holding `processed` (it replaces any the owner had).
  void keep(uint64_t owner, int32_t seq, std::vector<int32_t> processed, uint64_t step);
  // Takes the owner's state out: returned when it is a strict prefix of `context` and `may_reuse`,
  // else closed (nullopt, as when the owner has none).
  std::optional<Reuse> take(uint64_t owner, std::span<const int32_t> context, bool may_reuse);
  // Closes the owner's state, if any.
  void release(uint64_t owner);

  size_t size() const { return residents_.size(); }
  // By owner; for the scheduler, which sees idle state beside running sequences.
  const std::unordered_map<uint64_t, Resident>& residents() const { return residents_; }

 private:
  SequenceTable& table_;
  std::unordered_map<uint64_t, Resident> residents_;
};

}  // namespace deepinfer
