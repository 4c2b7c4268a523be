// The CUDA backend's device side, shared by every model architecture: the Backend contract of
// backend.h on one GPU except the ops of one architecture's own families (DeepSeek-V4's: v4/).
// Matrix weights live on the device as bf16 (fp8 / MXFP4 / f32 checkpoints are dequantized at
// upload; the native_weights option keeps FP8 and MXFP4 as stored), small parameter vectors and
// small matrices also as fp32; activations are fp32 and every product accumulates in fp32 (cuBLAS
// for dense layers, the kernels of kernels/ for the rest). All work runs in order on one stream, so a
// forward reuses the last one's scratch and metadata without a host wait; the host waits only in
// read / write / finish (and when an arena must grow into one chunk). Decode steps can run as
// captured CUDA graphs (graphs.h) and every op can be timed
// (profiling.h).
//
// Ops return void: the first failure (a CUDA or cuBLAS error, no memory, a shape that breaks the
// contract) is kept, every later op is skipped, and the error is returned by the next read / write
// or begin_forward.
#pragma once

#include "attention.h"
#include "backend/backend.h"
#include "backend/cuda/batch_upload.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/device_arena.h"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/graphs.h"
#include "backend/cuda/profiling.h"
#include "backend/cuda/sample_pack.h"
#include "backend/cuda/weight_stager.h"
#include "gemv.h"
#include "moe.h"

#include <span>
#include <utility>

namespace deepinfer {

// Products of at most this many rows (decode) run on the GEMV kernels, with a decode step's
// fusions: products of one input as one launch, the input norm inside it, the next hyper-connection
// mix inside hc_post, the gate product inside the routing, the shared expert beside the routed ones.
inline constexpr int64_t kDecodeRows = kernels::kGemvMaxRows;
// Each cuBLAS handle's workspace (cuBLASLt's products on the handle's stream use it too).
inline constexpr size_t kBlasWorkspaceBytes = size_t(32) << 20;

class CudaDevice : public Backend {
 public:
  ~CudaDevice() override;

  std::string name() const override;
  std::string weight_dtype() const override { return fp32_ ? "f32" : kept_stored_ > 0 ? "native" : "bf16"; }
  int64_t free_memory_bytes() const override;

  // --- weights and model state (device_memory.cpp)
  Result<std::unique_ptr<DeviceWeight>> upload(const WeightSource& w) override;
  Result<std::unique_ptr<DeviceWeight>> upload_stacked(const std::vector<WeightSource>& ws) override;
  Result<std::unique_ptr<DeviceWeight>> upload_floats(const std::vector<float>& v, int64_t rows, int64_t cols) override;
  Result<std::unique_ptr<DeviceWeight>> upload_ints(const std::vector<int32_t>& v, int64_t rows, int64_t cols) override;
  int64_t weight_bytes() const override { return weight_bytes_; }
  Result<std::unique_ptr<DeviceWeight>> random_weight(int64_t count, int64_t rows, int64_t cols, float mean, float stddev, uint64_t seed,
                                                      WeightFormat released) override;
  Result<void> allocate_state(const StateLayout& layout, int n_slots, int n_blocks) override;
  void reset_slot(int slot) override;
  Result<void> randomize_state(uint64_t seed) override;

  // --- one forward: metadata upload, graphs, scratch, host copies (cuda_device.cpp, device_memory.cpp)
  Result<void> begin_forward(const ForwardBatch& batch) override;
  Tensor scratch(int64_t rows, int64_t cols) override;
  IntTensor scratch_int(int64_t rows, int64_t cols) override;
  Tensor scratch_uninit(int64_t rows, int64_t cols) override;
  IntTensor scratch_int_uninit(int64_t rows, int64_t cols) override;
  ScratchMark scratch_mark() override;
  void scratch_release(ScratchMark m) override;
  Result<void> read(Tensor t, float* host) override;
  Result<HostFloats> allocate_host(size_t count) override;
  Result<void> read_ints(IntTensor t, int32_t* host) override;
  Result<void> write(Tensor t, const float* host) override;
  Result<void> write_ints(IntTensor t, const int32_t* host) override;
  Result<void> finish() override;

  // --- tools and options (cuda_device.cpp)
  void set_op_profiling(bool on) override;
  Result<std::vector<OpTime>> take_op_profile() override;
  void set_graphs(bool on) override;
  Result<void> set_options(const BackendOptions& options) override;
  Result<DeviceCeilings> measure_ceilings() override;

