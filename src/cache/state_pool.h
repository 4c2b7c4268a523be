// Allocation of model state: slot records (one per live sequence) and blocks (shared pool, growing
// parts of the state). Bookkeeping only; the memory itself belongs to the backend. Not thread-safe:
// the engine's step loop owns it.
#pragma once

#include "util/result.h"

#include <cstdint>
#include <vector>

namespace deepinfer {

class StatePool {
 public:
  StatePool(int32_t n_slots, int32_t n_blocks);

  int32_t n_slots() const { return n_slots_; }
  int32_t n_blocks() const { return n_blocks_; }
  int32_t free_slots() const { return static_cast<int32_t>(free_slots_.size()); }
  int32_t free_blocks() const { return static_cast<int32_t>(free_blocks_.size()); }

  Result<int32_t> acquire_slot();
  void release_slot(int32_t slot);
  // Appends blocks to `table` until it holds `n` (kCapacity when the pool has too few; table unchanged).
  Result<void> grow(std::vector<int32_t>& table, int32_t n);
  // Returns every block of `table` to the pool and clears it.
  void release(std::vector<int32_t>& table);

 private:
  int32_t n_slots_, n_blocks_;
  std::vector<int32_t> free_slots_, free_blocks_;  // stacks; lowest ids handed out first
};

}  // namespace deepinfer
