#include "engine/model_runner.h"

#include <algorithm>

namespace deepinfer {

ModelRunner::ModelRunner(DeepseekV4& model, Backend& backend, StateLayout layout, int32_t slots, int32_t blocks)
    : model_(model), backend_(backend), layout_(std::move(layout)), table_(slots, blocks, layout_.block_tokens) {}

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
  DI_TRY(id, table_.open());
  backend_.reset_slot(table_.slot(id));
  return id;
}

Result<void> ModelRunner::set_synthetic_length(int32_t id, int32_t n) {
  if (!table_.is_open(id)) return make_error(Code::kInternal, "unknown sequence {}", id);
  if (n < 0) return make_error(Code::kInvalidArgument, "negative length {}", n);
  DI_TRYV(table_.reserve(id, n));
  table_.set_length(id, n);
  return ok();
}

void ModelRunner::close_sequence(int32_t id) { table_.close(id); }

void ModelRunner::reset_sequence(int32_t id) {
  table_.clear(id);
  backend_.reset_slot(table_.slot(id));
}

Result<void> ModelRunner::build_batch(const std::vector<Feed>& feeds) {
  batch_ = ForwardBatch{};
  for (const Feed& f : feeds) {
    if (!table_.is_open(f.sequence)) return make_error(Code::kInternal, "feed for unknown sequence {}", f.sequence);
    const int32_t length = table_.length(f.sequence);
    DI_TRYV(table_.reserve(f.sequence, static_cast<int64_t>(length) + f.n));
    batch_.add_sequence(table_.slot(f.sequence), length, f.ids, f.n, table_.blocks(f.sequence), f.logits);
  }
  return ok();
}

void ModelRunner::advance(const std::vector<Feed>& feeds) {
  for (const Feed& f : feeds) table_.set_length(f.sequence, table_.length(f.sequence) + f.n);
}

Result<std::span<float>> ModelRunner::step(const std::vector<Feed>& feeds) {
  DI_TRYV(build_batch(feeds));
  DI_TRY(logits, model_.forward(batch_));
  advance(feeds);
  return logits;
}

Result<Tensor> ModelRunner::step_on_backend(const std::vector<Feed>& feeds) {
  DI_TRYV(build_batch(feeds));
  DI_TRY(logits, model_.forward_logits(batch_));
  advance(feeds);
  return logits;
}

Result<std::span<const int32_t>> ModelRunner::step_greedy(const std::vector<Feed>& feeds) {
  DI_TRYV(build_batch(feeds));
  batch_.greedy_tokens = true;
  DI_TRY(tokens, model_.forward_greedy(batch_));
  advance(feeds);
  return tokens;
}

}  // namespace deepinfer
