// The CUDA backend: the Backend contract of backend.h on one GPU. Matrix weights live on the device
// as bf16 (fp8 / MXFP4 / f32 checkpoints are dequantized at upload), small parameter vectors and
// small matrices also as fp32; activations are fp32 and every product accumulates in fp32 (cuBLAS for
// dense layers, the kernels of kernels/ for the rest). All work runs in order on one stream, so a
// forward reuses the last one's scratch and metadata without a host wait; the host waits only in
// read / write / finish (and when an arena must grow into one chunk). Decode steps can run as
// captured CUDA graphs (set_graphs; see begin_forward and flush_pending), and every op can be timed
// (set_op_profiling).
//
// Ops return void: the first failure (a CUDA or cuBLAS error, no memory, a shape that breaks the
// contract) is kept, every later op is skipped, and the error is returned by the next read / write
// or begin_forward.
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_arena.h"
#include "di_kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>

namespace deepinfer {
namespace {

namespace kn = kernels;

// Matrices of at most this many elements keep an fp32 copy next to the bf16 one: the ops that want
// fp32 weights (hyper-connection mixes, router gate, compressor position bias) use it.
constexpr int64_t kSmallMatrix = int64_t(1) << 20;
// Scores of the indexer are computed for row chunks of at most this many floats.
constexpr int64_t kIndexerScoreFloats = int64_t(64) << 20;
// Token chunk of the routed-expert path (bounds its permuted buffers). A prefill forward's 8192
// tokens in one chunk: each chunk reads every expert's weights once (12.9 GB a V4-Flash layer), so
// two chunks of 4096 doubled the experts' memory traffic.
constexpr int64_t kMoeChunkRows = 8192;
// Attention splits a small batch's keys until about this many blocks run.
constexpr int64_t kAttnBlocks = 1024;
constexpr int64_t kSmCount = 132;  // H100 SXM / H200; only sizes key splits
// bf16 products of at most this many rows (decode) run on the GEMV kernels, and a decode step's
// fusions apply: products of one input as one launch, the input norm inside it, the next mix inside
// hc_post, the gate product inside the routing.
constexpr int64_t kDecodeRows = kn::kGemvMaxRows;
// Prefill expert products run on wgmma (kernels::moe_*_wgmma) while experts average at most this
// many rows (bound by reading the weights there), else cuBLAS over per-expert slabs.
constexpr int64_t kWgmmaMoeMaxRows = 128;
// blas_experts: experts sorted by count are grouped this many at a time, each group with slabs of
// its largest count.
constexpr size_t kMoeGroupExperts = 64;

struct CudaWeight final : DeviceWeight {
  float* f32 = nullptr;
  uint16_t* b16 = nullptr;
  int32_t* i32 = nullptr;
  ~CudaWeight() override {
    if (f32) cudaFree(f32);
    if (b16) cudaFree(b16);
    if (i32) cudaFree(i32);
  }
};

const CudaWeight& cw(const DeviceWeight& w) { return static_cast<const CudaWeight&>(w); }

Error cuda_error(cudaError_t e, const char* what) {
  return make_error(Code::kBackend, "CUDA: {}: {}", what, cudaGetErrorString(e));
}

const char* blas_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "error";
  }
}

template <class T>
Result<T*> device_alloc(size_t count, const std::string& what) {
  void* p = nullptr;
  if (count == 0) count = 1;
  cudaError_t e = cudaMalloc(&p, count * sizeof(T));
  if (e != cudaSuccess) {
    cudaGetLastError();
    return make_error(Code::kOutOfMemory, "CUDA: cannot allocate {} bytes for {}: {}", count * sizeof(T), what, cudaGetErrorString(e));
  }
  return static_cast<T*>(p);
}

Result<void> copy_to_device(void* dst, const void* src, size_t bytes, const std::string& what) {
  if (bytes == 0) return ok();
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) return make_error(Code::kBackend, "CUDA: uploading {}: {}", what, cudaGetErrorString(e));
  return ok();
}

std::vector<uint16_t> to_bf16(const float* f, size_t n) {
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(f[i]);
  return out;
}

class CudaBackend final : public Backend {
 public:
  static Result<std::unique_ptr<Backend>> create(const BackendOptions& options, const CudaFeatures& features) {
    const int device = options.cuda_device;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      cudaGetLastError();
      return make_error(Code::kUnsupported, "no CUDA device is present ({})", e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    }
    if (device < 0 || device >= count)
      return make_error(Code::kInvalidArgument, "CUDA device {} does not exist ({} present)", device, count);
    std::unique_ptr<CudaBackend> b(new CudaBackend(device, options.fp32_weights));
    b->apply(options);
    DI_TRYV(b->init(features));
    return std::unique_ptr<Backend>(std::move(b));
  }

  ~CudaBackend() override {
    cudaSetDevice(device_);
    if (mode_ == Mode::kCapture) {  // a forward whose work never ran: drop it
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(stream_.id, &g);
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();
    }
    if (stream_.id) cudaStreamSynchronize(stream_.id);
    clear_graphs();
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (int i = 0; i < 2; ++i) {
      if (meta_event_[i]) cudaEventDestroy(meta_event_[i]);
      if (meta_host_[i]) cudaFreeHost(meta_host_[i]);
    }
    if (moe_host_) cudaFreeHost(moe_host_);
    if (side_stream_.id) cudaStreamSynchronize(side_stream_.id);
    if (blas_) cublasDestroy(blas_);
    if (blas_ws_) cudaFree(blas_ws_);
    if (side_blas_) cublasDestroy(side_blas_);
    if (side_blas_ws_) cudaFree(side_blas_ws_);
    if (fork_event_) cudaEventDestroy(fork_event_);
    if (join_event_) cudaEventDestroy(join_event_);
    if (side_stream_.id) cudaStreamDestroy(side_stream_.id);
    if (counters_) cudaFree(counters_);
    if (post_mix_) cudaFree(post_mix_);
    if (slots_) cudaFree(slots_);
    if (blocks_) cudaFree(blocks_);
    if (meta_dev_) cudaFree(meta_dev_);
    if (stream_.id) cudaStreamDestroy(stream_.id);
  }

  std::string name() const override { return "cuda:" + std::to_string(device_) + (fp32_ ? " (fp32)" : ""); }

  int64_t free_memory_bytes() const override {
    size_t free_b = 0, total_b = 0;
    cudaSetDevice(device_);
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return static_cast<int64_t>(free_b);
  }

  // --- weights

  Result<std::unique_ptr<DeviceWeight>> upload(const WeightSource& w) override {
    DI_TRYV(validate_weight_source(w));
    DI_TRYV(set_device());
    const size_t n = static_cast<size_t>(w.numel());
    std::vector<float> f;
    auto f32 = [&]() -> const std::vector<float>& {
      if (f.size() != n) {
        f.resize(n);
        dequantize_to_f32(w, f.data());
      }
      return f;
    };
    const bool want_b16 = w.rows > 1 && !fp32_;
    const bool want_f32 = fp32_ || w.rows == 1 || w.numel() <= kSmallMatrix;
    auto out = std::make_unique<CudaWeight>();
    out->rows = w.rows;
    out->cols = w.cols;
    if (want_b16) {
      DI_TRY(p, device_alloc<uint16_t>(n, w.name));
      out->b16 = p;
      if (w.format == WeightFormat::kPlain && w.values.dtype == DType::kBF16) {
        DI_TRYV(copy_to_device(out->b16, w.values.data, n * 2, w.name));
      } else {
        std::vector<uint16_t> h = to_bf16(f32().data(), n);
        DI_TRYV(copy_to_device(out->b16, h.data(), n * 2, w.name));
      }
    }
    if (want_f32) {
      DI_TRY(p, device_alloc<float>(n, w.name));
      out->f32 = p;
      DI_TRYV(copy_to_device(out->f32, f32().data(), n * 4, w.name));
    }
    return std::unique_ptr<DeviceWeight>(std::move(out));
  }

  Result<std::unique_ptr<DeviceWeight>> upload_stacked(const std::vector<WeightSource>& ws) override {
    if (ws.empty()) return make_error(Code::kInternal, "upload_stacked of nothing");
    DI_TRYV(set_device());
    auto out = std::make_unique<CudaWeight>();
    out->count = static_cast<int64_t>(ws.size());
    out->rows = ws[0].rows;
    out->cols = ws[0].cols;
    const size_t each = static_cast<size_t>(ws[0].numel());
    if (fp32_) {
      DI_TRY(p, device_alloc<float>(each * ws.size(), ws[0].name));
      out->f32 = p;
    } else {
      DI_TRY(p, device_alloc<uint16_t>(each * ws.size(), ws[0].name));
      out->b16 = p;
    }
    std::vector<float> f(each);
    for (size_t e = 0; e < ws.size(); ++e) {
      if (ws[e].rows != out->rows || ws[e].cols != out->cols)
        return make_error(Code::kModelFormat, "tensor \"{}\": shape [{}, {}] differs from its siblings' [{}, {}]", ws[e].name,
                          ws[e].rows, ws[e].cols, out->rows, out->cols);
      DI_TRYV(validate_weight_source(ws[e]));
      if (fp32_) {
        dequantize_to_f32(ws[e], f.data());
        DI_TRYV(copy_to_device(out->f32 + e * each, f.data(), each * 4, ws[e].name));
      } else if (ws[e].format == WeightFormat::kPlain && ws[e].values.dtype == DType::kBF16) {
        DI_TRYV(copy_to_device(out->b16 + e * each, ws[e].values.data, each * 2, ws[e].name));
      } else {
        dequantize_to_f32(ws[e], f.data());
        std::vector<uint16_t> h = to_bf16(f.data(), each);
        DI_TRYV(copy_to_device(out->b16 + e * each, h.data(), each * 2, ws[e].name));
      }
    }
    return std::unique_ptr<DeviceWeight>(std::move(out));
  }

  Result<std::unique_ptr<DeviceWeight>> upload_floats(const std::vector<float>& v, int64_t rows, int64_t cols) override {
    if (static_cast<int64_t>(v.size()) != rows * cols)
      return make_error(Code::kInternal, "upload_floats: {} values for [{}, {}]", v.size(), rows, cols);
    WeightSource w;
    w.name = "floats";
    w.rows = rows;
    w.cols = cols;
    w.values.dtype = DType::kF32;
    w.values.shape = {rows, cols};
    w.values.data = reinterpret_cast<const uint8_t*>(v.data());
    w.values.nbytes = v.size() * sizeof(float);
    return upload(w);
  }

  Result<std::unique_ptr<DeviceWeight>> upload_ints(const std::vector<int32_t>& v, int64_t rows, int64_t cols) override {
    if (static_cast<int64_t>(v.size()) != rows * cols)
      return make_error(Code::kInternal, "upload_ints: {} values for [{}, {}]", v.size(), rows, cols);
    DI_TRYV(set_device());
    auto out = std::make_unique<CudaWeight>();
    out->rows = rows;
    out->cols = cols;
    DI_TRY(p, device_alloc<int32_t>(v.size(), "int table"));
    out->i32 = p;
    DI_TRYV(copy_to_device(out->i32, v.data(), v.size() * 4, "int table"));
    return std::unique_ptr<DeviceWeight>(std::move(out));
  }

  Result<std::unique_ptr<DeviceWeight>> random_weight(int64_t count, int64_t rows, int64_t cols, float mean, float stddev,
                                                     uint64_t seed) override {
    if (count <= 0 || rows <= 0 || cols <= 0)
      return make_error(Code::kInternal, "random_weight of {} x [{}, {}]", count, rows, cols);
    DI_TRYV(set_device());
    const int64_t n = count * rows * cols;
    auto out = std::make_unique<CudaWeight>();
    out->count = count;
    out->rows = rows;
    out->cols = cols;
    // The copies upload / upload_stacked would keep for such a weight.
    const bool want_b16 = !fp32_ && rows > 1;
    const bool want_f32 = fp32_ || (count == 1 && (rows == 1 || n <= kSmallMatrix));
    const std::string what = fmt::format("a random {} x [{}, {}] weight", count, rows, cols);
    if (want_b16) {
      DI_TRY(p, device_alloc<uint16_t>(static_cast<size_t>(n), what));
      out->b16 = p;
    }
    if (want_f32) {
      DI_TRY(p, device_alloc<float>(static_cast<size_t>(n), what));
      out->f32 = p;
    }
    cudaError_t e = kn::fill_random(out->f32, out->b16, n, mean, stddev, seed, stream_);
    if (e != cudaSuccess) return cuda_error(e, "filling a random weight");
    return std::unique_ptr<DeviceWeight>(std::move(out));
  }

  Result<void> randomize_state(uint64_t seed) override {
    DI_TRYV(set_device());
    DI_TRYV(flush_pending());
    const int64_t slot_n = static_cast<int64_t>(layout_.slot_floats) * n_slots_;
    const int64_t block_n = static_cast<int64_t>(layout_.block_floats) * n_blocks_;
    cudaError_t e = kn::fill_random(slots_, nullptr, slot_n, 0.0f, 0.57735027f, seed, stream_);  // uniform [-1, 1)
    if (e == cudaSuccess) e = kn::fill_random(blocks_, nullptr, block_n, 0.0f, 0.57735027f, seed ^ 0x5bd1e995u, stream_);
    if (e != cudaSuccess) return cuda_error(e, "randomizing the model state");
    return sync("randomizing the model state");
  }

  // --- model state

