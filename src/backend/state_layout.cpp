#include "backend/state_layout.h"

namespace deepinfer {

StateLayout make_state_layout(const std::vector<LayerStateShape>& layers, int block_tokens) {
  StateLayout s;
  s.block_tokens = block_tokens;
  for (const LayerStateShape& shape : layers) {
    LayerStateLayout L;
    L.head_dim = shape.head_dim;
    L.window = shape.window;
    L.rate = shape.rate;
    L.overlap = shape.overlap;
    L.index_dim = shape.index_dim;
    L.window_offset = s.slot_floats;
    s.slot_floats += static_cast<size_t>(L.window) * L.head_dim;
    if (L.rate) {
      L.entries_per_block = block_tokens / L.rate;
      L.ring_offset = s.slot_floats;
      s.slot_floats += static_cast<size_t>(L.ring_rows()) * 2 * L.width();
      L.entry_offset = s.block_floats;
      s.block_floats += static_cast<size_t>(L.entries_per_block) * L.head_dim;
    }
    if (L.index_dim) {
      L.index_ring_offset = s.slot_floats;
      s.slot_floats += static_cast<size_t>(L.ring_rows()) * 2 * L.index_width();
      L.index_key_offset = s.block_floats;
      s.block_floats += static_cast<size_t>(L.entries_per_block) * L.index_dim;
    }
    s.layers.push_back(L);
  }
  return s;
}

}  // namespace deepinfer