  // --- norms, rope, element-wise (norm_rope.cpp)
  void embed(const DeviceWeight& table, Tensor out) override;
  void rms_norm(Tensor x, const DeviceWeight* weight, float eps, int group, Tensor out) override;
  void rms_norm_rope(Tensor x, const DeviceWeight* weight, float eps, int head_dim, const Rope& rope, Tensor out) override;
  void rms_norm_rope_pair(Tensor a, const DeviceWeight* weight_a, Tensor b, const DeviceWeight* weight_b, float eps, int head_dim,
                          const Rope& rope) override;
  void rope(Tensor x, int head_dim, const Rope& rope, bool inverse) override;
  void add(Tensor a, Tensor b) override;
  void gather_rows(Tensor x, const std::vector<int32_t>& rows, Tensor out) override;
  void argmax_rows(Tensor x, IntTensor out) override;

  // --- sampling (sampling.cpp)
  Result<void> sample_rows(Tensor logits, std::span<const RowSampling> rows, std::vector<Result<SampleResult>>& out) override;

  // --- products (linear.cpp)
  void linear(Tensor x, const DeviceWeight& w, Tensor out) override;
  void linears(Tensor x, std::span<const DeviceWeight* const> ws, std::span<const Tensor> outs) override;
  void rms_norm_linears(Tensor x, const DeviceWeight* weight, float eps, std::span<const DeviceWeight* const> ws,
                        std::span<const Tensor> outs) override;
  void grouped_linear(Tensor x, const DeviceWeight& w, int groups, Tensor out) override;

  // --- mixture of experts (moe.cpp)
  void route(Tensor x, const Router& r, IntTensor experts, Tensor weights) override;
  void moe_experts(Tensor x, IntTensor experts, Tensor weights, const Experts& e, Tensor out) override;
  void swiglu(Tensor x, const DeviceWeight& w1, const DeviceWeight& w3, const DeviceWeight& w2, float limit, Tensor out) override;
  void moe_ffn(Tensor x, IntTensor experts, Tensor weights, const Experts& routed, const Experts& shared, Tensor out) override;

 protected:
  CudaDevice(int device, const BackendOptions& options);
  // Streams, cuBLAS handles, buffers and kernel limits of the device (once, after construction).
  Result<void> init(const CudaFeatures& features);
  // Ends a capture that never ran and waits for the streams: before an architecture's destructor
  // frees buffers its kernels may still use.
  void quiesce();

  // Marks an op: the outermost one recycles the temporary arena (stream order makes that safe) and,
  // when profiling, is timed with a pair of events. While a captured graph stands in for this
  // forward (replay), ops do nothing.
  class Op {
   public:
    Op(CudaDevice& b, const char* name, int64_t n = 0, int64_t k = 0);
    ~Op();
    Op(const Op&) = delete;
    Op& operator=(const Op&) = delete;
    explicit operator bool() const { return !b_.failed_ && b_.graphs_.mode() != LaunchMode::kReplay; }

   private:
    CudaDevice& b_;
    int prof_ = -1;
  };

  // --- errors: the first is kept (see above)
  void fail(Error e);
  bool check(cudaError_t e, const char* what);
  bool check_blas(cublasStatus_t s, const char* what);
  template <class... Args>
  bool expect(bool cond, fmt::format_string<Args...> f, Args&&... args) {
    if (cond) return true;
    fail(make_error(Code::kInternal, f, std::forward<Args>(args)...));
    return false;
  }
  bool layer_ok(int layer);

  Result<void> set_device();
  Result<void> sync(const char* what);
  // Ends this forward's graph capture (instantiating and launching the graph) or launches the graph
  // that stands in for it. Every entry point that is not an op calls this first.
  Result<void> flush_pending();
  LaunchMode mode() const { return graphs_.mode(); }

  // Device memory of the current op (the temporary arena; the error kept when there is none), and
  // weights' fp32 copies and rope tables as kernels take them.
  void* temp(size_t bytes);
  const float* fvec(const DeviceWeight& w, const char* what);
  kn::RopeDev rope_dev(const Rope& rope);

