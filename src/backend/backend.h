// The Backend interface: the operations the DeepSeek-V4 forward (src/model) is written against.
// The CPU backend implements them in fp32 as the reference; the CUDA backend implements the same
// contract on the GPU. Activations are fp32 row-major matrices, one row per token of the batch.
//
// A forward runs between begin_forward(batch) and the last op; tensors from scratch() live until the
// next begin_forward, or until scratch_release() of a mark taken before them. Ops that read or write model state (compress, indexer_topk, attention,
// window_update) use the batch's sequences (slot, past length, block table) and the StateLayout
// given to allocate_state.
#pragma once

#include "backend/backend_options.h"
#include "backend/forward_batch.h"
#include "backend/row_sampling.h"
#include "backend/state_layout.h"
#include "backend/weight_source.h"
#include "util/result.h"

#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

namespace deepinfer {

struct Tensor {
  float* data = nullptr;
  int64_t rows = 0, cols = 0;
};

struct IntTensor {
  int32_t* data = nullptr;
  int64_t rows = 0, cols = 0;
};

// Host memory from Backend::allocate_host, released by the function it carries.
struct HostRelease {
  void (*release)(float*) = nullptr;
  void operator()(float* p) const {
    if (release) release(p);
  }
};
using HostFloats = std::unique_ptr<float[], HostRelease>;

// A position in the scratch stack (see Backend::scratch_mark).
struct ScratchMark {
  size_t a = 0, b = 0;
};

// Device time of one kind of op over the forwards profiled (Backend::take_op_profile).
struct OpTime {
  std::string op;  // op name, with the weight's shape for products ("linear 1024x4096")
  int64_t calls = 0;
  double ms = 0;
};

// The two ceilings a benchmark compares against, measured on the device.
struct DeviceCeilings {
  std::string device;          // e.g. "NVIDIA H100 80GB HBM3"
  double copy_bytes_per_s = 0;  // device-to-device copy, bytes read + written per second
  double bf16_flops = 0;        // bf16 matrix product (fp32 accumulation), FLOP/s
  int64_t memory_bytes = 0;     // total device memory
};

// A weight in backend memory: `count` matrices of [rows, cols] (count > 1 for stacked experts).
class DeviceWeight {
 public:
  virtual ~DeviceWeight() = default;
  int64_t count = 1, rows = 0, cols = 0;
};

// The mix of the hyper-connection site that comes next, which hc_post may compute with the new
// streams (decode: its pass over them serves both; the CUDA backend folds it into hc_post's launch).
// Opaque: hand what hc_post returned to the hc_pre / hc_head of that site, on those new streams with
// that fn. Empty (id 0, the CPU backend's): that op computes its mix itself.
struct HcMixAhead {
  uint64_t id = 0;
};

// Hyper-connection parameters of one site (attention or MoE) or of the final head.
struct HyperConnection {
  const DeviceWeight* fn = nullptr;     // [mix, hc*hidden]
  const DeviceWeight* base = nullptr;   // [mix]
  const DeviceWeight* scale = nullptr;  // [3] (site) or [1] (head)
  int hc = 1;
  int sinkhorn_iters = 1;
  float eps = 1e-6f;       // hc_eps
  float norm_eps = 1e-6f;  // rms_norm_eps of the unweighted input norm
  // When set, the collapsed row (hc_pre, hc_head) is then RMS-normalised with this weight (eps
  // norm_eps): the sublayer's input norm, or the model's final norm, applied in the same pass.
  const DeviceWeight* sublayer_norm = nullptr;
};

// Rotary embedding of the trailing `rope_dim` channels of each head.
struct Rope {
  const DeviceWeight* inv_freq = nullptr;  // [rope_dim / 2]
  int rope_dim = 0;
  float attention_factor = 1.0f;  // cos and sin are scaled by it
};

// Compressor of one layer (the attention branch, or the CSA indexer's own).
struct Compressor {
  const DeviceWeight* ape = nullptr;   // [rate, width]: learned position bias added to the gate
  const DeviceWeight* norm = nullptr;  // [dim]
  float norm_eps = 1e-6f;
  bool indexer = false;  // writes the layer's indexer keys instead of its compressed entries
  Rope rope;
};

enum class RouterScore { kSqrtSoftplus, kSigmoid, kSoftmax };

struct Router {
  const DeviceWeight* gate = nullptr;     // [experts, hidden]
  const DeviceWeight* bias = nullptr;     // [experts] added for selection only (learned routing)
  const DeviceWeight* tid2eid = nullptr;  // [vocab, k] int32 (hash routing); selection by token id
  RouterScore score = RouterScore::kSqrtSoftplus;
  int top_k = 1;
  float scaling = 1.0f;
};

struct Experts {
  const DeviceWeight* w1 = nullptr;  // gate [E, inter, hidden]
  const DeviceWeight* w3 = nullptr;  // up   [E, inter, hidden]
  const DeviceWeight* w2 = nullptr;  // down [E, hidden, inter]
  float limit = 10.0f;               // gate <= limit, |up| <= limit
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // How matrix weights are held: "f32", "bf16", "native" (some kept in the checkpoint's FP8 / MXFP4)...
  virtual std::string weight_dtype() const { return "f32"; }
  // Bytes of device memory allocated for weights since the backend was made (as stored: bf16 / fp32
  // copies, or FP8 bytes and scales), or -1 where the backend does not count them.
  virtual int64_t weight_bytes() const { return -1; }

