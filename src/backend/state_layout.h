// Where each layer's per-sequence state lives. The fixed-size parts (sliding-window ring, compressor
// rings) are in a slot record per sequence; the growing parts (compressed entries, indexer keys) are
// in blocks of `block_tokens` positions from a shared pool, found through the sequence's block table.
// Offsets and sizes are in floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace deepinfer {

struct LayerStateLayout {
  int head_dim = 0;
  int window = 0;          // ring rows of head_dim (the last `window` K=V vectors)
  int rate = 0;            // compress rate; 0 for sliding-only layers
  bool overlap = false;    // CSA: entries pool two windows (ring of 2*rate rows, rows hold two halves)
  int index_dim = 0;       // CSA: indexer key width (its compressor also overlaps)
  int entries_per_block = 0;

  size_t window_offset = 0;      // slot: [window, head_dim]
  size_t ring_offset = 0;        // slot: [ring_rows, 2 * width]  (kv | gate), width = (overlap ? 2 : 1) * head_dim
  size_t index_ring_offset = 0;  // slot: [ring_rows, 2 * 2 * index_dim]
  size_t entry_offset = 0;       // block: [entries_per_block, head_dim]
  size_t index_key_offset = 0;   // block: [entries_per_block, index_dim]

  int ring_rows() const { return overlap ? 2 * rate : rate; }
  int width() const { return overlap ? 2 * head_dim : head_dim; }
  int index_width() const { return 2 * index_dim; }
};

// What one layer keeps per sequence (decided by the model's configuration).
struct LayerStateShape {
  int head_dim = 0;
  int window = 0;
  int rate = 0;          // 0: sliding window only
  bool overlap = false;  // CSA
  int index_dim = 0;     // CSA indexer keys
};

struct StateLayout {
  int block_tokens = 0;  // positions covered by one block (a multiple of every compress rate)
  std::vector<LayerStateLayout> layers;
  size_t slot_floats = 0;
  size_t block_floats = 0;

  // Blocks a sequence of n tokens needs.
  int32_t blocks_for(int64_t n_tokens) const {
    return static_cast<int32_t>((n_tokens + block_tokens - 1) / block_tokens);
  }
};

// Lays the layers' state out in slot records and blocks of `block_tokens` positions (a multiple of
// every compress rate).
StateLayout make_state_layout(const std::vector<LayerStateShape>& layers, int block_tokens);

}  // namespace deepinfer