  // --- products (linear.cpp). A lane is where a product runs: the main stream and cuBLAS handle, or
  // the side ones (moe_ffn's shared expert beside the routed experts).
  struct Lane {
    kn::Stream stream;
    cublasHandle_t blas;
    void* workspace;  // the handle's (kBlasWorkspaceBytes)
  };
  Lane main_lane() const { return {stream_, blas_, blas_ws_}; }
  // C[i] (rows x n, ldc) = X[i] (rows x k, ldx) @ W[i]^T for `batch` groups: X[i] = x + i * k,
  // W[i] = w + w_off + i * w_stride, C[i] = c + i * n. bf16 weights (activations rounded to bf16)
  // unless prefer_f32 and the weight has an fp32 copy; fp32 accumulation either way.
  bool gemm(const float* x, int64_t rows, int64_t k, int64_t ldx, const CudaWeight& w, int64_t w_off, int64_t n, int64_t wk,
            int64_t w_stride, int batch, float* c, int64_t ldc, bool prefer_f32);
  // gemm's cuBLAS product from activations already in bf16 (c_bf16: c holds bf16 values), on `lane`.
  bool gemm_bf16(const Lane& lane, const kn::bf16_t* xb, int64_t rows, int64_t k, int64_t ldx, const CudaWeight& w, int64_t w_off,
                 int64_t n, int64_t wk, int64_t w_stride, int batch, float* c, int64_t ldc, bool c_bf16 = false);
  // The activations x (n floats) as bf16 in the temporary arena, or null (the error kept).
  const kn::bf16_t* activations_bf16(const float* x, int64_t n);
  // w's bf16 matrix (a stack: all its matrices): its copy, or its stored bytes dequantized into the
  // temporary arena on `stream` (a weight kept as stored, in a product that is not a decode GEMV);
  // null (the error kept) when it has neither.
  const kn::bf16_t* matrix_bf16(const CudaWeight& w, kn::Stream stream);
  // Decode rows against a weight kept as stored (kernels/native_gemv.h), groups as in gemm; false
  // (nothing launched) where the kernel does not take them, else true with `ok` the launches' result.
  bool native_products(const float* x, int64_t rows, int64_t k, int64_t ldx, const CudaWeight& w, int64_t w_off, int64_t n, int64_t wk,
                       int64_t w_stride, int batch, float* c, int64_t ldc, bool& ok);
  // gemm_bf16's products with an FP8 weight kept as stored on the FP8 tensor cores (fp8_gemm.h, the
  // activations quantized per row and 128 columns): false (nothing launched) where they do not take
  // the weight, else true with `ok` the launches' result.
  bool fp8_products(const Lane& lane, const kn::bf16_t* xb, int64_t rows, int64_t k, int64_t ldx, const CudaWeight& w, int64_t w_off,
                    int64_t n, int64_t wk, int64_t w_stride, int batch, float* c, int64_t ldc, bool c_bf16, bool& ok);
  bool bf16_products_of(Tensor x, std::span<const DeviceWeight* const> ws, std::span<const Tensor> outs);
  bool gemv_list_of(Tensor x, std::span<const DeviceWeight* const> ws, std::span<const Tensor> outs, kn::GemvList& list);

  // --- the attention query (Backend::attention_query): an architecture's attention may keep it in
  // bf16 (data: its storage holds bf16 values until the attention consumes it) and take over its
  // norm + rope. The product ops write such a query in bf16, the norm + rope ops normalise it in place
  // in bf16 or leave the norm to the attention where defer_query_norm says so.
  struct AttentionQuery {
    const float* data = nullptr;
    kn::QueryNorm norm;  // eps < 0: nothing deferred
  };
  virtual bool defer_query_norm(const DeviceWeight* weight, float eps, int head_dim, const kn::RopeDev& r);
  // Per-forward state of an architecture's ops, dropped by begin_forward.
  virtual void reset_forward_state() {}

  // --- mixture of experts (moe.cpp)
  void routed_experts(Tensor x, const kn::bf16_t* xb, IntTensor experts, Tensor weights, const Experts& e, Tensor out);
  bool blas_experts(Tensor x, const int32_t* experts, const kn::MoePlan& plan, int64_t n_exp, int64_t entries, int k, int64_t d,
                    int64_t inter, float limit, const kn::bf16_t* w1, const kn::bf16_t* w3, const kn::bf16_t* w2, float* out_rows,
                    const float* weights, bool& done);
  bool native_experts(Tensor x, IntTensor experts, Tensor weights, const CudaWeight& w1, const CudaWeight& w3, const CudaWeight& w2,
                      float limit, Tensor out);
  bool gemv_experts(Tensor x, const kn::GemvExperts& g, int64_t inter, float limit, bool accumulate, Tensor out);
  bool shared_expert(const Lane& lane, const kn::bf16_t* xb, int64_t rows, int64_t d, const CudaWeight& w1, const CudaWeight& w3,
                     const CudaWeight& w2, float limit, Tensor out);
  void join_side();