  // --- weights
  virtual Result<std::unique_ptr<DeviceWeight>> upload(const WeightSource& w) = 0;
  // Several matrices of one shape as one stacked weight (routed experts).
  virtual Result<std::unique_ptr<DeviceWeight>> upload_stacked(const std::vector<WeightSource>& ws) = 0;
  virtual Result<std::unique_ptr<DeviceWeight>> upload_floats(const std::vector<float>& v, int64_t rows, int64_t cols) = 0;
  virtual Result<std::unique_ptr<DeviceWeight>> upload_ints(const std::vector<int32_t>& v, int64_t rows, int64_t cols) = 0;
  // A synthetic weight made on the backend (no host data): `count` stacked [rows, cols] matrices of
  // mean + stddev * u, u uniform with unit variance, from a counter-based hash of (seed, element
  // index) (random_fill.h), so every backend makes the same values (the CUDA backend then rounds
  // matrices to bf16 as it rounds any weight). For models built from a config alone (benchmarks).
  // `released`: the format DeepSeek's checkpoints store such a weight in; a backend that keeps that
  // format (the CUDA backend's native_weights) quantizes the values to it (fill_random_stored).
  virtual Result<std::unique_ptr<DeviceWeight>> random_weight(int64_t count, int64_t rows, int64_t cols, float mean, float stddev,
                                                              uint64_t seed, WeightFormat released = WeightFormat::kPlain) = 0;

  // --- model state: zero-filled storage for n_slots slot records and n_blocks blocks.
  virtual Result<void> allocate_state(const StateLayout& layout, int n_slots, int n_blocks) = 0;
  // Zeroes one slot record (a new sequence starts from empty state).
  virtual void reset_slot(int slot) = 0;
  // Fills every slot record and block with values uniform in [-1, 1): a synthetic context, so that a
  // benchmark can decode at a long context without prefilling it (decode cost does not depend on
  // what the state holds).
  virtual Result<void> randomize_state(uint64_t seed) = 0;

