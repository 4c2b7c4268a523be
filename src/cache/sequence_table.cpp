#include "cache/sequence_table.h"

namespace deepinfer {

SequenceTable::SequenceTable(int32_t n_slots, int32_t n_blocks, int32_t block_tokens)
    : pool_(n_slots, n_blocks), block_tokens_(block_tokens > 0 ? block_tokens : 1) {}

Result<int32_t> SequenceTable::open() {
  DI_TRY(slot, pool_.acquire_slot());
  int32_t id = 0;
  while (id < static_cast<int32_t>(seqs_.size()) && seqs_[id].open) ++id;
  if (id == static_cast<int32_t>(seqs_.size())) seqs_.emplace_back();
  seqs_[id] = Sequence{true, slot, 0, {}};
  return id;
}

void SequenceTable::close(int32_t id) {
  Sequence& s = seqs_[id];
  pool_.release(s.blocks);
  pool_.release_slot(s.slot);
  s = Sequence{};
}

void SequenceTable::clear(int32_t id) {
  Sequence& s = seqs_[id];
  pool_.release(s.blocks);
  s.length = 0;
}

Result<void> SequenceTable::reserve(int32_t id, int64_t positions) {
  return pool_.grow(seqs_[id].blocks, blocks_for(positions));
}

}  // namespace deepinfer
