#include "backend/cuda/batch_upload.h"

#include "backend/cuda/cuda_common.h"

#include <algorithm>
#include <cstring>

namespace deepinfer {
namespace {

// The windows that close in this step, per compress rate: rate -> (seq, w) pairs.
std::vector<std::pair<int, std::vector<int32_t>>> compress_jobs(const ForwardBatch& batch, const StateLayout& layout) {
  std::vector<std::pair<int, std::vector<int32_t>>> jobs;
  const int32_t S = static_cast<int32_t>(batch.seqs.size());
  for (const LayerStateLayout& L : layout.layers) {
    if (L.rate <= 0 || std::any_of(jobs.begin(), jobs.end(), [&](const auto& j) { return j.first == L.rate; })) continue;
    std::vector<int32_t> js;
    for (int32_t si = 0; si < S; ++si) {
      const SequenceStep& s = batch.seqs[si];
      const int32_t w0 = (s.n_past + L.rate) / L.rate - 1, w1 = (s.n_past + s.n_tokens) / L.rate - 1;
      for (int32_t w = w0; w <= w1; ++w) {
        js.push_back(si);
        js.push_back(w);
      }
    }
    jobs.emplace_back(L.rate, std::move(js));
  }
  return jobs;
}

}  // namespace

Result<void> validate_batch(const ForwardBatch& batch, const StateLayout& layout, int n_slots, int n_blocks) {
  const int32_t T = batch.rows();
  if (batch.positions.size() != batch.tokens.size() || batch.row_seq.size() != batch.tokens.size())
    return make_error(Code::kInternal, "batch with {} tokens, {} positions, {} row sequences", batch.tokens.size(), batch.positions.size(),
                      batch.row_seq.size());
  for (const auto& s : batch.seqs) {
    if (s.slot < 0 || s.slot >= n_slots) return make_error(Code::kInternal, "slot {} outside the {} allocated", s.slot, n_slots);
    if (s.n_tokens < 0 || s.n_past < 0 || s.first_row < 0 || s.first_row + s.n_tokens > T)
      return make_error(Code::kInternal, "sequence in slot {} has rows [{}, {}) of a batch of {}", s.slot, s.first_row,
                        s.first_row + s.n_tokens, T);
    if (s.n_blocks < layout.blocks_for(static_cast<int64_t>(s.n_past) + s.n_tokens))
      return make_error(Code::kInternal, "sequence in slot {} has {} blocks for {} tokens", s.slot, s.n_blocks, s.n_past + s.n_tokens);
    if (s.table_offset < 0 || s.table_offset + s.n_blocks > static_cast<int32_t>(batch.block_tables.size()))
      return make_error(Code::kInternal, "sequence in slot {} has a block table outside the batch's", s.slot);
    for (int32_t b = 0; b < s.n_blocks; ++b) {
      int32_t id = batch.block_tables[s.table_offset + b];
      if (id < 0 || id >= n_blocks) return make_error(Code::kInternal, "block id {} outside the {} allocated", id, n_blocks);
    }
  }
  for (int32_t r = 0; r < T; ++r) {
    const int32_t si = batch.row_seq[r];
    if (si < 0 || si >= static_cast<int32_t>(batch.seqs.size()))
      return make_error(Code::kInternal, "row {} belongs to sequence {} of {}", r, si, batch.seqs.size());
    const SequenceStep& s = batch.seqs[si];
    if (r < s.first_row || r >= s.first_row + s.n_tokens || batch.positions[r] != s.n_past + (r - s.first_row))
      return make_error(Code::kInternal, "row {} (position {}) does not match its sequence", r, batch.positions[r]);
  }
  for (int32_t r : batch.logit_rows)
    if (r < 0 || r >= T) return make_error(Code::kInternal, "logit row {} outside the batch of {}", r, T);
  return ok();
}

BatchUpload::~BatchUpload() {
  for (int i = 0; i < 2; ++i) {
    if (event_[i]) cudaEventDestroy(event_[i]);
    if (host_[i]) cudaFreeHost(host_[i]);
  }
  if (dev_) cudaFree(dev_);
}

Result<void> BatchUpload::init() {
  for (auto& ev : event_) {
    const cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess) return cuda_error(e, "creating an event");
  }
  return ok();
}

// The device buffer and the two pinned host buffers, grown (all three) to at least `ints`.
Result<void> BatchUpload::reserve(size_t ints, cudaStream_t stream) {
  if (ints <= cap_) return ok();
  const size_t cap = std::max(ints * 2, size_t(1) << 18);
  const cudaError_t s = cudaStreamSynchronize(stream);  // the old ones may still be in use
  if (s != cudaSuccess) return cuda_error(s, "growing the metadata buffers");
  if (dev_) cudaFree(dev_);
  dev_ = nullptr;
  cap_ = 0;
  ++generation_;
  for (int i = 0; i < 2; ++i) {
    if (host_[i]) cudaFreeHost(host_[i]);
    host_[i] = nullptr;
  }
  DI_TRY(d, device_alloc<int32_t>(cap, "batch metadata"));
  dev_ = d;
  for (int i = 0; i < 2; ++i) {
    void* h = nullptr;
    const cudaError_t e = cudaMallocHost(&h, cap * 4);
    if (e != cudaSuccess) return cuda_error(e, "allocating pinned host memory for batch metadata");
    host_[i] = static_cast<int32_t*>(h);
  }
  cap_ = cap;
  return ok();
}

