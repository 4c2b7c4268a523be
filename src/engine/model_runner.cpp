#include "engine/model_runner.h"

#include <algorithm>

namespace deepinfer {

ModelRunner::ModelRunner(DeepseekV4& model, Backend& backend, StateLayout layout, int32_t slots, int32_t blocks)
    : model_(model), backend_(backend), layout_(std::move(layout)), pool_(slots, blocks) {}

Result<std::unique_ptr<ModelRunner>> ModelRunner::create(DeepseekV4& model, Backend& backend, const RunnerOptions& o) {
  if (o.max_sequences <= 0) return make_error(Code::kInvalidArgument, "max_sequences must be positive, got {}", o.max_sequences);
  StateLayout layout = model.state_layout(o.block_tokens);
  const int64_t block_bytes = static_cast<int64_t>(std::max<size_t>(layout.block_floats, 1) * sizeof(float));
  int64_t blocks = o.state_bytes > 0 ? o.state_bytes / block_bytes
                                     : static_cast<int64_t>(o.max_sequences) * layout.blocks_for(o.max_context);
  const int64_t free_bytes = backend.free_memory_bytes();
  if (o.state_bytes <= 0 && o.free_memory_fraction > 0 && free_bytes > 0) {
    const double budget = std::max(0.0, static_cast<double>(free_bytes - o.reserve_bytes) * o.free_memory_fraction);
    const int64_t slot_bytes = static_cast<int64_t>(layout.slot_floats * sizeof(float)) * o.max_sequences;
    blocks = std::min<int64_t>(blocks, static_cast<int64_t>((budget - static_cast<double>(slot_bytes)) / static_cast<double>(block_bytes)));
  }
  blocks = std::clamp<int64_t>(blocks, 1, INT32_MAX / 2);
  backend.set_graphs(o.graphs);
  DI_TRYV(backend.allocate_state(layout, o.max_sequences, static_cast<int32_t>(blocks)));
  return std::unique_ptr<ModelRunner>(new ModelRunner(model, backend, std::move(layout), o.max_sequences, static_cast<int32_t>(blocks)));
}

Result<int32_t> ModelRunner::open_sequence() {
  DI_TRY(slot, pool_.acquire_slot());
  backend_.reset_slot(slot);
  int32_t id = 0;
  while (id < static_cast<int32_t>(seqs_.size()) && seqs_[id].open) ++id;
  if (id == static_cast<int32_t>(seqs_.size())) seqs_.emplace_back();
  seqs_[id] = Sequence{true, slot, 0, {}};
  return id;
}

Result<void> ModelRunner::set_synthetic_length(int32_t id, int32_t n) {
  if (id < 0 || id >= static_cast<int32_t>(seqs_.size()) || !seqs_[id].open)
    return make_error(Code::kInternal, "unknown sequence {}", id);
  if (n < 0) return make_error(Code::kInvalidArgument, "negative length {}", n);
  Sequence& s = seqs_[id];
  DI_TRYV(pool_.grow(s.blocks, layout_.blocks_for(n)));
  s.length = n;
  return ok();
}

void ModelRunner::close_sequence(int32_t id) {
  Sequence& s = seqs_[id];
  pool_.release(s.blocks);
  pool_.release_slot(s.slot);
  s = Sequence{};
}

void ModelRunner::reset_sequence(int32_t id) {
  Sequence& s = seqs_[id];
  pool_.release(s.blocks);
  backend_.reset_slot(s.slot);
  s.length = 0;
}

Result<void> ModelRunner::build_batch(const std::vector<Feed>& feeds) {
  batch_ = ForwardBatch{};
  for (const Feed& f : feeds) {
    if (f.sequence < 0 || f.sequence >= static_cast<int32_t>(seqs_.size()) || !seqs_[f.sequence].open)
      return make_error(Code::kInternal, "feed for unknown sequence {}", f.sequence);
    Sequence& s = seqs_[f.sequence];
    DI_TRYV(pool_.grow(s.blocks, layout_.blocks_for(static_cast<int64_t>(s.length) + f.n)));
    batch_.add_sequence(s.slot, s.length, f.ids, f.n, s.blocks, f.logits);
  }
  return ok();
}

Result<std::span<float>> ModelRunner::step(const std::vector<Feed>& feeds) {
  DI_TRYV(build_batch(feeds));
  DI_TRY(logits, model_.forward(batch_));
  for (const Feed& f : feeds) seqs_[f.sequence].length += f.n;
  return logits;
}

Result<std::span<const int32_t>> ModelRunner::step_greedy(const std::vector<Feed>& feeds) {
  DI_TRYV(build_batch(feeds));
  batch_.greedy_tokens = true;
  DI_TRY(tokens, model_.forward_greedy(batch_));
  for (const Feed& f : feeds) seqs_[f.sequence].length += f.n;
  return tokens;
}

}  // namespace deepinfer