  // --- one forward
  virtual Result<void> begin_forward(const ForwardBatch& batch) = 0;
  virtual Tensor scratch(int64_t rows, int64_t cols) = 0;  // zero-filled
  virtual IntTensor scratch_int(int64_t rows, int64_t cols) = 0;
  // Like scratch / scratch_int for a tensor the next op writes in full: its contents are unspecified
  // until then, so a backend may skip the zero fill (one launch fewer per tensor on a GPU).
  virtual Tensor scratch_uninit(int64_t rows, int64_t cols) { return scratch(rows, cols); }
  virtual IntTensor scratch_int_uninit(int64_t rows, int64_t cols) { return scratch_int(rows, cols); }
  // Scratch for layer `layer`'s attention query [rows, cols], which the next product writes in full.
  // Its storage is the backend's choice (the CUDA backend keeps a prefill query in bf16, what its
  // tensor-core attention reads), so only these ops may touch it, in this order and within one scratch
  // scope (no scratch_release in between): the product that writes it (linear, linears,
  // rms_norm_linears), rms_norm_rope / rms_norm_rope_pair (as x or a, in place, weightless: a backend
  // may leave this norm + rope to the attention, which applies it as it loads the query), and
  // attention / attention_projected, which consume it (it is not read after them). The backend knows
  // the query by its data pointer.
  virtual Tensor attention_query(int layer, int64_t rows, int64_t cols) {
    (void)layer;
    return scratch_uninit(rows, cols);
  }
  virtual Result<void> read(Tensor t, float* host) = 0;
  // Host memory that read() fills fastest, for results read back every forward (the logits):
  // page-locked on a GPU, so the copy runs at bus speed without a staging copy. Contents unspecified.
  virtual Result<HostFloats> allocate_host(size_t count) {
    float* p = new (std::nothrow) float[count];
    if (!p) return make_error(Code::kOutOfMemory, "cannot allocate {} floats of host memory", count);
    return HostFloats(p, HostRelease{[](float* q) { delete[] q; }});
  }
  // Host <-> backend copies of whole tensors (tests, and inputs that do not come from the batch).
  // They complete before returning.
  virtual Result<void> write(Tensor t, const float* host) = 0;
  virtual Result<void> read_ints(IntTensor t, int32_t* host) = 0;
  virtual Result<void> write_ints(IntTensor t, const int32_t* host) = 0;
  // Bytes of backend memory still free for model state and scratch (device memory on a GPU);
  // -1 when the backend does not know (host memory).
  virtual int64_t free_memory_bytes() const { return -1; }
  // Waits until the work enqueued so far is done; returns an error an op kept (see the CUDA backend).
  virtual Result<void> finish() { return ok(); }

  // Scratch scopes: scratch_release(m) frees every scratch tensor taken after m = scratch_mark()
  // (stack order; tensors taken before m stay valid). Lets a forward reuse the memory of one
  // sublayer's intermediates for the next.
  virtual ScratchMark scratch_mark() = 0;
  virtual void scratch_release(ScratchMark m) = 0;

  // --- performance tools (no-ops where a backend has none)
  // Per-op device timing of the forwards run while on (forces eager execution on the GPU).
  virtual void set_op_profiling(bool on) { (void)on; }
  // The times gathered since profiling was switched on, largest first; resets them.
  virtual Result<std::vector<OpTime>> take_op_profile() { return std::vector<OpTime>{}; }
  // Decode steps replayed as captured CUDA graphs (off until set; only for callers whose forwards
  // run the same ops for batches of the same shape, as DeepseekV4::forward does: ModelRunner turns
  // them on). The backend option `graphs` off keeps them off.
  virtual void set_graphs(bool on) { (void)on; }
  // Applies settings to a live backend (benchmarks compare them on one loaded model). Settings that
  // only take effect when the backend is made (cuda_device, fp32_weights) must keep their values:
  // kInvalidArgument otherwise.
  virtual Result<void> set_options(const BackendOptions& options) {
    (void)options;
    return ok();
  }
  // Measures memory bandwidth and matrix rate (kUnsupported where the backend cannot).
  virtual Result<DeviceCeilings> measure_ceilings() {
    return make_error(Code::kUnsupported, "{} does not measure hardware ceilings", name());
  }