  Result<void> allocate_state(const StateLayout& layout, int n_slots, int n_blocks) override {
    DI_TRYV(set_device());
    DI_TRYV(flush_pending());
    DI_TRYV(sync("allocate_state"));
    ++state_generation_;
    if (slots_) cudaFree(slots_);
    if (blocks_) cudaFree(blocks_);
    slots_ = blocks_ = nullptr;
    layout_ = layout;
    n_slots_ = n_slots;
    n_blocks_ = n_blocks;
    if (layout.block_tokens <= 0) return make_error(Code::kInternal, "state layout with block_tokens {}", layout.block_tokens);
    const size_t slot_n = layout.slot_floats * static_cast<size_t>(std::max(n_slots, 0));
    const size_t block_n = layout.block_floats * static_cast<size_t>(std::max(n_blocks, 0));
    auto oom = [&](const Error& e) {
      return make_error(Code::kOutOfMemory, "cannot allocate model state for {} slots and {} blocks ({} MiB): {}", n_slots, n_blocks,
                        (slot_n + block_n) * 4 >> 20, e.message);
    };
    auto s = device_alloc<float>(slot_n, "state slots");
    if (!s) return oom(s.error());
    slots_ = s.value();
    auto b = device_alloc<float>(block_n, "state blocks");
    if (!b) return oom(b.error());
    blocks_ = b.value();
    // On this stream (non-blocking: a plain cudaMemset on the legacy stream would not be ordered
    // before its later work).
    cudaError_t e = cudaMemsetAsync(slots_, 0, std::max<size_t>(slot_n, 1) * 4, stream_.id);
    if (e == cudaSuccess) e = cudaMemsetAsync(blocks_, 0, std::max<size_t>(block_n, 1) * 4, stream_.id);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream_.id);
    if (e != cudaSuccess) return cuda_error(e, "zeroing model state");
    layers_.clear();
    for (const LayerStateLayout& L : layout.layers) {
      kn::LayerDev d;
      d.head_dim = L.head_dim;
      d.window = L.window;
      d.rate = L.rate;
      d.overlap = L.overlap ? 1 : 0;
      d.index_dim = L.index_dim;
      d.entries_per_block = std::max(L.entries_per_block, 1);
      d.window_offset = static_cast<int64_t>(L.window_offset);
      d.ring_offset = static_cast<int64_t>(L.ring_offset);
      d.index_ring_offset = static_cast<int64_t>(L.index_ring_offset);
      d.entry_offset = static_cast<int64_t>(L.entry_offset);
      d.index_key_offset = static_cast<int64_t>(L.index_key_offset);
      layers_.push_back(d);
    }
    return ok();
  }

  void reset_slot(int slot) override {
    if (!flush_pending()) return;
    if (slot < 0 || slot >= n_slots_) return fail(make_error(Code::kInternal, "reset_slot({}) outside the {} slots", slot, n_slots_));
    if (layout_.slot_floats == 0) return;
    check(cudaMemsetAsync(slots_ + static_cast<size_t>(slot) * layout_.slot_floats, 0, layout_.slot_floats * 4, stream_.id), "reset_slot");
  }

  // --- one forward

  Result<void> begin_forward(const ForwardBatch& batch) override {
    pending_mix_ = {};
    bf16_query_ = nullptr;
    query_norm_ = {};
    DI_TRYV(set_device());
    DI_TRYV(flush_pending());
    if (failed_) {  // a failure of the previous forward that nobody read yet
      failed_ = false;
      return error_;
    }
    const int32_t T = batch.rows();
    if (batch.positions.size() != batch.tokens.size() || batch.row_seq.size() != batch.tokens.size())
      return make_error(Code::kInternal, "batch with {} tokens, {} positions, {} row sequences", batch.tokens.size(),
                        batch.positions.size(), batch.row_seq.size());
    for (const auto& s : batch.seqs) {
      if (s.slot < 0 || s.slot >= n_slots_) return make_error(Code::kInternal, "slot {} outside the {} allocated", s.slot, n_slots_);
      if (s.n_tokens < 0 || s.n_past < 0 || s.first_row < 0 || s.first_row + s.n_tokens > T)
        return make_error(Code::kInternal, "sequence in slot {} has rows [{}, {}) of a batch of {}", s.slot, s.first_row,
                          s.first_row + s.n_tokens, T);
      if (s.n_blocks < layout_.blocks_for(static_cast<int64_t>(s.n_past) + s.n_tokens))
        return make_error(Code::kInternal, "sequence in slot {} has {} blocks for {} tokens", s.slot, s.n_blocks, s.n_past + s.n_tokens);
      if (s.table_offset < 0 || s.table_offset + s.n_blocks > static_cast<int32_t>(batch.block_tables.size()))
        return make_error(Code::kInternal, "sequence in slot {} has a block table outside the batch's", s.slot);
      for (int32_t b = 0; b < s.n_blocks; ++b) {
        int32_t id = batch.block_tables[s.table_offset + b];
        if (id < 0 || id >= n_blocks_) return make_error(Code::kInternal, "block id {} outside the {} allocated", id, n_blocks_);
      }
    }
    int32_t max_pos = 0;
    for (int32_t r = 0; r < T; ++r) {
      const int32_t si = batch.row_seq[r];
      if (si < 0 || si >= static_cast<int32_t>(batch.seqs.size()))
        return make_error(Code::kInternal, "row {} belongs to sequence {} of {}", r, si, batch.seqs.size());
      const SequenceStep& s = batch.seqs[si];
      if (r < s.first_row || r >= s.first_row + s.n_tokens || batch.positions[r] != s.n_past + (r - s.first_row))
        return make_error(Code::kInternal, "row {} (position {}) does not match its sequence", r, batch.positions[r]);
      max_pos = std::max(max_pos, batch.positions[r]);
    }
    for (int32_t r : batch.logit_rows)
      if (r < 0 || r >= T) return make_error(Code::kInternal, "logit row {} outside the batch of {}", r, T);

    // A decode step (one new token for each sequence) can run as a captured graph. Its launch
    // parameters must not depend on the batch beyond the key: the metadata regions get fixed
    // capacities, and context-dependent bounds use the block-table capacity instead of positions.
    const int32_t S = static_cast<int32_t>(batch.seqs.size());
    bool graph = graphs_on_ && !profiling_ && T > 0 && T == S;
    int32_t max_blocks = 1;
    for (const auto& s : batch.seqs) {
      if (s.n_tokens != 1) graph = false;
      max_blocks = std::max(max_blocks, s.n_blocks);
    }
    const int32_t block_cap = (max_blocks + kGraphBlockBucket - 1) / kGraphBlockBucket * kGraphBlockBucket;
    pos_bound_ = graph ? static_cast<int64_t>(block_cap) * layout_.block_tokens : static_cast<int64_t>(max_pos) + 1;
    seq_steps_.clear();
    for (const auto& s : batch.seqs) seq_steps_.emplace_back(s.n_past, s.n_tokens);

    // No wait for the previous forward: this stream runs the work in order, so it is done with the
    // scratch, temporaries and device metadata before this one's uses them.
    scratch_.reset(stream_.id);
    temp_.reset(stream_.id);

    // Windows that close in this step, per compress rate (the compress jobs).
    std::vector<std::pair<int, std::vector<int32_t>>> jobs;  // rate -> (seq, w) pairs
    for (const LayerStateLayout& L : layout_.layers) {
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

    // One upload of the metadata: tokens, positions, row_seq, seqs, block tables, logit rows, jobs
    // and their counts.
    size_t n = 0;
    auto region = [&](size_t ints) {
      size_t at = n;
      n += (ints + 3) & ~size_t(3);  // 16-byte aligned regions
      return at;
    };
    const size_t o_tok = region(T), o_pos = region(T), o_rs = region(T), o_seq = region(static_cast<size_t>(S) * 6);
    const size_t o_bt = region(graph ? static_cast<size_t>(S) * block_cap : batch.block_tables.size());
    const size_t o_lr = region(batch.logit_rows.size());
    std::vector<size_t> o_jobs;
    for (const auto& j : jobs) o_jobs.push_back(region(graph ? static_cast<size_t>(S) * 2 : j.second.size()));
    const size_t o_cnt = region(jobs.size());
    DI_TRYV(reserve_meta(n));
    const int slot = meta_turn_;
    meta_turn_ ^= 1;
    cudaError_t e = cudaEventSynchronize(meta_event_[slot]);  // its last upload has been read
    if (e != cudaSuccess) return cuda_error(e, "waiting for a metadata buffer");
    int32_t* h = meta_host_[slot];
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
      e = cudaMemcpyAsync(meta_dev_, h, 4 * n, cudaMemcpyHostToDevice, stream_.id);
      if (e != cudaSuccess) return cuda_error(e, "uploading batch metadata");
    }
    e = cudaEventRecord(meta_event_[slot], stream_.id);
    if (e != cudaSuccess) return cuda_error(e, "recording a metadata event");
    int32_t* d = meta_dev_;
    bdev_.tokens = d + o_tok;
    bdev_.positions = d + o_pos;
    bdev_.row_seq = d + o_rs;
    bdev_.seqs = reinterpret_cast<const kn::SeqInfo*>(d + o_seq);
    bdev_.block_tables = d + o_bt;
    bdev_.rows = T;
    bdev_.n_seqs = S;
    logit_rows_dev_ = d + o_lr;
    jobs_by_rate_.clear();
    for (size_t i = 0; i < jobs.size(); ++i) {
      JobList& jl = jobs_by_rate_[jobs[i].first];
      jl.jobs = reinterpret_cast<const kn::CompressJob*>(d + o_jobs[i]);
      jl.count = d + o_cnt + i;
      jl.capacity = graph ? S : static_cast<int>(jobs[i].second.size() / 2);
    }
    state_.slots = slots_;
    state_.blocks = blocks_;
    state_.slot_floats = static_cast<int64_t>(layout_.slot_floats);
    state_.block_floats = static_cast<int64_t>(layout_.block_floats);
    state_.block_tokens = layout_.block_tokens;
    batch_ = &batch;

    mode_ = Mode::kEager;
    if (graph) {
      const uint64_t gen = generation();
      if (gen != graphs_gen_) {  // an address a graph holds may have changed
        clear_graphs();
        graphs_gen_ = gen;
      }
      const GraphKey key{T, static_cast<int32_t>(batch.logit_rows.size()), block_cap, batch.greedy_tokens};
      GraphEntry& g = graphs_[key];
      g.last_used = ++graph_clock_;
      if (graphs_.size() > kMaxGraphs) evict_oldest_graph();
      if (g.exec) {
        mode_ = Mode::kReplay;
        current_ = &g;
      } else if (g.seen && !g.broken) {  // the eager run sized the arenas: capture this one
        e = cudaStreamBeginCapture(stream_.id, cudaStreamCaptureModeRelaxed);
        if (e != cudaSuccess) {
          cudaGetLastError();
          g.broken = true;
        } else {
          mode_ = Mode::kCapture;
          current_ = &g;
        }
      }
      g.seen = true;
    }
    if (profiling_) check(kn::spin(kProfileHeadStartNs, stream_), "profiling head start");
    return ok();
  }

  Tensor scratch(int64_t rows, int64_t cols) override {
    Tensor t{nullptr, rows, cols};
    t.data = static_cast<float*>(take_scratch(rows * cols, true));
    return t;
  }

  IntTensor scratch_int(int64_t rows, int64_t cols) override {
    IntTensor t{nullptr, rows, cols};
    t.data = static_cast<int32_t*>(take_scratch(rows * cols, true));
    return t;
  }

  Tensor scratch_uninit(int64_t rows, int64_t cols) override {
    Tensor t{nullptr, rows, cols};
    t.data = static_cast<float*>(take_scratch(rows * cols, zero_all_scratch_));
    return t;
  }

  IntTensor scratch_int_uninit(int64_t rows, int64_t cols) override {
    IntTensor t{nullptr, rows, cols};
    t.data = static_cast<int32_t*>(take_scratch(rows * cols, zero_all_scratch_));
    return t;
  }

  ScratchMark scratch_mark() override {
    const auto m = scratch_.mark();
    return ScratchMark{m.first, m.second};
  }

  void scratch_release(ScratchMark m) override {
    scratch_.release({m.a, m.b});
    bf16_query_ = nullptr;  // its memory may be handed out again
    query_norm_ = {};
  }

  // A prefill query that only the wgmma attention will read is kept in bf16 (written so by its
  // product and by the norm + rope): half the bytes written and read twice (2 GB a layer at 8192 rows).
  Tensor attention_query(int layer, int64_t rows, int64_t cols) override {
    Tensor q = scratch_uninit(rows, cols);
    query_norm_ = {};
    if (q.data && fused_attention_fits(layer, rows, cols) &&
        wgmma_table_rows(layer, rows).first >= 0)
      bf16_query_ = q.data;
    return q;
  }

  Result<void> finish() override {
    DI_TRYV(set_device());
    DI_TRYV(flush_pending());
    if (failed_) return error_;
    return sync("finishing the forward");
  }

  void set_op_profiling(bool on) override {
    if (mode_ != Mode::kEager) (void)flush_pending();
    profiling_ = on;
    prof_.clear();
    events_used_ = 0;
  }

  Result<std::vector<OpTime>> take_op_profile() override {
    DI_TRYV(finish());
    std::map<std::string, OpTime> by;
    for (const ProfRecord& r : prof_) {
      float ms = 0.0f;
      cudaError_t e = cudaEventElapsedTime(&ms, events_[r.start], events_[r.end]);
      if (e != cudaSuccess) return cuda_error(e, "reading op timings");
      std::string label = r.name;
      if (r.n > 0) label += fmt::format(" {}x{}", r.n, r.k);
      OpTime& t = by[label];
      t.op = label;
      ++t.calls;
      t.ms += ms;
    }
    prof_.clear();
    events_used_ = 0;
    std::vector<OpTime> out;
    for (auto& [k, v] : by) out.push_back(v);
    std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
    return out;
  }

  Result<void> set_options(const BackendOptions& o) override {
    if (o.cuda_device != device_ || o.fp32_weights != fp32_)
      return make_error(Code::kInvalidArgument, "cuda_device and fp32_weights are fixed when the backend is made");
    (void)flush_pending();
    clear_graphs();  // graphs hold the kernels they were captured with
    apply(o);
    return ok();
  }

  void apply(const BackendOptions& o) {
    stream_.pdl = side_stream_.pdl = o.pdl;
    zero_all_scratch_ = o.zero_scratch;
    graphs_allowed_ = o.graphs;
    graphs_on_ = graphs_wanted_ && graphs_allowed_;
  }

  void set_graphs(bool on) override {
    if (mode_ != Mode::kEager) (void)flush_pending();
    graphs_wanted_ = on;
    graphs_on_ = on && graphs_allowed_;
    if (!graphs_on_) clear_graphs();
  }

  Result<DeviceCeilings> measure_ceilings() override {
    DI_TRYV(set_device());
    DI_TRYV(finish());
    DeviceCeilings c;
    cudaDeviceProp prop{};
    cudaError_t e = cudaGetDeviceProperties(&prop, device_);
    if (e != cudaSuccess) return cuda_error(e, "reading device properties");
    c.device = prop.name;
    c.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    cudaEvent_t ev[2] = {nullptr, nullptr};
    for (auto& x : ev)
      if ((e = cudaEventCreate(&x)) != cudaSuccess) return cuda_error(e, "creating events");
    auto median_ms = [&](auto&& body, int reps) -> Result<double> {
      std::vector<float> t;
      for (int i = 0; i < reps + 3; ++i) {
        cudaEventRecord(ev[0], stream_.id);
        body();
        cudaEventRecord(ev[1], stream_.id);
        cudaError_t r = cudaEventSynchronize(ev[1]);
        if (r != cudaSuccess) return cuda_error(r, "timing a ceiling");
        float ms = 0;
        cudaEventElapsedTime(&ms, ev[0], ev[1]);
        if (i >= 3) t.push_back(ms);  // 3 warm-ups
      }
      std::sort(t.begin(), t.end());
      return static_cast<double>(t[t.size() / 2]);
    };
    Result<void> status = ok();
    // Copy: two 1 GiB buffers of random data (bytes read + written per second).
    {
      const size_t bytes = size_t(1) << 30;
      void *a = nullptr, *b = nullptr;
      e = cudaMalloc(&a, bytes);
      if (e == cudaSuccess) e = cudaMalloc(&b, bytes);
      if (e == cudaSuccess) e = kn::fill_random(static_cast<float*>(a), nullptr, bytes / 4, 0.0f, 1.0f, 1, stream_);
      if (e == cudaSuccess) {
        auto ms = median_ms([&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream_.id); }, 20);
        if (ms) c.copy_bytes_per_s = 2.0 * static_cast<double>(bytes) / (ms.value() * 1e-3);
        else status = ms.error();
      } else {
        status = cuda_error(e, "copy ceiling buffers");
      }
      if (a) cudaFree(a);
      if (b) cudaFree(b);
      cudaGetLastError();
    }
    // Matrix rate: 8192^3 bf16 product, fp32 accumulation, bf16 out, random operands.
    if (status) {
      const int n = 8192;
      const size_t elems = static_cast<size_t>(n) * n;
      uint16_t *a = nullptr, *b = nullptr, *cm = nullptr;
      e = cudaMalloc(&a, elems * 2);
      if (e == cudaSuccess) e = cudaMalloc(&b, elems * 2);
      if (e == cudaSuccess) e = cudaMalloc(&cm, elems * 2);
      if (e == cudaSuccess) e = kn::fill_random(nullptr, a, static_cast<int64_t>(elems), 0.0f, 1.0f, 2, stream_);
      if (e == cudaSuccess) e = kn::fill_random(nullptr, b, static_cast<int64_t>(elems), 0.0f, 1.0f, 3, stream_);
      if (e == cudaSuccess) {
        const float one = 1.0f, zero = 0.0f;
        cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
        auto ms = median_ms(
            [&] {
              bs = cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n, &zero, cm,
                                CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
            },
            10);
        if (bs != CUBLAS_STATUS_SUCCESS) status = make_error(Code::kBackend, "cuBLAS: matrix-rate product: {}", blas_name(bs));
        else if (ms) c.bf16_flops = 2.0 * n * static_cast<double>(n) * n / (ms.value() * 1e-3);
        else status = ms.error();
      } else {
        status = cuda_error(e, "matrix ceiling buffers");
      }
      if (a) cudaFree(a);
      if (b) cudaFree(b);
      if (cm) cudaFree(cm);
      cudaGetLastError();
    }
    for (auto& x : ev) cudaEventDestroy(x);
    if (!status) return status.error();
    return c;
  }

  Result<void> read(Tensor t, float* host) override { return copy_out(t.data, host, t.rows * t.cols); }
  Result<HostFloats> allocate_host(size_t count) override {
    void* p = nullptr;
    cudaError_t e = cudaMallocHost(&p, std::max<size_t>(count, 1) * sizeof(float));
    if (e != cudaSuccess) return cuda_error(e, "allocating pinned host memory");
    return HostFloats(static_cast<float*>(p), HostRelease{[](float* q) { cudaFreeHost(q); }});
  }
  Result<void> read_ints(IntTensor t, int32_t* host) override { return copy_out(t.data, host, t.rows * t.cols); }
  Result<void> write(Tensor t, const float* host) override { return copy_in(t.data, host, t.rows * t.cols); }
  Result<void> write_ints(IntTensor t, const int32_t* host) override { return copy_in(t.data, host, t.rows * t.cols); }

  // --- ops

  void embed(const DeviceWeight& table, Tensor out) override {
    Op op(*this, "embed");
    if (!op) return;
    const auto& w = cw(table);
    if (!expect(out.rows == bdev_.rows && w.cols > 0 && out.cols % w.cols == 0 && out.cols >= w.cols,
                "embed: output [{}, {}] for {} rows of a [{}, {}] table", out.rows, out.cols, bdev_.rows, w.rows, w.cols))
      return;
    // fp32 rows where the table is small enough to keep them, bf16 otherwise
    check(kn::embed(w.f32 ? nullptr : w.b16, w.f32, w.rows, w.cols, bdev_.tokens, out.rows, static_cast<int>(out.cols / w.cols), out.data,
                    stream_),
          "embed");
  }

  void linear(Tensor x, const DeviceWeight& w, Tensor out) override {
    Op op(*this, "linear", w.rows, w.cols);
    if (!op) return;
    if (!expect(w.count == 1 && x.cols == w.cols && out.cols == w.rows && out.rows == x.rows,
                "linear: [{}, {}] @ [{}, {}]^T into [{}, {}]", x.rows, x.cols, w.rows, w.cols, out.rows, out.cols))
      return;
    if (out.data == bf16_query_) {
      const DeviceWeight* ws[] = {&w};
      const Tensor outs[] = {out};
      return linears(x, ws, outs);
    }
    gemm(x.data, x.rows, x.cols, x.cols, cw(w), 0, w.rows, w.cols, 0, 1, out.data, out.cols, false);
  }

  // outs[i] = x @ ws[i]^T are bf16 products of x's whole rows (what one launch, or one bf16 copy of x, serves).
  bool bf16_products_of(Tensor x, std::span<const DeviceWeight* const> ws, std::span<const Tensor> outs) {
    bool ok = !ws.empty() && ws.size() == outs.size();
    for (size_t i = 0; ok && i < ws.size(); ++i) {
      const CudaWeight& w = cw(*ws[i]);
      ok = w.b16 && w.count == 1 && w.cols == x.cols && outs[i].rows == x.rows && outs[i].cols == w.rows;
    }
    return ok;
  }

  // Decode: products of one input as one GEMV launch (false: they are not for one).
  bool gemv_list_of(Tensor x, std::span<const DeviceWeight* const> ws, std::span<const Tensor> outs, kn::GemvList& list) {
    if (x.rows > kDecodeRows || ws.size() > kn::kGemvMaxProducts || !bf16_products_of(x, ws, outs)) return false;
    for (size_t i = 0; i < ws.size(); ++i) {
      const CudaWeight& w = cw(*ws[i]);
      if (!kn::gemv_supported(x.data, x.cols, w.b16, x.cols)) return false;
      list.p[list.count++] = kn::GemvProduct{w.b16, outs[i].data, w.rows, w.rows, outs[i].cols};
    }
    return true;
  }

  // Decode: the products as one GEMV launch. Prefill: x converted to bf16 once for all of them
  // (one product after the other converted it each time: 7 times a CSA layer's input). Else one
  // product after the other.
  void linears(Tensor x, std::span<const DeviceWeight* const> ws, std::span<const Tensor> outs) override {
    kn::GemvList list;
    if (gemv_list_of(x, ws, outs, list)) {
      Op op(*this, "linears (GEMV)");
      if (op) check(kn::gemv_list(x.data, x.rows, x.cols, x.cols, list, stream_), "GEMV list");
      return;
    }
    const bool query = std::any_of(outs.begin(), outs.end(), [&](const Tensor& t) { return t.data == bf16_query_; });
    if (fp32_ || x.rows <= kDecodeRows || (ws.size() < 2 && !query) || !bf16_products_of(x, ws, outs)) {
      // (attention_query keeps a query in bf16 only where its product is one of these)
      if (!query) return Backend::linears(x, ws, outs);
      Op op(*this, "linears");
      if (op) expect(false, "linears: the attention query of [{}, {}] must be a bf16 product of whole rows", x.rows, x.cols);
      return;
    }
    Op op(*this, "linears (one bf16 input)");
    if (!op) return;
    const kn::bf16_t* xb = activations_bf16(x.data, x.rows * x.cols);
    for (size_t i = 0; xb && i < ws.size(); ++i) {
      const CudaWeight& w = cw(*ws[i]);
      if (!gemm_bf16(xb, x.rows, x.cols, x.cols, w, 0, w.rows, w.cols, 0, 1, outs[i].data, outs[i].cols, outs[i].data == bf16_query_))
        return;
    }
  }

  // Decode: the norm inside the products' GEMV launch (x is left as it was). Else the two ops.
  void rms_norm_linears(Tensor x, const DeviceWeight* weight, float eps, std::span<const DeviceWeight* const> ws,
                        std::span<const Tensor> outs) override {
    kn::GemvList list;
    const CudaWeight* nw = weight ? &cw(*weight) : nullptr;  // (an unweighted norm: the two ops)
    if (!nw || !nw->f32 || nw->rows * nw->cols != x.cols || !gemv_list_of(x, ws, outs, list))
      return Backend::rms_norm_linears(x, weight, eps, ws, outs);
    Op op(*this, "rms_norm + linears (GEMV)");
    if (!op) return;
    list.norm = nw->f32;
    list.norm_eps = eps;
    check(kn::gemv_list(x.data, x.rows, x.cols, x.cols, list, stream_), "GEMV list with the input norm");
  }

  void grouped_linear(Tensor x, const DeviceWeight& w, int groups, Tensor out) override {
    Op op(*this, "grouped_linear", w.rows, w.cols);
    if (!op) return;
    if (!expect(groups > 0 && x.cols % groups == 0 && w.rows % groups == 0 && w.cols == x.cols / groups &&
                    out.cols == w.rows && out.rows == x.rows,
                "grouped_linear: [{}, {}] in {} groups with [{}, {}] into [{}, {}]", x.rows, x.cols, groups, w.rows, w.cols, out.rows,
                out.cols))
      return;
    const int64_t k = x.cols / groups, n = w.rows / groups;
    gemm(x.data, x.rows, k, x.cols, cw(w), 0, n, k, n * k, groups, out.data, out.cols, false);
  }

  void rms_norm(Tensor x, const DeviceWeight* weight, float eps, int group, Tensor out) override {
    Op op(*this, "rms_norm");
    if (!op) return;
    if (!expect(group > 0 && x.cols % group == 0 && out.rows == x.rows && out.cols == x.cols &&
                    (!weight || weight->rows * weight->cols == group),
                "rms_norm: [{}, {}] in groups of {}", x.rows, x.cols, group))
      return;
    const float* wt = weight ? fvec(*weight, "rms_norm weight") : nullptr;
    if (weight && !wt) return;
    check(kn::rms_norm(x.data, wt, eps, x.rows, x.cols, group, out.data, stream_), "rms_norm");
  }

  void rms_norm_rope(Tensor x, const DeviceWeight* weight, float eps, int head_dim, const Rope& rope, Tensor out) override {
    Op op(*this, "rms_norm + rope");
    if (!op) return;
    if (!expect(head_dim > 0 && x.cols % head_dim == 0 && out.rows == x.rows && out.cols == x.cols && x.rows == bdev_.rows &&
                    (!weight || weight->rows * weight->cols == head_dim) && rope.rope_dim <= head_dim && rope.rope_dim % 2 == 0,
                "rms_norm_rope: [{}, {}] with head_dim {} and rope_dim {}", x.rows, x.cols, head_dim, rope.rope_dim))
      return;
    const bool query = x.data == bf16_query_;  // (bf16, in place)
    if (!expect(!query || out.data == x.data, "rms_norm_rope: the attention query is normalised in place")) return;
    const float* wt = weight ? fvec(*weight, "rms_norm weight") : nullptr;
    const kn::RopeDev r = rope_dev(rope);
    if ((weight && !wt) || !r.inv_freq) return;
    if (query && defer_query_norm(weight, eps, head_dim, r)) return;
    check(kn::rms_norm_pair(kn::NormTensor{x.data, wt, x.cols, out.data, query}, kn::NormTensor{}, eps, x.rows, head_dim, stream_, &r,
                            bdev_.positions),
          "rms_norm + rope");
  }

  // One launch for both (a decode step's query and key norms).
  void rms_norm_rope_pair(Tensor a, const DeviceWeight* weight_a, Tensor b, const DeviceWeight* weight_b, float eps, int head_dim,
                          const Rope& rope) override {
    Op op(*this, "rms_norm + rope");
    if (!op) return;
    auto fits = [&](Tensor x, const DeviceWeight* w) {
      return x.cols % head_dim == 0 && x.rows == bdev_.rows && (!w || w->rows * w->cols == head_dim);
    };
    if (!expect(head_dim > 0 && fits(a, weight_a) && fits(b, weight_b) && rope.rope_dim <= head_dim && rope.rope_dim % 2 == 0,
                "rms_norm_rope_pair: [{}, {}] and [{}, {}] with head_dim {} and rope_dim {}", a.rows, a.cols, b.rows, b.cols, head_dim,
                rope.rope_dim))
      return;
    const float* wa = weight_a ? fvec(*weight_a, "rms_norm weight") : nullptr;
    const float* wb = weight_b ? fvec(*weight_b, "rms_norm weight") : nullptr;
    const kn::RopeDev r = rope_dev(rope);
    if ((weight_a && !wa) || (weight_b && !wb) || !r.inv_freq) return;
    if (a.data == bf16_query_ && defer_query_norm(weight_a, eps, head_dim, r)) {  // b alone now
      check(kn::rms_norm_pair(kn::NormTensor{b.data, wb, b.cols, b.data, false}, kn::NormTensor{}, eps, b.rows, head_dim, stream_, &r,
                              bdev_.positions),
            "rms_norm + rope");
      return;
    }
    check(kn::rms_norm_pair(kn::NormTensor{a.data, wa, a.cols, a.data, a.data == bf16_query_},
                            kn::NormTensor{b.data, wb, b.cols, b.data, b.data == bf16_query_}, eps, a.rows, head_dim, stream_, &r,
                            bdev_.positions),
          "rms_norm + rope (pair)");
  }

  void rope(Tensor x, int head_dim, const Rope& rope, bool inverse) override {
    Op op(*this, "rope");
    if (!op) return;
    if (!expect(head_dim > 0 && x.cols % head_dim == 0 && rope.rope_dim <= head_dim && rope.rope_dim % 2 == 0 && x.rows == bdev_.rows,
                "rope: [{}, {}] with head_dim {} and rope_dim {}", x.rows, x.cols, head_dim, rope.rope_dim))
      return;
    kn::RopeDev r = rope_dev(rope);
    if (!r.inv_freq) return;
    check(kn::rope(x.data, x.rows, x.cols, head_dim, r, bdev_.positions, inverse, stream_), "rope");
  }

  void add(Tensor a, Tensor b) override {
    Op op(*this, "add");
    if (!op) return;
    if (!expect(a.rows * a.cols == b.rows * b.cols, "add: [{}, {}] += [{}, {}]", a.rows, a.cols, b.rows, b.cols)) return;
    check(kn::add(a.data, b.data, a.rows * a.cols, stream_), "add");
  }

  void gather_rows(Tensor x, const std::vector<int32_t>& rows, Tensor out) override {
    Op op(*this, "gather_rows");
    if (!op) return;
    if (!expect(out.rows == static_cast<int64_t>(rows.size()) && out.cols == x.cols, "gather_rows: {} rows into [{}, {}]", rows.size(),
                out.rows, out.cols))
      return;
    for (int32_t r : rows)
      if (!expect(r >= 0 && r < x.rows, "gather_rows: row {} of {}", r, x.rows)) return;
    if (rows.empty()) return;
    const int32_t* d = nullptr;
    if (batch_ && &rows == &batch_->logit_rows) {
      d = logit_rows_dev_;
    } else {
      auto* p = static_cast<int32_t*>(temp(rows.size() * 4));
      if (!p) return;
      if (!check(cudaMemcpyAsync(p, rows.data(), rows.size() * 4, cudaMemcpyHostToDevice, stream_.id), "gather_rows upload")) return;
      d = p;
    }
    check(kn::gather_rows(x.data, x.cols, d, out.rows, out.data, stream_), "gather_rows");
  }

  void argmax_rows(Tensor x, IntTensor out) override {
    Op op(*this, "argmax_rows");
    if (!op) return;
    if (!expect(out.rows == x.rows && out.cols == 1, "argmax_rows: [{}, {}] into [{}, {}]", x.rows, x.cols, out.rows, out.cols)) return;
    check(kn::argmax_rows(x.data, x.rows, x.cols, out.data, stream_), "argmax_rows");
  }

  void hc_pre(Tensor streams, const HyperConnection& hc, Tensor collapsed, Tensor post, Tensor comb) override {
    Op op(*this, "hc_pre");
    if (!op) return;
    const int n = hc.hc, mix = (2 + n) * n;
    const int64_t d = collapsed.cols;
    if (!expect(n >= 1 && n <= 16 && streams.cols == n * d && hc.fn->rows == mix && hc.fn->cols == streams.cols &&
                    collapsed.rows == streams.rows && post.cols == n && comb.cols == n * n,
                "hc_pre: streams [{}, {}], hc {}, collapsed [{}, {}]", streams.rows, streams.cols, n, collapsed.rows, collapsed.cols))
      return;
    const float* base = fvec(*hc.base, "hc base");
    const float* scale = fvec(*hc.scale, "hc scale");
    if (!base || !scale) return;
    const float* norm = nullptr;
    if (hc.sublayer_norm && !(norm = sublayer_norm(hc, d))) return;
    const auto [part, splits] = mix_product(streams, cw(*hc.fn), mix);
    if (!part) return;
    check(kn::hc_pre(streams.data, part, splits, streams.rows, n, d, base, scale, hc.sinkhorn_iters, hc.eps, hc.norm_eps, norm,
                     collapsed.data, post.data, comb.data, stream_),
          "hc_pre");
  }

  // The norm weight of hc.sublayer_norm for rows of d, or null (the error kept).
  const float* sublayer_norm(const HyperConnection& hc, int64_t d) {
    if (!expect(hc.sublayer_norm->rows * hc.sublayer_norm->cols == d, "hyper-connection: a norm of {} values for rows of {}",
                hc.sublayer_norm->rows * hc.sublayer_norm->cols, d))
      return nullptr;
    return fvec(*hc.sublayer_norm, "norm weight");
  }

  void hc_post(Tensor streams, Tensor out, Tensor post, Tensor comb, Tensor new_streams, const DeviceWeight* next_fn = nullptr) override {
    Op op(*this, "hc_post");
    if (!op) return;
    const int n = static_cast<int>(post.cols);
    if (!expect(streams.cols == n * out.cols && new_streams.cols == streams.cols && comb.cols == n * n,
                "hc_post: streams [{}, {}], out [{}, {}], hc {}", streams.rows, streams.cols, out.rows, out.cols, n))
      return;
    pending_mix_ = {};
    const float* fn = next_fn ? cw(*next_fn).f32 : nullptr;
    const int splits = kn::hc_post_mix_splits(n, out.cols);
    if (fn && streams.rows <= kDecodeRows && next_fn->cols == streams.cols && next_fn->rows <= kn::kMixMaxOut &&
        static_cast<size_t>(streams.rows * splits * (next_fn->rows + 1)) <= kPostMixFloats) {
      const cudaError_t e = kn::hc_post_mix(streams.data, out.data, post.data, comb.data, streams.rows, n, out.cols, new_streams.data, fn,
                                            static_cast<int>(next_fn->rows), post_mix_, stream_);
      if (e != cudaErrorInvalidValue) {  // (shapes it does not take: the plain kernel below)
        if (check(e, "hc_post + next mix")) pending_mix_ = {new_streams.data, next_fn, splits};
        return;
      }
    }
    check(kn::hc_post(streams.data, out.data, post.data, comb.data, streams.rows, n, out.cols, new_streams.data, stream_), "hc_post");
  }

  void hc_head(Tensor streams, const HyperConnection& hc, Tensor out) override {
    Op op(*this, "hc_head");
    if (!op) return;
    const int n = hc.hc;
    if (!expect(n >= 1 && n <= 16 && streams.cols == n * out.cols && hc.fn->rows == n && hc.fn->cols == streams.cols,
                "hc_head: streams [{}, {}], hc {}, out [{}, {}]", streams.rows, streams.cols, n, out.rows, out.cols))
      return;
    const float* base = fvec(*hc.base, "hc_head base");
    const float* scale = fvec(*hc.scale, "hc_head scale");
    if (!base || !scale) return;
    const float* norm = nullptr;
    if (hc.sublayer_norm && !(norm = sublayer_norm(hc, out.cols))) return;
    const auto [part, splits] = mix_product(streams, cw(*hc.fn), n);
    if (!part) return;
    check(kn::hc_head(streams.data, part, splits, streams.rows, n, out.cols, base, scale, hc.eps, hc.norm_eps, norm, out.data, stream_),
          "hc_head");
  }

  void compress(int layer, Tensor kv, Tensor gate, const Compressor& c) override {
    Op op(*this, "compress");
    if (!op || !layer_ok(layer)) return;
    const LayerStateLayout& L = layout_.layers[layer];
    const int width = c.indexer ? L.index_width() : L.width();
    if (!expect(L.rate > 0 && (!c.indexer || L.index_dim > 0) && kv.cols == width && gate.cols == width && kv.rows == bdev_.rows &&
                    gate.rows == bdev_.rows && c.ape->rows == L.rate && c.ape->cols == width,
                "compress: layer {} (rate {}) with kv [{}, {}], gate [{}, {}]", layer, L.rate, kv.rows, kv.cols, gate.rows, gate.cols))
      return;
    const float* ape = fmat(*c.ape, "compressor ape");
    const float* norm = fvec(*c.norm, "compressor norm");
    kn::RopeDev r = rope_dev(c.rope);
    if (!ape || !norm || !r.inv_freq) return;
    const JobList& jobs = jobs_by_rate_[L.rate];
    // Long windows pooled by more blocks (eager forwards: the partials are temporaries).
    const int runs = kn::compress_pool_runs(layers_[layer]);
    float* part = nullptr;
    if (runs > 1 && mode_ == Mode::kEager &&
        !(part = static_cast<float*>(temp(static_cast<size_t>(jobs.capacity) * runs * 3 * (c.indexer ? L.index_dim : L.head_dim) * 4))))
      return;
    if (!check(kn::compress_pool(kv.data, gate.data, ape, norm, c.norm_eps, r, c.indexer, jobs.jobs, jobs.count, jobs.capacity, bdev_,
                                 state_, layers_[layer], part, stream_),
               "compress pool"))
      return;
    check(kn::compress_ring_write(kv.data, gate.data, ape, c.indexer, bdev_, state_, layers_[layer], stream_), "compress ring");
  }

  void indexer_topk(int layer, Tensor q, Tensor weights, int heads, IntTensor out) override {
    Op op(*this, "indexer_topk");
    if (!op || !layer_ok(layer)) return;
    const LayerStateLayout& L = layout_.layers[layer];
    if (!expect(L.rate > 0 && L.index_dim > 0 && heads > 0 && q.cols == static_cast<int64_t>(heads) * L.index_dim &&
                    weights.cols == heads && q.rows == bdev_.rows && out.rows == q.rows && out.cols > 0 && out.cols <= 4096,
                "indexer_topk: layer {} with q [{}, {}], {} heads, top {}", layer, q.rows, q.cols, heads, out.cols))
      return;
    const int64_t max_visible = std::max<int64_t>(1, pos_bound_ / L.rate);
    const bool tensor_cores = !fp32_ && kn::indexer_scores_mqa_supported(heads, state_, layers_[layer]) &&
                              reinterpret_cast<uintptr_t>(q.data) % 16 == 0;
    const int64_t chunk = std::max<int64_t>(1, kIndexerScoreFloats / max_visible);
    float* scores = static_cast<float*>(temp(static_cast<size_t>(std::min(chunk, q.rows) * max_visible) * 4));
    if (!scores) return;
    kn::KeyTableDev table;
    const bool wgmma = tensor_cores && q.rows >= 64 && bdev_.rows >= 4 * static_cast<int64_t>(bdev_.n_seqs) &&
                       index_key_table(layer, heads, table);
    if (failed_) return;
    for (int64_t r0 = 0; r0 < q.rows; r0 += chunk) {
      const int64_t nr = std::min(chunk, q.rows - r0);
      const cudaError_t e =
          wgmma          ? kn::indexer_scores_wgmma(q.data, weights.data, heads, r0, nr, max_visible, bdev_, layers_[layer], table, scores,
                                                    max_visible, stream_)
          : tensor_cores ? kn::indexer_scores_mqa(q.data, weights.data, heads, r0, nr, max_visible, bdev_, state_, layers_[layer], scores,
                                                  max_visible, stream_)
                         : kn::indexer_scores(q.data, weights.data, heads, r0, nr, max_visible, bdev_, state_, layers_[layer], scores,
                                              max_visible, stream_);
      if (!check(e, "indexer scores")) return;
      if (!check(kn::topk_rows(scores, max_visible, r0, nr, L.rate, bdev_, static_cast<int>(out.cols), out.data, stream_), "indexer top-k"))
        return;
    }
  }

  // The forward's index keys of layer `layer` as a bf16 table for kernels::indexer_scores_wgmma (prefill
  // rows; eager forwards: the table is sized from the host's positions). False where it does not apply
  // (or on a failure, which is kept).
  bool index_key_table(int layer, int heads, kn::KeyTableDev& t) {
    const kn::LayerDev& L = layers_[layer];
    if (!wgmma_ || mode_ != Mode::kEager || seq_steps_.size() > 65535 || !kn::indexer_scores_wgmma_supported(heads, L)) return false;
    const auto [rows, longest] = key_table_extent(L, kn::KeyTableKind::kIndexer);
    auto* table = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(std::max<int64_t>(rows, 1) * L.index_dim) * 2));
    auto* first = static_cast<int32_t*>(temp(seq_steps_.size() * 4));
    if (!table || !first) return false;
    t = kn::KeyTableDev{nullptr, table, first};
    return check(kn::key_table_build(bdev_, state_, L, kn::KeyTableKind::kIndexer, longest, table, first, stream_), "index key table");
  }

  void attention(int layer, Tensor q, Tensor kv, const DeviceWeight& sinks, const IntTensor* selected, Tensor out,
                 const Rope* unrope = nullptr) override {
    Op op(*this, "attention");
    if (!op || !layer_ok(layer) || !(q = query_f32(q)).data) return;
    const LayerStateLayout& L = layout_.layers[layer];
    const int hd = L.head_dim;
    if (!expect(hd > 0 && hd <= 512 && q.cols % hd == 0 && kv.cols == hd && q.rows == bdev_.rows && kv.rows == q.rows &&
                    out.rows == q.rows && out.cols == q.cols && sinks.rows * sinks.cols == q.cols / hd &&
                    (!selected || selected->rows == q.rows),
                "attention: layer {} (head_dim {}) with q [{}, {}], kv [{}, {}]", layer, hd, q.rows, q.cols, kv.rows, kv.cols))
      return;
    const float* sk = fvec(sinks, "attention sinks");
    if (!sk) return;
    kn::RopeDev un;
    if (unrope) {
      if (!expect(unrope->rope_dim <= hd && unrope->rope_dim % 2 == 0, "attention: rope_dim {} for head_dim {}", unrope->rope_dim, hd))
        return;
      if (!(un = rope_dev(*unrope)).inv_freq) return;
    }
    const bool sel = selected && L.rate > 0;
    const int heads = static_cast<int>(q.cols / hd);
    if (!fp32_ && kn::attention_mqa_supported(state_, layers_[layer])) {
      // One block per (row, 64 heads) is heavy (a multiprocessor's worth of shared memory): small
      // batches share each row's keys among up to 16 blocks, ~2 blocks per SM. From the batch shape
      // alone, so that a graph replay sums in the same order as the eager step. (32 shares measured
      // no better at batch 1: the merge grows by what the shares save.)
      // Decode rows (<= 4): blocks of 16 heads, each staging and writing a quarter of a 64-head block's
      // queries and partial output.
      const int head_tile = q.rows <= kDecodeRows ? 16 : 64;
      const int splits = mqa_splits(q.rows, heads, head_tile);
      float* part = nullptr;
      if (splits > 1) {
        part = static_cast<float*>(temp(static_cast<size_t>(q.rows * heads * splits * (hd + 2)) * 4));
        if (!part) return;
      }
      check(kn::attention_mqa(q.data, kv.data, sk, sel ? selected->data : nullptr, sel ? selected->cols : 0, heads, bdev_, state_,
                              layers_[layer], out.data, stream_, splits, part, un, head_tile),
            "attention (tensor cores)");
      return;
    }
    // Small batches: share each (row, head)'s keys among up to 16 blocks so that ~1024 blocks run.
    const int64_t rh = q.rows * heads;
    const int splits = rh < kAttnBlocks ? static_cast<int>(std::min<int64_t>(16, kAttnBlocks / rh)) : 1;
    float* part = nullptr;
    if (splits > 1) {
      part = static_cast<float*>(temp(static_cast<size_t>(rh * splits * (hd + 2)) * 4));
      if (!part) return;
    }
    check(kn::attention(q.data, kv.data, sk, sel ? selected->data : nullptr, sel ? selected->cols : 0, heads, bdev_, state_,
                        layers_[layer], out.data, stream_, splits, part, un),
          "attention");
  }

  // Key shares of the tensor-core attention for rows x heads in blocks of head_tile heads.
  static int mqa_splits(int64_t rows, int heads, int head_tile) {
    const int64_t blocks = rows * ((heads + head_tile - 1) / head_tile);
    return static_cast<int>(std::clamp<int64_t>((2 * kSmCount) / std::max<int64_t>(blocks, 1), 1, 16));
  }

  // (a query kept in bf16 by attention_query reaching an fp32 kernel) q in fp32 in the temporaries;
  // the query is consumed. Null data: the error kept.
  Tensor query_f32(Tensor q) {
    if (!q.data || q.data != bf16_query_) return q;
    if (!apply_query_norm(q)) return Tensor{nullptr, q.rows, q.cols};
    bf16_query_ = nullptr;
    Tensor f{static_cast<float*>(temp(static_cast<size_t>(q.rows * q.cols) * 4)), q.rows, q.cols};
    if (f.data && !check(kn::bf16_to_f32(reinterpret_cast<const kn::bf16_t*>(q.data), f.data, q.rows * q.cols, stream_), "query to fp32"))
      f.data = nullptr;
    return f;
  }

  // The bf16 query's norm (no weight) + rope left to the wgmma attention, which applies it as it loads
  // the query (one pass over it fewer). False: not deferred (the caller normalises now).
  bool defer_query_norm(const DeviceWeight* weight, float eps, int head_dim, const kn::RopeDev& r) {
    if (weight || head_dim != kMqaHd || eps < 0.0f || r.rope_dim > 64) return false;
    query_norm_ = {eps, r};
    return true;
  }

  // A deferred query norm applied now (to a query some other kernel reads). False: the error kept.
  bool apply_query_norm(Tensor q) {
    if (query_norm_.eps < 0.0f) return true;
    const kn::QueryNorm qn = query_norm_;
    query_norm_ = {};
    return check(kn::rms_norm_pair(kn::NormTensor{q.data, nullptr, q.cols, q.data, true}, kn::NormTensor{}, qn.eps, q.rows, kMqaHd, stream_,
                                   &qn.rope, bdev_.positions),
                 "query rms_norm + rope");
  }

  static constexpr int kMqaHd = 512;  // the tensor-core attention kernels' head_dim

  // attention_projected's fused path (below) for a query of rows x cols, as far as the query decides it.
  bool fused_attention_fits(int layer, int64_t rows, int64_t cols) const {
    return !fp32_ && layer >= 0 &&
           layer < static_cast<int>(layout_.layers.size()) && layout_.layers[layer].head_dim == kMqaHd &&
           kn::attention_mqa_supported(state_, layers_[layer]) && rows > kDecodeRows && cols % kMqaHd == 0 &&
           mqa_splits(rows, static_cast<int>(cols / kMqaHd), 64) == 1;
  }

  // The rows of the wgmma attention's key table for layer's forward and the longest sequence's
  // share, or {-1, 0} where the wgmma kernel does not apply: the table would be large next to the
  // batch (long contexts with few new rows each), no sm_90a device, or a graph capture (the table's
  // size comes from the host's positions, which a replay would not update).
  std::pair<int64_t, int64_t> wgmma_table_rows(int layer, int64_t rows) const {
    if (!wgmma_ || mode_ != Mode::kEager || seq_steps_.size() > 65535) return {-1, 0};
    const auto extent = key_table_extent(layers_[layer], kn::KeyTableKind::kAttention);
    if (extent.first > 2 * rows + 8192) return {-1, 0};
    return extent;
  }

  // Rows of a key table of kind `kind` for this forward's sequences, and the longest sequence's share.
  std::pair<int64_t, int64_t> key_table_extent(const kn::LayerDev& L, kn::KeyTableKind kind) const {
    int64_t rows = 0, longest = 0;
    for (const auto& [n_past, n_tokens] : seq_steps_) {
      const int64_t n = kn::key_table_rows(n_past, n_tokens, L, kind);
      rows += n;
      longest = std::max(longest, n);
    }
    return {rows, longest};
  }

  // Prefill on the tensor cores without key shares: the attention writes its output in bf16 (what
  // wo_a's product converts it to), wo_a's product reads that and writes its own output in bf16
  // (what wo_b's product converts it to), so neither fp32 activation is written (1 GB and 256 MB
  // written, then read and converted, in an 8192-row layer). Else the three ops.
  void attention_projected(int layer, Tensor q, Tensor kv, const DeviceWeight& sinks, const IntTensor* selected, const Rope* unrope,
                           const DeviceWeight& wo_a, int groups, const DeviceWeight& wo_b, Tensor out) override {
    const CudaWeight& wa = cw(wo_a);
    const CudaWeight& wb = cw(wo_b);
    const int heads = static_cast<int>(q.cols / kMqaHd);
    const bool fused = fused_attention_fits(layer, q.rows, q.cols) && wa.b16 && wa.count == 1 && groups > 0 && q.cols % groups == 0 &&
                       wa.rows % groups == 0 && wa.cols == q.cols / groups && wb.b16 && wb.count == 1 && wb.cols == wa.rows &&
                       out.rows == q.rows && out.cols == wb.rows;
    if (!fused)  // (attention converts a bf16 query)
      return Backend::attention_projected(layer, q, kv, sinks, selected, unrope, wo_a, groups, wo_b, out);
    Op op(*this, "attention + wo_a + wo_b (bf16 between)");
    if (!op) return;
    const LayerStateLayout& L = layout_.layers[layer];
    if (!expect(kv.cols == kMqaHd && q.rows == bdev_.rows && kv.rows == q.rows && sinks.rows * sinks.cols == heads &&
                    (!selected || selected->rows == q.rows) && (!unrope || (unrope->rope_dim <= kMqaHd && unrope->rope_dim % 2 == 0)),
                "attention: layer {} with q [{}, {}], kv [{}, {}]", layer, q.rows, q.cols, kv.rows, kv.cols))
      return;
    const float* sk = fvec(sinks, "attention sinks");
    kn::RopeDev un;
    if (!sk || (unrope && !(un = rope_dev(*unrope)).inv_freq)) return;
    auto* ob = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(q.rows * q.cols) * 2));
    auto* gb = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(q.rows * wa.rows) * 2));
    if (!ob || !gb) return;
    const bool sel = selected && L.rate > 0;
    if (!wgmma_attention(layer, q, kv, sk, sel ? selected : nullptr, heads, un, ob)) {
      if (!(q = query_f32(q)).data ||
          !check(kn::attention_mqa(q.data, kv.data, sk, sel ? selected->data : nullptr, sel ? selected->cols : 0, heads, bdev_, state_,
                                   layers_[layer], nullptr, stream_, 1, nullptr, un, 64, ob),
                 "attention (tensor cores, bf16 output)"))
        return;
    }
    const int64_t k = q.cols / groups, n = wa.rows / groups;
    (void)(gemm_bf16(ob, q.rows, k, q.cols, wa, 0, n, k, n * k, groups, reinterpret_cast<float*>(gb), wa.rows, true) &&
           gemm_bf16(gb, q.rows, wa.rows, wa.rows, wb, 0, wb.rows, wb.cols, 0, 1, out.data, out.cols));
  }

  // The prefill attention on Hopper's warpgroup MMA (kernels::attention_wgmma) into ob, from a bf16
  // key table of the forward's sequences: their rings and compressed entries, converted once
  // (each key is then read by every row that attends to it, in half the bytes). The query is read
  // in bf16 where attention_query kept it so (and consumed). False (nothing launched) where
  // wgmma_table_rows says it does not apply; true with the error kept where a launch failed.
  bool wgmma_attention(int layer, Tensor q, Tensor kv, const float* sinks, const IntTensor* selected, int heads, kn::RopeDev un,
                       kn::bf16_t* ob) {
    const auto [table, longest] = wgmma_table_rows(layer, q.rows);
    if (table < 0) return false;
    const bool query_bf16 = q.data == bf16_query_;
    const kn::QueryNorm qn = query_bf16 ? query_norm_ : kn::QueryNorm{};
    bf16_query_ = nullptr;
    query_norm_ = {};
    const kn::LayerDev& L = layers_[layer];
    auto* kvb = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(kv.rows * kv.cols) * 2));
    auto* rows = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(std::max<int64_t>(table, 1) * kv.cols) * 2));
    auto* first = static_cast<int32_t*>(temp(seq_steps_.size() * 4));
    if (!kvb || !rows || !first) return true;
    const kn::KeyTableDev t{kvb, rows, first};
    (void)(check(kn::f32_to_bf16(kv.data, kvb, kv.rows * kv.cols, stream_), "attention keys to bf16") &&
           check(kn::key_table_build(bdev_, state_, L, kn::KeyTableKind::kAttention, longest, rows, first, stream_), "attention key table") &&
           check(kn::attention_wgmma(query_bf16 ? nullptr : q.data, query_bf16 ? reinterpret_cast<const kn::bf16_t*>(q.data) : nullptr, t,
                                     sinks, selected ? selected->data : nullptr, selected ? selected->cols : 0, heads, bdev_, state_, L,
                                     ob, un, qn, stream_),
                 "attention (wgmma)"));
    return true;
  }

  void window_update(int layer, Tensor kv) override {
    Op op(*this, "window_update");
    if (!op || !layer_ok(layer)) return;
    const LayerStateLayout& L = layout_.layers[layer];
    if (!expect(kv.cols == L.head_dim && kv.rows == bdev_.rows, "window_update: layer {} with kv [{}, {}]", layer, kv.rows, kv.cols))
      return;
    check(kn::window_write(kv.data, bdev_, state_, layers_[layer], stream_), "window_update");
  }

  void route(Tensor x, const Router& r, IntTensor experts, Tensor weights) override {
    Op op(*this, "route");
    if (!op) return;
    const int64_t n_exp = r.gate->rows;
    if (!expect(r.gate->cols == x.cols && n_exp > 0 && n_exp <= 1024 && experts.cols == r.top_k && weights.cols == r.top_k &&
                    experts.rows == x.rows && weights.rows == x.rows && (r.tid2eid || r.top_k <= n_exp) &&
                    (!r.tid2eid || (cw(*r.tid2eid).i32 && r.tid2eid->cols == r.top_k)) && (!r.tid2eid || x.rows == bdev_.rows),
                "route: x [{}, {}], gate [{}, {}], top {}", x.rows, x.cols, n_exp, r.gate->cols, r.top_k))
      return;
    const float* bias = r.bias ? fvec(*r.bias, "router bias") : nullptr;
    float* logits = static_cast<float*>(temp(static_cast<size_t>(x.rows * n_exp) * 4));
    if ((r.bias && !bias) || !logits) return;
    const kn::ScoreFunc sf = r.score == RouterScore::kSigmoid ? kn::ScoreFunc::kSigmoid
                             : r.score == RouterScore::kSoftmax ? kn::ScoreFunc::kSoftmax
                                                                : kn::ScoreFunc::kSqrtSoftplus;
    const float* gate = cw(*r.gate).f32;
    if (x.rows <= kDecodeRows && gate && kn::gate_route_supported(x.data, x.rows, x.cols, gate)) {  // decode: one launch
      check(kn::gate_route(x.data, x.rows, x.cols, gate, static_cast<int>(n_exp), bias, r.tid2eid ? cw(*r.tid2eid).i32 : nullptr,
                           r.tid2eid ? r.tid2eid->rows : 0, bdev_.tokens, sf, r.top_k, r.scaling, logits, counters_ + kRouteCounter,
                           experts.data, weights.data, stream_),
            "gate + route");
      return;
    }
    if (!gemm(x.data, x.rows, x.cols, x.cols, cw(*r.gate), 0, n_exp, x.cols, 0, 1, logits, n_exp, true)) return;
    check(kn::route(logits, x.rows, static_cast<int>(n_exp), bias, r.tid2eid ? cw(*r.tid2eid).i32 : nullptr,
                    r.tid2eid ? r.tid2eid->rows : 0, bdev_.tokens, sf, r.top_k, r.scaling, experts.data, weights.data, stream_),
          "route");
  }

  void moe_experts(Tensor x, IntTensor experts, Tensor weights, const Experts& e, Tensor out) override {
    Op op(*this, "moe_experts");
    if (op) routed_experts(x, nullptr, experts, weights, e, out);
  }

  // moe_experts' work: out += Σ_k weights[k] * expert_k(x). xb: x in bf16 where the caller has it
  // (else the wgmma path converts it). Before anything writes out, join_side(): the shared expert may
  // be writing it on the side stream.
  void routed_experts(Tensor x, const kn::bf16_t* xb, IntTensor experts, Tensor weights, const Experts& e, Tensor out) {
    const auto& w1 = cw(*e.w1);
    const auto& w3 = cw(*e.w3);
    const auto& w2 = cw(*e.w2);
    const int64_t n_exp = w1.count, inter = w1.rows, d = x.cols;
    const int k = static_cast<int>(experts.cols);
    const bool f32 = w1.f32 && w3.f32 && w2.f32;
    if (!expect((f32 || (w1.b16 && w3.b16 && w2.b16)) && w1.cols == d && w3.count == n_exp && w3.rows == inter && w3.cols == d &&
                    w2.count == n_exp && w2.rows == d && w2.cols == inter && experts.rows == x.rows && weights.rows == x.rows &&
                    weights.cols == k && out.rows == x.rows && out.cols == d && k > 0,
                "moe_experts: x [{}, {}], {} experts of [{}, {}], top {}", x.rows, x.cols, n_exp, inter, w1.cols, k))
      return;
    if (x.rows == 0) return;
    if (!f32) {
      kn::GemvExperts g;
      g.experts = experts.data;
      g.weights = weights.data;
      g.top_k = k;
      g.n_exp = static_cast<int>(n_exp);
      g.w1 = w1.b16, g.w3 = w3.b16, g.w2 = w2.b16;
      if (gemv_experts(x, g, inter, e.limit, true, out)) return;  // decode: no permutation
    }
    const int64_t chunk = std::min<int64_t>(x.rows, kMoeChunkRows);
    const int64_t entries_max = chunk * k;
    // Experts averaging 32+ rows (prefill): 128-row tiles read each expert's weights 4x less often.
    const int tile_rows = !f32 && d % 8 == 0 && inter % 8 == 0 && entries_max >= 32 * n_exp ? kn::kMoeBigTileRows
                                                                                                     : kn::kMoeTileRows;
    auto tiles_for = [&](int64_t entries) { return static_cast<int>((entries + tile_rows - 1) / tile_rows + std::min<int64_t>(n_exp, entries)); };
    const int max_tiles = tiles_for(entries_max);
    kn::MoePlan plan;
    plan.tile_rows = tile_rows;
    plan.counts = static_cast<int32_t*>(temp(static_cast<size_t>(n_exp) * 4));
    plan.local = static_cast<int32_t*>(temp(static_cast<size_t>(entries_max) * 4));
    plan.offsets = static_cast<int32_t*>(temp(static_cast<size_t>(n_exp + 1) * 4));
    plan.pos = static_cast<int32_t*>(temp(static_cast<size_t>(entries_max) * 4));
    plan.tiles = static_cast<int4*>(temp(static_cast<size_t>(max_tiles) * sizeof(int4)));
    plan.n_tiles = static_cast<int32_t*>(temp(4));
    plan.max_tiles = max_tiles;
    plan.top_k = k;
    // Prefill tiles on wgmma (an sm_90a device) while the experts average at most kWgmmaMoeMaxRows rows
    // (reading the weights is the cost there: measured ~82% of the HBM peak), else (eager forwards)
    // cuBLAS over per-expert slabs (see blas_experts: faster once the products are bound by the tensor
    // cores), else (a graph capture, or routing too skewed for slabs) the mma.sync tile kernels.
    const bool wgmma_fits = !f32 && tile_rows == kn::kMoeBigTileRows && d % 128 == 0 && inter % 128 == 0 && wgmma_;
    const bool blas_fits = tile_rows == kn::kMoeBigTileRows && mode_ == Mode::kEager;
    const size_t act = f32 ? 4 : 2;  // bytes of a permuted activation
    // (the wgmma products read x's rows through plan.sources: no permuted copy)
    if (wgmma_fits && !(plan.sources = static_cast<int32_t*>(temp(static_cast<size_t>(entries_max) * 4)))) return;
    if (!plan.counts || !plan.local || !plan.offsets || !plan.pos || !plan.tiles || !plan.n_tiles) return;
    void *xperm = nullptr, *h = nullptr;  // the tile kernels' buffers, taken when first needed
    float* y = nullptr;  // (or bf16 values: y_bf16)
    bool y_bf16 = false;
    auto tile_buffers = [&](bool permuted_copy) {
      if (!h) {
        h = temp(static_cast<size_t>(entries_max * inter) * act);
        y = static_cast<float*>(temp(static_cast<size_t>(entries_max * d) * 4));
      }
      if (permuted_copy && !xperm) xperm = temp(static_cast<size_t>(entries_max * d) * act);
      return h && y && (xperm || !permuted_copy);
    };
    for (int64_t r0 = 0; r0 < x.rows; r0 += chunk) {
      const int64_t nr = std::min(chunk, x.rows - r0), entries = nr * k;
      const int32_t* ex = experts.data + r0 * k;
      if (!check(kn::moe_plan(ex, entries, static_cast<int>(n_exp), plan, stream_), "moe plan")) return;
      const int tiles = tiles_for(entries);
      const bool wgmma = wgmma_fits && entries <= kWgmmaMoeMaxRows * n_exp;
      const bool blas = blas_fits && !wgmma;
      if (f32) {
        if (!tile_buffers(true)) return;
        auto* xp = static_cast<float*>(xperm);
        auto* hp = static_cast<float*>(h);
        if (!check(kn::moe_gather_f32(x.data + r0 * d, d, entries, k, plan.pos, xp, stream_), "moe gather")) return;
        if (!check(kn::moe_gate_up_f32(xp, w1.f32, w3.f32, d, inter, e.limit, plan.tiles, plan.n_tiles, tiles, hp, stream_),
                   "moe gate/up"))
          return;
        if (!check(kn::moe_down_f32(hp, w2.f32, inter, d, plan.tiles, plan.n_tiles, tiles, y, stream_), "moe down")) return;
      } else {
        if (blas) {
          bool done = false;
          join_side();
          if (!blas_experts(Tensor{x.data + r0 * d, nr, d}, ex, plan, n_exp, entries, k, d, inter, e.limit, w1, w3, w2, out.data + r0 * d,
                            weights.data + r0 * k, done))
            return;
          if (done) continue;  // else routing too skewed for slabs: the tile kernels below
        }
        if (!tile_buffers(!wgmma)) return;
        auto* hp = static_cast<kn::bf16_t*>(h);
        if (wgmma) {
          const kn::bf16_t* xs = xb ? xb + r0 * d : activations_bf16(x.data + r0 * d, nr * d);
          if (!xs || !check(kn::moe_gate_up_wgmma(xs, plan.sources, w1.b16, w3.b16, d, inter, e.limit, plan.tiles, plan.n_tiles, tiles, hp,
                                                  stream_),
                            "moe gate/up"))
            return;
        } else {
          auto* xp = static_cast<kn::bf16_t*>(xperm);
          if (!check(kn::moe_gather(x.data + r0 * d, d, entries, k, plan.pos, xp, stream_), "moe gather") ||
              !check(kn::moe_gate_up(xp, w1.b16, w3.b16, d, inter, e.limit, plan.tiles, plan.n_tiles, tiles, tile_rows, hp, stream_),
                     "moe gate/up"))
            return;
        }
        // The wgmma down product writes y in bf16 (half the bytes written and read back by the combine;
        // the 1.5e-2 tolerance of bf16 products holds).
        y_bf16 = wgmma;
        if (!check(wgmma ? kn::moe_down_wgmma(hp, w2.b16, inter, d, plan.tiles, plan.n_tiles, tiles, y_bf16 ? nullptr : y,
                                              y_bf16 ? reinterpret_cast<kn::bf16_t*>(y) : nullptr, stream_)
                         : kn::moe_down(hp, w2.b16, inter, d, plan.tiles, plan.n_tiles, tiles, tile_rows, y, stream_),
                   "moe down"))
          return;
      }
      join_side();
      const float* wr = weights.data + r0 * k;
      if (!check(y_bf16 ? kn::moe_combine(reinterpret_cast<const kn::bf16_t*>(y), plan.pos, wr, nr, k, d, out.data + r0 * d, stream_)
                        : kn::moe_combine(y, plan.pos, wr, nr, k, d, out.data + r0 * d, stream_),
                 "moe combine"))
        return;
    }
  }

  // Decode: routed and shared experts as one pair of GEMV launches (and no add). Else the three ops.
  void moe_ffn(Tensor x, IntTensor experts, Tensor weights, const Experts& routed, const Experts& shared, Tensor out) override {
    const auto &w1 = cw(*routed.w1), &w3 = cw(*routed.w3), &w2 = cw(*routed.w2);
    const auto &s1 = cw(*shared.w1), &s3 = cw(*shared.w3), &s2 = cw(*shared.w2);
    const int64_t d = x.cols, inter = w1.rows;
    const int k = static_cast<int>(experts.cols);
    if (x.rows <= kDecodeRows && w1.b16 && w3.b16 && w2.b16 && s1.b16 && s3.b16 && s2.b16 && routed.limit == shared.limit &&
        s1.rows == inter && s3.rows == inter && s2.cols == inter && s1.cols == d && s2.rows == d && w1.cols == d && w3.count == w1.count &&
        w3.rows == inter && w2.count == w1.count && w2.rows == d && w2.cols == inter && experts.rows == x.rows && weights.rows == x.rows &&
        weights.cols == k && out.rows == x.rows && out.cols == d && k > 0) {
      kn::GemvExperts g;
      g.experts = experts.data;
      g.weights = weights.data;
      g.top_k = k;
      g.n_exp = static_cast<int>(w1.count);
      g.w1 = w1.b16, g.w3 = w3.b16, g.w2 = w2.b16;
      g.sw1 = s1.b16, g.sw3 = s3.b16, g.sw2 = s2.b16;
      Op op(*this, "moe_ffn (GEMV)");
      if (!op || gemv_experts(x, g, inter, routed.limit, false, out)) return;
    }
    if (x.rows > kDecodeRows && s1.b16 && s3.b16 && s2.b16 && s1.rows == s3.rows && s1.cols == d && s3.cols == d &&
        s2.cols == s1.rows && s2.rows == out.cols && out.rows == x.rows) {
      // Prefill: one bf16 copy of x for the shared and the routed experts; the routed sums added to
      // the shared expert's output (no zeroed sum, no add). Eager forwards run the shared expert on the
      // side stream while the routed products (bound by reading the experts) run here.
      Op op(*this, "moe_ffn (routed + shared)");
      if (!op) return;
      const kn::bf16_t* xb = activations_bf16(x.data, x.rows * d);
      if (!xb) return;
      const bool beside = mode_ == Mode::kEager;
      if (beside) {  // (every launch and product below goes to stream_ and blas_: swapped for the shared expert)
        if (!check(cudaEventRecord(fork_event_, stream_.id), "fork") || !check(cudaStreamWaitEvent(side_stream_.id, fork_event_), "fork")) return;
        std::swap(stream_, side_stream_);
        std::swap(blas_, side_blas_);
      }
      const bool shared_ok = shared_expert(xb, x.rows, d, s1, s3, s2, shared.limit, out);
      if (beside) {
        std::swap(stream_, side_stream_);
        std::swap(blas_, side_blas_);
        join_pending_ = check(cudaEventRecord(join_event_, side_stream_.id), "join");
      }
      if (shared_ok) routed_experts(x, xb, experts, weights, routed, out);
      join_side();
      return;
    }
    Backend::moe_ffn(x, experts, weights, routed, shared, out);
  }

  // The clamped SwiGLU MLP (one expert) of xb's rows (bf16, prefill) into out: both products from xb,
  // the SwiGLU written in bf16 for the last.
  bool shared_expert(const kn::bf16_t* xb, int64_t rows, int64_t d, const CudaWeight& w1, const CudaWeight& w3, const CudaWeight& w2,
                     float limit, Tensor out) {
    const int64_t inter = w1.rows;
    auto* g = static_cast<float*>(temp(static_cast<size_t>(rows * inter) * 4));
    auto* u = static_cast<float*>(temp(static_cast<size_t>(rows * inter) * 4));
    auto* hb = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(rows * inter) * 2));
    return g && u && hb && gemm_bf16(xb, rows, d, d, w1, 0, inter, d, 0, 1, g, inter) && gemm_bf16(xb, rows, d, d, w3, 0, inter, d, 0, 1, u, inter) &&
           check(kn::swiglu_bf16(g, u, rows * inter, limit, hb, stream_), "swiglu") &&
           gemm_bf16(hb, rows, inter, inter, w2, 0, out.cols, inter, 0, 1, out.data, out.cols);
  }

  // The main stream waits for the shared expert's side-stream work (moe_ffn), if any is pending.
  void join_side() {
    if (join_pending_) check(cudaStreamWaitEvent(stream_.id, join_event_), "join");
    join_pending_ = false;
  }

  void swiglu(Tensor x, const DeviceWeight& w1, const DeviceWeight& w3, const DeviceWeight& w2, float limit, Tensor out) override {
    Op op(*this, "shared expert (swiglu)", w1.rows, w1.cols);
    if (!op) return;
    const int64_t inter = w1.rows;
    if (!expect(w3.rows == inter && w1.cols == x.cols && w3.cols == x.cols && w2.cols == inter && w2.rows == out.cols && out.rows == x.rows,
                "swiglu: x [{}, {}], w1 [{}, {}], w2 [{}, {}]", x.rows, x.cols, w1.rows, w1.cols, w2.rows, w2.cols))
      return;
    if (cw(w1).b16 && cw(w3).b16 && cw(w2).b16) {
      kn::GemvExperts g;
      g.top_k = 1;
      g.n_exp = 1;
      g.w1 = cw(w1).b16, g.w3 = cw(w3).b16, g.w2 = cw(w2).b16;
      if (gemv_experts(x, g, inter, limit, false, out)) return;  // decode
      if (x.rows > kDecodeRows) {
        const kn::bf16_t* xb = activations_bf16(x.data, x.rows * x.cols);
        if (xb) shared_expert(xb, x.rows, x.cols, cw(w1), cw(w3), cw(w2), limit, out);
        return;
      }
    }
    Tensor g{static_cast<float*>(temp(static_cast<size_t>(x.rows * inter) * 4)), x.rows, inter};
    Tensor u{static_cast<float*>(temp(static_cast<size_t>(x.rows * inter) * 4)), x.rows, inter};
    if (!g.data || !u.data) return;
    linear(x, w1, g);
    linear(x, w3, u);
    if (failed_ || !check(kn::swiglu(g.data, u.data, x.rows * inter, limit, stream_), "swiglu")) return;
    linear(g, w2, out);
  }

 private:
  CudaBackend(int device, bool fp32_weights) : device_(device), fp32_(fp32_weights) {}

  // Marks an op: the outermost one recycles the temporary arena (stream order makes that safe) and,
  // when profiling, is timed with a pair of events. While a captured graph stands in for this
  // forward (replay), ops do nothing.
  class Op {
   public:
    Op(CudaBackend& b, const char* name, int64_t n = 0, int64_t k = 0) : b_(b) {
      if (b_.op_depth_++ != 0 || b_.failed_ || b_.mode_ == Mode::kReplay) return;
      b_.temp_.reset(b_.stream_.id, b_.mode_ != Mode::kCapture);
      if (b_.profiling_) prof_ = b_.prof_begin(name, n, k);
    }
    ~Op() {
      --b_.op_depth_;
      if (prof_ >= 0) b_.prof_end(prof_);
    }
    explicit operator bool() const { return !b_.failed_ && b_.mode_ != Mode::kReplay; }

   private:
    CudaBackend& b_;
    int prof_ = -1;
  };

  Result<void> init(const CudaFeatures& features) {
    DI_TRYV(set_device());
    wgmma_ = features.wgmma && kn::wgmma_supported();
    if (const cudaError_t e = kn::prepare_device(wgmma_); e != cudaSuccess) return cuda_error(e, "preparing the kernels");
    cudaError_t e = cudaStreamCreateWithFlags(&stream_.id, cudaStreamNonBlocking);
    if (e != cudaSuccess) return cuda_error(e, "creating a stream");
    int low = 0, high = 0;  // the side stream's blocks go first where both have some waiting
    e = cudaDeviceGetStreamPriorityRange(&low, &high);
    if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&side_stream_.id, cudaStreamNonBlocking, high);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&fork_event_, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&join_event_, cudaEventDisableTiming);
    if (e != cudaSuccess) return cuda_error(e, "creating the side stream");
    for (auto& ev : meta_event_) {
      e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
      if (e != cudaSuccess) return cuda_error(e, "creating an event");
    }
    DI_TRYV(create_blas(stream_.id, blas_, blas_ws_));
    DI_TRYV(create_blas(side_stream_.id, side_blas_, side_blas_ws_));  // (its own workspace: both may run at once)
    DI_TRY(c, device_alloc<unsigned>(kCounters, "kernel counters"));
    counters_ = c;
    DI_TRY(pm, device_alloc<float>(kPostMixFloats, "hyper-connection mix partials"));
    post_mix_ = pm;
    e = cudaMemset(counters_, 0, kCounters * sizeof(unsigned));
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return cuda_error(e, "zeroing kernel counters");
    return ok();
  }

  // A cuBLAS handle on `stream` with a fixed workspace of its own (cuBLAS then never allocates during
  // forwards, and graphs can capture its products).
  Result<void> create_blas(cudaStream_t stream, cublasHandle_t& handle, void*& workspace) {
    cublasStatus_t s = cublasCreate(&handle);
    if (s != CUBLAS_STATUS_SUCCESS) return make_error(Code::kBackend, "cuBLAS: cannot create a handle: {}", blas_name(s));
    s = cublasSetStream(handle, stream);
    if (s == CUBLAS_STATUS_SUCCESS) {
      constexpr size_t kWs = size_t(32) << 20;
      DI_TRY(ws, device_alloc<char>(kWs, "cuBLAS workspace"));
      workspace = ws;
      s = cublasSetWorkspace(handle, workspace, kWs);
    }
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);  // no TF32 for fp32 products
    if (s != CUBLAS_STATUS_SUCCESS) return make_error(Code::kBackend, "cuBLAS: setting up a handle: {}", blas_name(s));
    return ok();
  }

  Result<void> set_device() {
    cudaError_t e = cudaSetDevice(device_);
    if (e != cudaSuccess) return cuda_error(e, "selecting the device");
    return ok();
  }

  Result<void> sync(const char* what) {
    cudaError_t e = cudaStreamSynchronize(stream_.id);
    if (e != cudaSuccess) return cuda_error(e, what);
    return ok();
  }

  // Device metadata (one buffer: forwards run in stream order) and two pinned host buffers, so
  // that the host can fill the next forward's while the device still copies from the last one.
  Result<void> reserve_meta(size_t ints) {
    if (ints <= meta_cap_) return ok();
    const size_t cap = std::max(ints * 2, size_t(1) << 18);
    DI_TRYV(sync("growing the metadata buffers"));  // the old ones may still be in use
    if (meta_dev_) cudaFree(meta_dev_);
    meta_dev_ = nullptr;
    meta_cap_ = 0;
    ++meta_generation_;
    for (int i = 0; i < 2; ++i) {
      if (meta_host_[i]) cudaFreeHost(meta_host_[i]);
      meta_host_[i] = nullptr;
    }
    DI_TRY(d, device_alloc<int32_t>(cap, "batch metadata"));
    meta_dev_ = d;
    for (int i = 0; i < 2; ++i) {
      void* h = nullptr;
      cudaError_t e = cudaMallocHost(&h, cap * 4);
      if (e != cudaSuccess) return cuda_error(e, "allocating pinned host memory for batch metadata");
      meta_host_[i] = static_cast<int32_t*>(h);
    }
    meta_cap_ = cap;
    return ok();
  }

  // Ends this forward's graph capture (instantiating and launching the graph) or launches the
  // graph that stands in for it. Every entry point that is not an op calls this first.
  Result<void> flush_pending() {
    const Mode m = mode_;
    if (m == Mode::kEager) return ok();
    mode_ = Mode::kEager;
    GraphEntry* g = current_;
    current_ = nullptr;
    if (m == Mode::kCapture) {
      cudaGraph_t graph = nullptr;
      cudaError_t e = cudaStreamEndCapture(stream_.id, &graph);
      if (e == cudaSuccess && graph && !failed_) e = cudaGraphInstantiate(&g->exec, graph, 0);
      if (graph) cudaGraphDestroy(graph);
      if (e != cudaSuccess || failed_ || !g->exec) {
        cudaGetLastError();
        g->broken = true;
        if (g->exec) cudaGraphExecDestroy(g->exec);
        g->exec = nullptr;
        // The captured work never ran: this forward is lost; later ones run without graphs.
        graphs_on_ = false;
        fail(e != cudaSuccess ? cuda_error(e, "capturing a decode step as a CUDA graph")
                              : make_error(Code::kBackend, "capturing a decode step as a CUDA graph failed"));
        return error_;
      }
    }
    cudaError_t e = cudaGraphLaunch(g->exec, stream_.id);
    if (e != cudaSuccess) {
      fail(cuda_error(e, "launching a decode graph"));
      return error_;
    }
    return ok();
  }

  // Batch sizes and context buckets come and go over a long run: the graph used longest ago goes
  // (never the current one, which was just used).
  void evict_oldest_graph() {
    auto oldest = graphs_.begin();
    for (auto it = graphs_.begin(); it != graphs_.end(); ++it)
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    if (oldest->second.exec) cudaGraphExecDestroy(oldest->second.exec);
    graphs_.erase(oldest);
  }

  void clear_graphs() {
    for (auto& [k, g] : graphs_)
      if (g.exec) cudaGraphExecDestroy(g.exec);
    graphs_.clear();
    current_ = nullptr;
  }

  uint64_t generation() const {
    return scratch_.generation() + temp_.generation() + meta_generation_ + state_generation_;
  }

  void* take_scratch(int64_t n, bool zero) {
    if (failed_ || n <= 0) return nullptr;
    void* p = scratch_.take(static_cast<size_t>(n) * 4);
    if (!p) {
      fail(make_error(Code::kOutOfMemory, "CUDA: no device memory for a scratch tensor of {} elements", n));
      return nullptr;
    }
    if (zero && mode_ != Mode::kReplay) {  // (the graph zero-fills it)
      const int pr = profiling_ && op_depth_ == 0 ? prof_begin("scratch zero-fill", 0, 0) : -1;
      check(cudaMemsetAsync(p, 0, static_cast<size_t>(n) * 4, stream_.id), "zeroing scratch");
      if (pr >= 0) prof_end(pr);
    }
    return p;
  }

  cudaEvent_t next_event() {
    if (events_used_ == events_.size()) {
      cudaEvent_t e = nullptr;
      if (cudaEventCreate(&e) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
      }
      events_.push_back(e);
    }
    return events_[events_used_++];
  }

  int prof_begin(const char* name, int64_t n, int64_t k) {
    if (!next_event()) return -1;
    const size_t start = events_used_ - 1;
    if (cudaEventRecord(events_[start], stream_.id) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    prof_.push_back(ProfRecord{name, n, k, start, start});
    return static_cast<int>(prof_.size()) - 1;
  }

  void prof_end(int i) {
    if (!next_event()) {
      prof_.erase(prof_.begin() + i);
      return;
    }
    prof_[i].end = events_used_ - 1;
    if (cudaEventRecord(events_[prof_[i].end], stream_.id) != cudaSuccess) cudaGetLastError();
  }

  template <class T>
  Result<void> copy_out(const T* dev, T* host, int64_t n) {
    DI_TRYV(flush_pending());
    if (failed_) return error_;
    if (n > 0) {
      cudaError_t e = cudaMemcpyAsync(host, dev, static_cast<size_t>(n) * sizeof(T), cudaMemcpyDeviceToHost, stream_.id);
      if (e != cudaSuccess) return cuda_error(e, "reading a tensor");
    }
    DI_TRYV(sync("reading a tensor"));
    return ok();
  }

  template <class T>
  Result<void> copy_in(T* dev, const T* host, int64_t n) {
    DI_TRYV(flush_pending());
    if (failed_) return error_;
    if (n > 0) {
      cudaError_t e = cudaMemcpyAsync(dev, host, static_cast<size_t>(n) * sizeof(T), cudaMemcpyHostToDevice, stream_.id);
      if (e != cudaSuccess) return cuda_error(e, "writing a tensor");
    }
    DI_TRYV(sync("writing a tensor"));
    return ok();
  }

  void fail(Error e) {
    if (failed_) return;
    failed_ = true;
    error_ = std::move(e);
  }

  bool check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    fail(cuda_error(e, what));
    return false;
  }

  bool check_blas(cublasStatus_t s, const char* what) {
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    fail(make_error(Code::kBackend, "cuBLAS: {}: {}", what, blas_name(s)));
    return false;
  }

  template <class... Args>
  bool expect(bool cond, fmt::format_string<Args...> f, Args&&... args) {
    if (cond) return true;
    fail(make_error(Code::kInternal, f, std::forward<Args>(args)...));
    return false;
  }

  bool layer_ok(int layer) {
    return expect(layer >= 0 && layer < static_cast<int>(layers_.size()), "layer {} outside the state layout's {}", layer, layers_.size());
  }

  void* temp(size_t bytes) {
    void* p = temp_.take(bytes);
    if (!p) fail(make_error(Code::kOutOfMemory, "CUDA: no device memory for {} bytes of temporaries", bytes));
    return p;
  }

  const float* fvec(const DeviceWeight& w, const char* what) {
    const float* p = cw(w).f32;
    if (!p) fail(make_error(Code::kInternal, "{} has no fp32 copy on the device", what));
    return p;
  }
  const float* fmat(const DeviceWeight& w, const char* what) { return fvec(w, what); }

  kn::RopeDev rope_dev(const Rope& rope) {
    kn::RopeDev r;
    r.inv_freq = rope.inv_freq ? fvec(*rope.inv_freq, "rope inv_freq") : nullptr;
    if (!rope.inv_freq) fail(make_error(Code::kInternal, "rope without inv_freq"));
    r.rope_dim = rope.rope_dim;
    r.attention_factor = rope.attention_factor;
    return r;
  }

  // Prefill's expert products through cuBLAS: the host reads the per-expert row counts (one wait
  // per MoE layer; eager forwards only) and gives every expert a slab of rows. Experts sorted by
  // count form groups of kMoeGroupExperts (64), each with slabs of its largest count rounded up to 32
  // rows (its cap): each weight (gate, up, down) is one batched product per group, over pointer
  // arrays. (One cap for all experts wasted 25-50% of the products on rows no token fills. Fixed
  // group sizes and rounded caps keep the product shapes few: cuBLAS spends ~0.5 ms of host time on
  // each shape it has not seen.) `done` false: the routing is too skewed for slabs (the caller runs
  // the tile kernels).
  bool blas_experts(Tensor x, const int32_t* experts, const kn::MoePlan& plan, int64_t n_exp, int64_t entries, int k, int64_t d, int64_t inter, float limit,
                    const CudaWeight& w1, const CudaWeight& w3, const CudaWeight& w2, float* out_rows, const float* weights, bool& done) {
    std::vector<int32_t> counts(static_cast<size_t>(n_exp));
    if (!check(cudaMemcpyAsync(counts.data(), plan.counts, counts.size() * 4, cudaMemcpyDeviceToHost, stream_.id), "moe counts to host") ||
        !check(cudaStreamSynchronize(stream_.id), "moe counts to host"))
      return false;
    struct Group {
      size_t begin, end;  // in `order`
      int64_t cap, slab;  // rows per expert; the group's first slab row
    };
    std::vector<int32_t> order;
    for (int32_t e = 0; e < n_exp; ++e)
      if (counts[e] > 0) order.push_back(e);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return counts[a] > counts[b]; });
    std::vector<Group> groups;
    int64_t slab = 0;
    for (size_t i = 0; i < order.size(); i += kMoeGroupExperts) {
      const int64_t cap = (counts[order[i]] + 31) / 32 * 32;  // the group's largest count, rounded up
      const size_t end = std::min(order.size(), i + kMoeGroupExperts);
      groups.push_back({i, end, cap, slab});
      slab += cap * static_cast<int64_t>(end - i);
    }
    done = slab <= 2 * entries + 32 * n_exp;  // slabs at most ~2x the rows (skewed routing: no)
    if (slab == 0 || !done) return true;
    struct Release {  // the slabs are this chunk's: the next chunk reuses them (stream order)
      DeviceArena& a;
      std::pair<size_t, size_t> m;
      ~Release() { a.release(m); }
    } release{temp_, temp_.mark()};
    // Host-built tables, one upload: each expert's first slab row, then per product the weight,
    // input and output pointer of every expert in `order`.
    const size_t n_act = order.size(), base_bytes = (static_cast<size_t>(n_exp) * 4 + 15) / 16 * 16;
    const size_t table_bytes = base_bytes + 9 * n_act * sizeof(void*);
    if (moe_host_bytes_ < table_bytes) {
      if (moe_host_) cudaFreeHost(moe_host_);
      moe_host_ = nullptr;
      moe_host_bytes_ = 0;
      if (!check(cudaMallocHost(&moe_host_, table_bytes), "pinned memory for the expert tables")) return false;
      moe_host_bytes_ = table_bytes;
    }
    auto* pos = static_cast<int32_t*>(temp(static_cast<size_t>(entries) * 4));
    auto* xp = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(slab * d) * 2));
    auto* g = static_cast<float*>(temp(static_cast<size_t>(slab * inter) * 4));
    auto* u = static_cast<float*>(temp(static_cast<size_t>(slab * inter) * 4));
    auto* h = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(slab * inter) * 2));
    auto* y = static_cast<float*>(temp(static_cast<size_t>(slab * d) * 4));
    auto* tables = static_cast<unsigned char*>(temp(table_bytes));
    if (!pos || !xp || !g || !u || !h || !y || !tables) return false;
    auto* base = static_cast<int32_t*>(moe_host_);
    std::fill_n(base, n_exp, 0);
    const void** ptr = reinterpret_cast<const void**>(static_cast<unsigned char*>(moe_host_) + base_bytes);
    for (const Group& gr : groups)
      for (size_t i = gr.begin; i < gr.end; ++i) {
        const int64_t e = order[i], row = gr.slab + gr.cap * static_cast<int64_t>(i - gr.begin);
        base[e] = static_cast<int32_t>(row);
        const void* p[9] = {w1.b16 + e * inter * d, xp + row * d, g + row * inter,   // gate
                            w3.b16 + e * inter * d, xp + row * d, u + row * inter,   // up
                            w2.b16 + e * d * inter, h + row * inter, y + row * d};   // down
        for (int j = 0; j < 9; ++j) ptr[j * n_act + i] = p[j];
      }
    if (!check(cudaMemcpyAsync(tables, moe_host_, table_bytes, cudaMemcpyHostToDevice, stream_.id), "expert tables to the device")) return false;
    const auto* dptr = reinterpret_cast<const void* const*>(tables + base_bytes);
    if (!check(kn::moe_slab_positions(experts, plan.local, entries, reinterpret_cast<const int32_t*>(tables), pos, stream_),
               "moe slab positions") ||
        !check(kn::moe_gather(x.data, d, entries, k, pos, xp, stream_), "moe gather"))
      return false;
    const float one = 1.0f, zero = 0.0f;
    // out[e] (cap x n) = in[e] (cap x kk) @ w[e]^T for every expert e of every group; w[e] is [n, kk]
    auto product = [&](int which, int64_t kk, int64_t n, const char* what) {
      const void* const* w = dptr + (3 * which) * n_act;
      const void* const* in = dptr + (3 * which + 1) * n_act;
      void* const* o = const_cast<void* const*>(dptr + (3 * which + 2) * n_act);
      for (const Group& gr : groups)
        if (!check_blas(cublasGemmBatchedEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(gr.cap), static_cast<int>(kk),
                                            &one, w + gr.begin, CUDA_R_16BF, static_cast<int>(kk), in + gr.begin, CUDA_R_16BF,
                                            static_cast<int>(kk), &zero, o + gr.begin, CUDA_R_32F, static_cast<int>(n),
                                            static_cast<int>(gr.end - gr.begin), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                        what))
          return false;
      return true;
    };
    return product(0, d, inter, "moe gate (cuBLAS)") && product(1, d, inter, "moe up (cuBLAS)") &&
           check(kn::swiglu_bf16(g, u, slab * inter, limit, h, stream_), "moe swiglu") &&
           product(2, inter, d, "moe down (cuBLAS)") &&
           check(kn::moe_combine(y, pos, weights, entries / k, k, d, out_rows, stream_), "moe combine");
  }

  // The expert GEMV kernels for a decode batch (rows <= kDecodeRows): out (+)= the experts of g.
  // False (nothing launched) where they do not apply.
  bool gemv_experts(Tensor x, const kn::GemvExperts& g, int64_t inter, float limit, bool accumulate, Tensor out) {
    const int64_t d = x.cols, entries = x.rows * g.per_row();
    if (x.rows > kDecodeRows || kn::expert_down_counters(x.rows, d) > kRouteCounter || entries > 65535 || !kn::gemv_supported(x.data, d, g.w1, d) ||
        !kn::gemv_supported(x.data, d, g.w2, inter))
      return false;
    auto* h = static_cast<float*>(temp(static_cast<size_t>(entries * inter) * 4));
    auto* part = static_cast<float*>(temp(static_cast<size_t>(entries * d) * 4));
    if (!h || !part) return true;  // (failed: the error is kept)
    if (check(kn::expert_gate_up(x.data, d, x.rows, g, inter, limit, h, stream_), "expert gate/up (GEMV)"))
      check(kn::expert_down(h, inter, x.rows, g, d, accumulate, out.data, part, counters_, stream_), "expert down (GEMV)");
    return true;
  }

  // A hyper-connection mix of x (n outputs) in the partial layout of kernels::mix_partial: its
  // kernel where the weight has an fp32 copy and n is small, else (one split) cuBLAS and
  // kernels::row_sumsq. Returns the partials (null on failure) and their split count.
  std::pair<float*, int> mix_product(Tensor x, const CudaWeight& w, int n) {
    const PendingMix pending = std::exchange(pending_mix_, {});
    if (pending.streams == x.data && pending.fn == &w) return {post_mix_, pending.splits};  // hc_post computed it
    const bool kernel = w.f32 && n <= kn::kMixMaxOut;
    const int splits = kernel ? kn::mix_splits(x.cols) : 1;
    auto* part = static_cast<float*>(temp(static_cast<size_t>(x.rows) * splits * (n + 1) * 4));
    if (!part) return {nullptr, 0};
    const bool ok = kernel ? check(kn::mix_partial(x.data, x.rows, x.cols, w.f32, n, part, stream_), "hyper-connection mix")
                           : gemm(x.data, x.rows, x.cols, x.cols, w, 0, n, x.cols, 0, 1, part, n + 1, true) &&
                                 check(kn::row_sumsq(x.data, x.rows, x.cols, part + n, n + 1, stream_), "hyper-connection norm");
    return {ok ? part : nullptr, splits};
  }

  // C[i] (rows x n, ldc) = X[i] (rows x k, ldx) @ W[i]^T for `batch` groups: X[i] = x + i * k,
  // W[i] = w + w_off + i * w_stride, C[i] = c + i * n. bf16 weights (activations rounded to bf16)
  // unless prefer_f32 and the weight has an fp32 copy; fp32 accumulation either way.
  bool gemm(const float* x, int64_t rows, int64_t k, int64_t ldx, const CudaWeight& w, int64_t w_off, int64_t n, int64_t wk,
            int64_t w_stride, int batch, float* c, int64_t ldc, bool prefer_f32) {
    if (rows == 0 || n == 0) return true;
    const float one = 1.0f, zero = 0.0f;
    const bool use_f32 = w.f32 && (prefer_f32 || !w.b16);
    if (use_f32) {
      return check_blas(cublasSgemmStridedBatched(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows),
                                                  static_cast<int>(k), &one, w.f32 + w_off, static_cast<int>(wk), w_stride, x,
                                                  static_cast<int>(ldx), k, &zero, c, static_cast<int>(ldc), n, batch),
                        "fp32 GEMM");
    }
    if (!w.b16) return expect(false, "GEMM with a weight that has no matrix copy on the device");
    if (rows <= kDecodeRows && wk == k && (batch == 1 || w_stride == n * k) && kn::gemv_supported(x, ldx, w.b16 + w_off, k))
      return check(kn::gemv(x, rows, ldx, w.b16 + w_off, n * batch, k, n, c, ldc, stream_), "GEMV");
    const kn::bf16_t* xb = activations_bf16(x, rows * ldx);
    return xb && gemm_bf16(xb, rows, k, ldx, w, w_off, n, wk, w_stride, batch, c, ldc);
  }

  // The activations x (n floats) as bf16 in the temporary arena, or null (the error kept).
  const kn::bf16_t* activations_bf16(const float* x, int64_t n) {
    auto* xb = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(n) * 2));
    return xb && check(kn::f32_to_bf16(x, xb, n, stream_), "activation to bf16") ? xb : nullptr;
  }

  // gemm's cuBLAS product from activations already in bf16 (c_bf16: c holds bf16 values).
  bool gemm_bf16(const kn::bf16_t* xb, int64_t rows, int64_t k, int64_t ldx, const CudaWeight& w, int64_t w_off, int64_t n, int64_t wk,
                 int64_t w_stride, int batch, float* c, int64_t ldc, bool c_bf16 = false) {
    const float one = 1.0f, zero = 0.0f;
    if (batch == 1)
      return check_blas(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows), static_cast<int>(k), &one,
                                     w.b16 + w_off, CUDA_R_16BF, static_cast<int>(wk), xb, CUDA_R_16BF, static_cast<int>(ldx), &zero, c,
                                     c_bf16 ? CUDA_R_16BF : CUDA_R_32F, static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                        "bf16 GEMM");
    return check_blas(cublasGemmStridedBatchedEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows),
                                                 static_cast<int>(k), &one, w.b16 + w_off, CUDA_R_16BF, static_cast<int>(wk), w_stride,
                                                 xb, CUDA_R_16BF, static_cast<int>(ldx), k, &zero, c, c_bf16 ? CUDA_R_16BF : CUDA_R_32F,
                                                 static_cast<int>(ldc), n, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      "bf16 GEMM");
  }

  int device_;
  bool fp32_ = false;  // reference mode: every weight fp32, every product in fp32
  kn::Stream stream_;  // the stream of every op, and the `pdl` option for its launches
  cublasHandle_t blas_ = nullptr;
  void* blas_ws_ = nullptr;
  // moe_ffn's shared expert beside the routed products (eager prefill): its stream, cuBLAS handle and
  // workspace, the events that order it after x's bf16 copy and the routed sums after it.
  kn::Stream side_stream_;
  cublasHandle_t side_blas_ = nullptr;
  void* side_blas_ws_ = nullptr;
  cudaEvent_t fork_event_ = nullptr, join_event_ = nullptr;
  bool join_pending_ = false;
  // Counters of kernels whose last block combines the others' results (kernels::expert_down, and
  // kernels::gate_route at kRouteCounter, the last); kept zero between launches.
  static constexpr int64_t kCounters = int64_t(1) << 16, kRouteCounter = kCounters - 1;
  unsigned* counters_ = nullptr;
  // The next site's mix that hc_post computed with the new streams (decode), for the hc_pre /
  // hc_head that follows: kept in post_mix_ until mix_product takes it.
  static constexpr size_t kPostMixFloats = size_t(1) << 16;
  float* post_mix_ = nullptr;
  struct PendingMix {
    const float* streams = nullptr;
    const DeviceWeight* fn = nullptr;
    int splits = 0;
  } pending_mix_;
  bool failed_ = false;
  Error error_;
  int op_depth_ = 0;

  StateLayout layout_;
  int n_slots_ = 0, n_blocks_ = 0;
  float* slots_ = nullptr;
  float* blocks_ = nullptr;
  std::vector<kn::LayerDev> layers_;
  kn::StateDev state_;

  DeviceArena scratch_, temp_;
  int32_t* meta_dev_ = nullptr;
  int32_t* meta_host_[2] = {nullptr, nullptr};
  cudaEvent_t meta_event_[2] = {nullptr, nullptr};
  int meta_turn_ = 0;
  size_t meta_cap_ = 0;
  uint64_t meta_generation_ = 0, state_generation_ = 0;

  const ForwardBatch* batch_ = nullptr;
  kn::BatchDev bdev_;
  const int32_t* logit_rows_dev_ = nullptr;
  int64_t pos_bound_ = 1;  // every row's position is below this (graph steps: from the block-table capacity)
  std::vector<std::pair<int32_t, int32_t>> seq_steps_;  // the forward's sequences: (n_past, n_tokens)
  struct JobList {
    const kn::CompressJob* jobs = nullptr;
    const int32_t* count = nullptr;  // device: jobs in this step
    int capacity = 0;                // launch size (>= count)
  };
  std::map<int, JobList> jobs_by_rate_;

  // CUDA graphs of decode steps, by (rows, logit rows, block-table capacity, greedy tokens).
  enum class Mode { kEager, kCapture, kReplay };
  struct GraphKey {
    int32_t rows, logit_rows, block_cap;
    bool greedy_tokens;  // the forward ends with argmax_rows
    bool operator<(const GraphKey& o) const {
      return std::tie(rows, logit_rows, block_cap, greedy_tokens) < std::tie(o.rows, o.logit_rows, o.block_cap, o.greedy_tokens);
    }
  };
  struct GraphEntry {
    cudaGraphExec_t exec = nullptr;
    bool seen = false;    // ran eagerly once (the arenas have grown to what it needs)
    bool broken = false;  // capture failed: always eager
    uint64_t last_used = 0;
  };
  static constexpr size_t kMaxGraphs = 256;  // graphs kept (each holds its kernels' parameters)
  uint64_t graph_clock_ = 0;
  static constexpr int32_t kGraphBlockBucket = 16;  // graphs are re-captured every 16 blocks of context
  bool zero_all_scratch_ = false;  // the `zero_scratch` option: zero-fill scratch_uninit tensors too
  bool wgmma_ = false;  // Hopper's warpgroup MMA kernels may run (an sm_90a device; CudaFeatures)
  const float* bf16_query_ = nullptr;  // the attention query attention_query kept in bf16 (its storage holds bf16 values) until consumed
  kn::QueryNorm query_norm_;            // ... its norm + rope, when left to the wgmma attention (defer_query_norm)
  void* moe_host_ = nullptr;  // pinned: blas_experts' tables
  size_t moe_host_bytes_ = 0;
  bool graphs_wanted_ = false;  // set_graphs (ModelRunner turns them on: its forwards run the same ops per shape)
  bool graphs_allowed_ = true;  // the `graphs` option
  bool graphs_on_ = false;      // both (a failed capture turns it off)
  Mode mode_ = Mode::kEager;
  std::map<GraphKey, GraphEntry> graphs_;
  GraphEntry* current_ = nullptr;
  uint64_t graphs_gen_ = 0;

  // Op profiling: event pairs per outermost op.
  static constexpr int64_t kProfileHeadStartNs = 30'000'000;
  struct ProfRecord {
    const char* name;
    int64_t n, k;
    size_t start, end;
  };
  bool profiling_ = false;
  std::vector<ProfRecord> prof_;
  std::vector<cudaEvent_t> events_;
  size_t events_used_ = 0;
};

}  // namespace

Result<std::unique_ptr<Backend>> create_cuda_backend(const BackendOptions& options, const CudaFeatures& features) {
  return CudaBackend::create(options, features);
}

}  // namespace deepinfer