Result<void> BatchUpload::upload(const ForwardBatch& batch, const StateLayout& layout, int32_t graph_block_cap, cudaStream_t stream,
                                 BatchOnDevice& out) {
  const int32_t T = batch.rows();
  const int32_t S = static_cast<int32_t>(batch.seqs.size());
  const bool graph = graph_block_cap > 0;
  int32_t max_pos = 0;
  for (int32_t r = 0; r < T; ++r) max_pos = std::max(max_pos, batch.positions[r]);
  out.pos_bound = graph ? static_cast<int64_t>(graph_block_cap) * layout.block_tokens : static_cast<int64_t>(max_pos) + 1;
  out.seq_steps.clear();
  for (const auto& s : batch.seqs) out.seq_steps.emplace_back(s.n_past, s.n_tokens);
  const auto jobs = compress_jobs(batch, layout);

  // One upload: tokens, positions, row_seq, seqs, block tables, logit rows, jobs and their counts.
  size_t n = 0;
  auto region = [&](size_t ints) {
    size_t at = n;
    n += (ints + 3) & ~size_t(3);  // 16-byte aligned regions
    return at;
  };
  const size_t o_tok = region(T), o_pos = region(T), o_rs = region(T), o_seq = region(static_cast<size_t>(S) * 6);
  const size_t o_bt = region(graph ? static_cast<size_t>(S) * graph_block_cap : batch.block_tables.size());
  const size_t o_lr = region(batch.logit_rows.size());
  std::vector<size_t> o_jobs;
  for (const auto& j : jobs) o_jobs.push_back(region(graph ? static_cast<size_t>(S) * 2 : j.second.size()));
  const size_t o_cnt = region(jobs.size());
  DI_TRYV(reserve(n, stream));
  const int slot = turn_;
  turn_ ^= 1;
  cudaError_t e = cudaEventSynchronize(event_[slot]);  // its last upload has been read
  if (e != cudaSuccess) return cuda_error(e, "waiting for a metadata buffer");
  int32_t* h = host_[slot];
  std::memcpy(h + o_tok, batch.tokens.data(), 4 * static_cast<size_t>(T));
  std::memcpy(h + o_pos, batch.positions.data(), 4 * static_cast<size_t>(T));
  std::memcpy(h + o_rs, batch.row_seq.data(), 4 * static_cast<size_t>(T));
  for (int32_t i = 0; i < S; ++i) {
    const SequenceStep& s = batch.seqs[i];
    const int32_t v[6] = {s.slot, s.first_row, s.n_tokens, s.n_past, s.table_offset, s.n_blocks};
    std::memcpy(h + o_seq + 6 * static_cast<size_t>(i), v, sizeof v);
  }
  if (!batch.block_tables.empty()) std::memcpy(h + o_bt, batch.block_tables.data(), 4 * batch.block_tables.size());
  if (!batch.logit_rows.empty()) std::memcpy(h + o_lr, batch.logit_rows.data(), 4 * batch.logit_rows.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!jobs[i].second.empty()) std::memcpy(h + o_jobs[i], jobs[i].second.data(), 4 * jobs[i].second.size());
    h[o_cnt + i] = static_cast<int32_t>(jobs[i].second.size() / 2);
  }
  if (n > 0) {
    e = cudaMemcpyAsync(dev_, h, 4 * n, cudaMemcpyHostToDevice, stream);
    if (e != cudaSuccess) return cuda_error(e, "uploading batch metadata");
  }
  e = cudaEventRecord(event_[slot], stream);
  if (e != cudaSuccess) return cuda_error(e, "recording a metadata event");

  int32_t* d = dev_;
  out.dev.tokens = d + o_tok;
  out.dev.positions = d + o_pos;
  out.dev.row_seq = d + o_rs;
  out.dev.seqs = reinterpret_cast<const kernels::SeqInfo*>(d + o_seq);
  out.dev.block_tables = d + o_bt;
  out.dev.rows = T;
  out.dev.n_seqs = S;
  out.logit_rows = d + o_lr;
  out.jobs_by_rate.clear();
  for (size_t i = 0; i < jobs.size(); ++i) {
    CompressJobs& jl = out.jobs_by_rate[jobs[i].first];
    jl.jobs = reinterpret_cast<const kernels::CompressJob*>(d + o_jobs[i]);
    jl.count = d + o_cnt + i;
    jl.capacity = graph ? S : static_cast<int>(jobs[i].second.size() / 2);
  }
  return ok();
}

}  // namespace deepinfer