  // out[r] = table[token of row r], repeated out.cols / table.cols times (the residual streams start
  // as copies of the embedding)
  virtual void embed(const DeviceWeight& table, Tensor out) = 0;
  // out = x @ w^T
  virtual void linear(Tensor x, const DeviceWeight& w, Tensor out) = 0;
  // outs[i] = x @ ws[i]^T: products that share their input, which a backend may run as one.
  virtual void linears(Tensor x, std::span<const DeviceWeight* const> ws, std::span<const Tensor> outs) {
    for (size_t i = 0; i < ws.size() && i < outs.size(); ++i) linear(x, *ws[i], outs[i]);
  }
  // outs[i] = rms_norm(x) @ ws[i]^T: x normalised to unit RMS over all its columns (times weight when
  // given), then the products. x may be left normalised in place (the default does so), or as it was.
  virtual void rms_norm_linears(Tensor x, const DeviceWeight* weight, float eps, std::span<const DeviceWeight* const> ws,
                                std::span<const Tensor> outs) {
    rms_norm(x, weight, eps, static_cast<int>(x.cols), x);
    linears(x, ws, outs);
  }
  // y_g = x_g @ w[g]^T for each of `groups` column groups of x; w is [groups * n, cols / groups]
  virtual void grouped_linear(Tensor x, const DeviceWeight& w, int groups, Tensor out) = 0;
  // Normalises each run of `group` columns to unit RMS, times weight[group] when given. In place ok.
  virtual void rms_norm(Tensor x, const DeviceWeight* weight, float eps, int group, Tensor out) = 0;
  // Rotates the trailing rope.rope_dim channels of each head_dim-wide head at the row's position;
  // inverse rotates by the negative angle. In place.
  virtual void rope(Tensor x, int head_dim, const Rope& rope, bool inverse) = 0;
  // rms_norm in groups of head_dim, then rope (forward). By default the two ops; a backend may fuse them.
  virtual void rms_norm_rope(Tensor x, const DeviceWeight* weight, float eps, int head_dim, const Rope& r, Tensor out) {
    rms_norm(x, weight, eps, head_dim, out);
    rope(out, head_dim, r, false);
  }
  // rms_norm_rope of a and of b (the same rows), as one op where the backend can. In place ok.
  virtual void rms_norm_rope_pair(Tensor a, const DeviceWeight* weight_a, Tensor b, const DeviceWeight* weight_b, float eps, int head_dim,
                                  const Rope& r) {
    rms_norm_rope(a, weight_a, eps, head_dim, r, a);
    rms_norm_rope(b, weight_b, eps, head_dim, r, b);
  }
  // a += b
  virtual void add(Tensor a, Tensor b) = 0;
  // out[i] = x[rows[i]]
  virtual void gather_rows(Tensor x, const std::vector<int32_t>& rows, Tensor out) = 0;
  // out[r] ([x.rows x 1]) = index of the largest value of row r of x, the lowest among equal ones
  // (greedy decoding's token, as greedy_token picks it); -1 when the row is all -inf, -2 when it
  // holds a NaN or +inf.
  virtual void argmax_rows(Tensor x, IntTensor out) = 0;
  // Samples each row of `logits` where it is (no copy of the rows to the host): out[i] is what
  // sample_row(row i, rows[i]...) returns, errors of one row included (a mask that excludes every
  // token, a NaN or +inf logit, a bitmask of the wrong size). The logits' contents are unspecified
  // afterwards. Like read(), it completes before returning; its own error (rows.size() !=
  // logits.rows, a device failure) fails the call. The CPU backend runs sample_row itself (bit-
  // identical); a device backend draws from the same distribution with the same uniform, so its token
  // is sample_row's except where the draw falls within rounding of a boundary of the cumulative
  // distribution or of a top_p cut, and its logprobs agree to float rounding.
  virtual Result<void> sample_rows(Tensor logits, std::span<const RowSampling> rows, std::vector<Result<SampleResult>>& out) = 0;

  // streams [T, hc*hidden] -> sublayer input (Σ pre_i stream_i) [T, hidden], post [T, hc], comb [T, hc*hc].
  // ahead: what the hc_post that made these streams returned for this site (see HcMixAhead).
  virtual void hc_pre(Tensor streams, const HyperConnection& hc, Tensor collapsed, Tensor post, Tensor comb, HcMixAhead ahead = {}) = 0;
  // new_streams[k] = post[k] * out + Σ_j comb[j][k] * streams[j]. next_fn, when given, is the fn of
  // the hc_pre / hc_head that comes next, on new_streams: a backend may compute that op's mix here and
  // return it for that op (an empty HcMixAhead where it did not).
  virtual HcMixAhead hc_post(Tensor streams, Tensor out, Tensor post, Tensor comb, Tensor new_streams,
                             const DeviceWeight* next_fn = nullptr) = 0;
  // Final collapse: Σ_i (sigmoid(mix_i * scale + base_i) + eps) stream_i
  virtual void hc_head(Tensor streams, const HyperConnection& hc, Tensor out, HcMixAhead ahead = {}) = 0;

