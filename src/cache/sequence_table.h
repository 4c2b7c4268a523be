// The slot and block table of every sequence that holds model state: the slot record it owns, the
// blocks of the pool that hold its growing parts (in position order), and how many positions its
// state holds. Bookkeeping only: the memory belongs to the backend, which reads a sequence's slot
// and block table from each ForwardBatch. Not thread-safe (the engine's step thread, or a tool).
#pragma once

#include "cache/state_pool.h"
#include "util/result.h"

#include <cstdint>
#include <vector>

namespace deepinfer {

class SequenceTable {
 public:
  // `block_tokens`: the positions one block covers (> 0).
  SequenceTable(int32_t n_slots, int32_t n_blocks, int32_t block_tokens);

  const StatePool& pool() const { return pool_; }
  int32_t block_tokens() const { return block_tokens_; }
  // Positions the whole block pool holds.
  int64_t capacity_tokens() const { return static_cast<int64_t>(pool_.n_blocks()) * block_tokens_; }
  // Blocks a sequence of n positions needs.
  int32_t blocks_for(int64_t n) const { return static_cast<int32_t>((n + block_tokens_ - 1) / block_tokens_); }

  // A new, empty sequence holding a slot: its id, the lowest one free (kCapacity when no slot is).
  Result<int32_t> open();
  // Returns the sequence's slot and blocks to the pool; the id becomes free.
  void close(int32_t id);
  // Returns its blocks and empties it (length 0) but keeps its slot.
  void clear(int32_t id);

  bool is_open(int32_t id) const { return id >= 0 && id < static_cast<int32_t>(seqs_.size()) && seqs_[id].open; }
  int32_t slot(int32_t id) const { return seqs_[id].slot; }
  int32_t length(int32_t id) const { return seqs_[id].length; }
  const std::vector<int32_t>& blocks(int32_t id) const { return seqs_[id].blocks; }
  int32_t blocks_held(int32_t id) const { return static_cast<int32_t>(seqs_[id].blocks.size()); }

  // Grows the block table until it covers `positions` (kCapacity when the pool has too few blocks;
  // the table is then unchanged). Never shrinks it.
  Result<void> reserve(int32_t id, int64_t positions);
  // The state now holds `length` positions (its blocks must cover them).
  void set_length(int32_t id, int32_t length) { seqs_[id].length = length; }

 private:
  struct Sequence {
    bool open = false;
    int32_t slot = -1;
    int32_t length = 0;
    std::vector<int32_t> blocks;
  };

  StatePool pool_;
  int32_t block_tokens_;
  std::vector<Sequence> seqs_;
};

}  // namespace deepinfer
