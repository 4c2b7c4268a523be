#include "cache/state_pool.h"

namespace deepinfer {

StatePool::StatePool(int32_t n_slots, int32_t n_blocks) : n_slots_(n_slots), n_blocks_(n_blocks) {
  for (int32_t i = n_slots - 1; i >= 0; --i) free_slots_.push_back(i);
  for (int32_t i = n_blocks - 1; i >= 0; --i) free_blocks_.push_back(i);
}

Result<int32_t> StatePool::acquire_slot() {
  if (free_slots_.empty()) return make_error(Code::kCapacity, "all {} sequence slots are in use", n_slots_);
  int32_t s = free_slots_.back();
  free_slots_.pop_back();
  return s;
}

void StatePool::release_slot(int32_t slot) { free_slots_.push_back(slot); }

Result<void> StatePool::grow(std::vector<int32_t>& table, int32_t n) {
  const int32_t need = n - static_cast<int32_t>(table.size());
  if (need <= 0) return ok();
  if (need > free_blocks()) return make_error(Code::kCapacity, "{} more state blocks needed, {} free", need, free_blocks());
  for (int32_t i = 0; i < need; ++i) {
    table.push_back(free_blocks_.back());
    free_blocks_.pop_back();
  }
  return ok();
}

void StatePool::release(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) free_blocks_.push_back(*it);
  table.clear();
}

}  // namespace deepinfer