  // Feeds the rows' compressor projections (kv, gate: [T, width]) into the layer's state and writes
  // one pooled, normalised, rotated entry for each window that closes.
  virtual void compress(int layer, Tensor kv, Tensor gate, const Compressor& c) = 0;
  // For each row, the indices of the top-k visible indexer keys by Σ_h w_h·ReLU(q_h·k) (ties -> lower
  // index), in an order of the backend's choosing (attention does not depend on it; the CPU lists
  // them by score, CUDA by index); -1 pads rows with fewer visible entries. q: [T, heads*dim],
  // weights: [T, heads], out: [T, k].
  virtual void indexer_topk(int layer, Tensor q, Tensor weights, int heads, IntTensor out) = 0;
  // Attention of q [T, heads*head_dim] over the sliding window (state + this step's kv [T, head_dim])
  // and the layer's compressed entries (all visible ones, or `selected` for CSA), with per-head sinks.
  // With unrope, each output head is then rotated back (rope(out, head_dim, *unrope, inverse)), which
  // a backend may do as it writes the output.
  virtual void attention(int layer, Tensor q, Tensor kv, const DeviceWeight& sinks, const IntTensor* selected, Tensor out,
                         const Rope* unrope = nullptr) = 0;
  // out = linear(grouped_linear(attention(...), wo_a, groups), wo_b): the attention's output straight
  // through its two projections, which a backend may keep in its own precision in between (the
  // prefill output is the largest activation of a layer). By default the three ops.
  virtual void attention_projected(int layer, Tensor q, Tensor kv, const DeviceWeight& sinks, const IntTensor* selected, const Rope* unrope,
                                   const DeviceWeight& wo_a, int groups, const DeviceWeight& wo_b, Tensor out) {
    Tensor o = scratch_uninit(q.rows, q.cols);
    attention(layer, q, kv, sinks, selected, o, unrope);
    Tensor g = scratch_uninit(q.rows, wo_a.rows);
    grouped_linear(o, wo_a, groups, g);
    linear(g, wo_b, out);
  }
  // Appends this step's kv rows to the window ring of each sequence.
  virtual void window_update(int layer, Tensor kv) = 0;

  // Expert selection and combine weights per row: experts [T, k], weights [T, k].
  virtual void route(Tensor x, const Router& r, IntTensor experts, Tensor weights) = 0;
  // out += Σ_k weights[k] * expert_k(x) (clamped SwiGLU experts)
  virtual void moe_experts(Tensor x, IntTensor experts, Tensor weights, const Experts& e, Tensor out) = 0;
  // out = clamped SwiGLU MLP(x) with one expert (the shared expert)
  virtual void swiglu(Tensor x, const DeviceWeight& w1, const DeviceWeight& w3, const DeviceWeight& w2, float limit, Tensor out) = 0;
  // The MoE feed-forward: out = shared(x) + Σ_k weights[k] * expert_k(x), shared being one expert
  // (weights [1, inter, hidden] etc.). By default swiglu, moe_experts and add; a backend may fuse them.
  virtual void moe_ffn(Tensor x, IntTensor experts, Tensor weights, const Experts& routed, const Experts& shared, Tensor out) {
    Tensor routed_sum = scratch(x.rows, out.cols);  // zero-filled: experts accumulate into it
    moe_experts(x, experts, weights, routed, routed_sum);
    swiglu(x, *shared.w1, *shared.w3, *shared.w2, shared.limit, out);
    add(out, routed_sum);
  }
};

// The CPU reference backend (fp32, batch-invariant products, a thread pool of n_threads; 0: one
// per hardware thread). Fails when the threads cannot be started (ThreadPool::create).
Result<std::unique_ptr<Backend>> make_cpu_backend(int n_threads = 0);

// The CUDA backend (bf16 weights, fp32 activations and accumulation), from the backend module
// loaded at run time (libdeepinfer-cuda.so.0; cuda_loader.cpp): `module_path` names the module file,
// else it is looked for beside the library holding this code, then through the dynamic loader's
// search path. kUnsupported, naming what is missing, when the module, the CUDA libraries it needs, a
// driver or a device is not there; kBackend when the device fails to start. options.fp32_weights
// keeps every weight in fp32 and runs every product in fp32: a reference mode that matches the CPU
// backend to fp32 rounding (twice the weight memory, slower), for checking numerics.
Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& options = {}, const std::string& module_path = "");

}  // namespace deepinfer