  // --- state
  const int device_;
  const bool fp32_;     // reference mode: every weight fp32, every product in fp32
  bool wgmma_ = false;  // Hopper's warpgroup MMA kernels may run (an sm_90a device; CudaFeatures)
  bool zero_all_scratch_ = false;  // the `zero_scratch` option: zero-fill scratch_uninit tensors too
  // The `batch_invariant` option: each op runs one kernel whose per-row arithmetic depends on nothing
  // but the row (no GEMV / cuBLAS / wgmma choice by row count, no splits by batch, no eager-only paths).
  bool invariant_ = false;
  bool native_ = false;            // uploads keep FP8 block-scaled matrices and MXFP4 stacks as stored (CudaWeight::stored)
  int64_t weight_bytes_ = 0;       // device memory allocated for weights since the backend was made
  int64_t kept_stored_ = 0;        // weights kept in their checkpoint formats (native_weights)
  kn::Stream stream_;              // the stream of every op, with the `pdl` option for its launches
  cublasHandle_t blas_ = nullptr;
  void* blas_ws_ = nullptr;
  Fp8Gemm fp8_gemm_;
  bool failed_ = false;
  Error error_;
  int op_depth_ = 0;

  // Model state (allocate_state).
  StateLayout layout_;
  int n_slots_ = 0, n_blocks_ = 0;
  float* slots_ = nullptr;
  float* blocks_ = nullptr;
  std::vector<kn::LayerDev> layers_;
  kn::StateDev state_;
  uint64_t state_generation_ = 0;

  // The forward: its batch and metadata, scratch (a stack: scratch_mark / scratch_release) and the
  // temporaries of the current op.
  const ForwardBatch* batch_ = nullptr;
  BatchUpload upload_;
  BatchOnDevice fwd_;
  DeviceArena scratch_, temp_;
  AttentionQuery query_;

  // MoE: moe_ffn's shared expert beside the routed products (eager prefill) on a side stream with its
  // own cuBLAS handle and workspace, forked after x's bf16 copy, joined before the routed sums land.
  kn::Stream side_stream_;
  cublasHandle_t side_blas_ = nullptr;
  void* side_blas_ws_ = nullptr;
  cudaEvent_t fork_event_ = nullptr, join_event_ = nullptr;
  bool join_pending_ = false;
  // Counters of kernels whose last block combines the others' results (kernels::expert_down, and
  // kernels::gate_route at kRouteCounter, the last); kept zero between launches.
  static constexpr int64_t kCounters = int64_t(1) << 16, kRouteCounter = kCounters - 1;
  unsigned* counters_ = nullptr;
  std::unique_ptr<WeightStager> stager_;  // weight uploads (made at the first, buffers freed by allocate_state)
  void* moe_host_ = nullptr;              // pinned: blas_experts' tables
  size_t moe_host_bytes_ = 0;

 private:
  void apply(const BackendOptions& o);
  // sample_rows' upload, kernels and read-back (inside its op).
  void launch_sampling(Tensor logits);
  WeightStager& stager();
  Result<void> stage_weight(const WeightSource& w, uint16_t* b16, float* f32);
  Result<void> keep_stored(const WeightSource& w, CudaWeight& out);
  // random_weight's values as stored FP8 / MXFP4 (native_weights): out's shape set, stored parts made.
  Result<void> random_stored(CudaWeight& out, bool mxfp4, float mean, float stddev, uint64_t seed);
  // device_alloc for a weight's storage, counted in weight_bytes_.
  template <class T>
  Result<T*> weight_alloc(size_t count, const std::string& what) {
    auto p = device_alloc<T>(count, what);
    if (p) weight_bytes_ += static_cast<int64_t>(std::max<size_t>(count, 1) * sizeof(T));
    return p;
  }
  Result<void> note_nan_codes(CudaWeight& out, const std::string& what);
  void* take_scratch(int64_t n, bool zero);
  uint64_t generation() const;
  template <class T>
  Result<void> copy_out(const T* dev, T* host, int64_t n);
  template <class T>
  Result<void> copy_in(T* dev, const T* host, int64_t n);

  GraphCache graphs_;
  bool graphs_wanted_ = false;  // set_graphs (ModelRunner turns them on: its forwards run the same ops per shape)
  bool graphs_allowed_ = true;  // the `graphs` option
  bool graphs_on_ = false;      // both (a failed capture turns it off)
  OpProfiler profiler_;
  bool profiling_ = false;
  SamplePack sampling_;  // sample_rows' page-locked buffers (reused: the op waits for its results)
};

}  // namespace deepinfer
