// Mixture of experts on the CUDA backend: routing (kernels/moe.cu; decode: the gate product inside
// the routing launch), routed and shared experts. Decode rows run on the expert GEMV kernels
// (kernels/gemv.cu) without a permutation; prefill rows are permuted into expert tiles: 32-row tiles
// (mma.sync) for experts averaging under 32 rows, else 128-row tiles on wgmma (kernels/moe_wgmma.cu,
// sm_90a, experts averaging at most 128 rows), cuBLAS over per-expert slabs (eager forwards) or the
// mma.sync tile kernel (graph captures, skewed routing); fp32 mode: fp32 tiles. Batch-invariant mode:
// no GEMV and no cuBLAS; wgmma's 128-row tiles for every row count (sm_90a), else the mma.sync tiles.
#include "moe.h"
#include "backend/cuda/cuda_device.h"
#include "elementwise.h"
#include "gemv.h"
#include "native_gemv.h"
#include "tile_linear.h"

#include <algorithm>

namespace deepinfer {
namespace {

// Token chunk of the routed-expert path (bounds its permuted buffers). A prefill forward's 8192
// tokens in one chunk: each chunk reads every expert's weights once (12.9 GB a V4-Flash layer), so
// two chunks of 4096 doubled the experts' memory traffic.
constexpr int64_t kMoeChunkRows = 8192;
// Prefill expert products run on wgmma (kernels::moe_*_wgmma) while experts average at most this
// many rows (bound by reading the weights there), else cuBLAS over per-expert slabs.
constexpr int64_t kWgmmaMoeMaxRows = 128;
// blas_experts: experts sorted by count are grouped this many at a time, each group with slabs of
// its largest count.
constexpr size_t kMoeGroupExperts = 64;
// Experts kept as stored (native_weights): rows x top_k (row, expert) pairs up to this many per expert
// run on the decode products (native_experts: per pair, or by expert with up to 8 pairs an expert
// read); more pairs take the prefill paths (MXFP4 wgmma tiles, else the stack dequantized per call).
constexpr int64_t kNativePairsPerExpert = 2;

}  // namespace

void CudaDevice::route(Tensor x, const Router& r, IntTensor experts, Tensor weights) {
  Op op(*this, "route");
  if (!op) return;
  const int64_t n_exp = r.gate->rows;
  if (!expect(r.gate->cols == x.cols && n_exp > 0 && n_exp <= 1024 && experts.cols == r.top_k && weights.cols == r.top_k &&
                  experts.rows == x.rows && weights.rows == x.rows && (r.tid2eid || r.top_k <= n_exp) &&
                  (!r.tid2eid || (cw(*r.tid2eid).i32 && r.tid2eid->cols == r.top_k)) && (!r.tid2eid || x.rows == fwd_.dev.rows),
              "route: x [{}, {}], gate [{}, {}], top {}", x.rows, x.cols, n_exp, r.gate->cols, r.top_k))
    return;
  const float* bias = r.bias ? fvec(*r.bias, "router bias") : nullptr;
  float* logits = static_cast<float*>(temp(static_cast<size_t>(x.rows * n_exp) * 4));
  if ((r.bias && !bias) || !logits) return;
  const kn::ScoreFunc sf = r.score == RouterScore::kSigmoid ? kn::ScoreFunc::kSigmoid
                           : r.score == RouterScore::kSoftmax ? kn::ScoreFunc::kSoftmax
                                                              : kn::ScoreFunc::kSqrtSoftplus;
  const float* gate = cw(*r.gate).f32;
  if (!invariant_ && x.rows <= kDecodeRows && gate && kn::gate_route_supported(x.data, x.rows, x.cols, gate)) {  // decode: one launch
    check(kn::gate_route(x.data, x.rows, x.cols, gate, static_cast<int>(n_exp), bias, r.tid2eid ? cw(*r.tid2eid).i32 : nullptr,
                         r.tid2eid ? r.tid2eid->rows : 0, fwd_.dev.tokens, sf, r.top_k, r.scaling, logits, counters_ + kRouteCounter,
                         experts.data, weights.data, stream_),
          "gate + route");
    return;
  }
  if (!gemm(x.data, x.rows, x.cols, x.cols, cw(*r.gate), 0, n_exp, x.cols, 0, 1, logits, n_exp, true)) return;
  check(kn::route(logits, x.rows, static_cast<int>(n_exp), bias, r.tid2eid ? cw(*r.tid2eid).i32 : nullptr,
                  r.tid2eid ? r.tid2eid->rows : 0, fwd_.dev.tokens, sf, r.top_k, r.scaling, experts.data, weights.data, stream_),
        "route");
}

void CudaDevice::moe_experts(Tensor x, IntTensor experts, Tensor weights, const Experts& e, Tensor out) {
  Op op(*this, "moe_experts");
  if (op) routed_experts(x, nullptr, experts, weights, e, out);
}

// moe_experts' work: out += Σ_k weights[k] * expert_k(x). xb: x in bf16 where the caller has it
// (else the wgmma path converts it). Before anything writes out, join_side(): the shared expert may
// be writing it on the side stream.
void CudaDevice::routed_experts(Tensor x, const kn::bf16_t* xb, IntTensor experts, Tensor weights, const Experts& e, Tensor out) {
  const auto& w1 = cw(*e.w1);
  const auto& w3 = cw(*e.w3);
  const auto& w2 = cw(*e.w2);
  const int64_t n_exp = w1.count, inter = w1.rows, d = x.cols;
  const int k = static_cast<int>(experts.cols);
  const bool f32 = w1.f32 && w3.f32 && w2.f32;
  const bool stored = w1.stored_values && w3.stored_values && w2.stored_values;
  if (!expect((f32 || (w1.b16 && w3.b16 && w2.b16) || stored) && w1.cols == d && w3.count == n_exp && w3.rows == inter && w3.cols == d &&
                  w2.count == n_exp && w2.rows == d && w2.cols == inter && experts.rows == x.rows && weights.rows == x.rows &&
                  weights.cols == k && out.rows == x.rows && out.cols == d && k > 0,
              "moe_experts: x [{}, {}], {} experts of [{}, {}], top {}", x.rows, x.cols, n_exp, inter, w1.cols, k))
    return;
  if (x.rows == 0) return;
  if (stored && native_experts(x, experts, weights, w1, w3, w2, e.limit, out)) return;
  // Stored MXFP4 experts beyond that: the wgmma tiles decode them where they run (fp4), else the stack
  // is dequantized into the temporary arena for this call.
  const bool fp4 = stored && wgmma_ && kn::moe_wgmma_fp4_supported(w1.stored, w3.stored, w2.stored, d, inter);
  const kn::bf16_t* b1 = f32 || fp4 ? nullptr : matrix_bf16(w1, stream_);
  const kn::bf16_t* b3 = f32 || fp4 ? nullptr : matrix_bf16(w3, stream_);
  const kn::bf16_t* b2 = f32 || fp4 ? nullptr : matrix_bf16(w2, stream_);
  if (!f32 && !fp4 && (!b1 || !b3 || !b2)) return;
  if (!f32 && !fp4) {
    kn::GemvExperts g;
    g.experts = experts.data;
    g.weights = weights.data;
    g.top_k = k;
    g.n_exp = static_cast<int>(n_exp);
    g.w1 = b1, g.w3 = b3, g.w2 = b2;
    if (gemv_experts(x, g, inter, e.limit, true, out)) return;  // decode: no permutation
  }
  const int64_t chunk = std::min<int64_t>(x.rows, kMoeChunkRows);
  const int64_t entries_max = chunk * k;
  // Experts averaging 32+ rows (prefill): 128-row tiles read each expert's weights 4x less often.
  // Batch-invariant mode: wgmma's 128-row tiles for every row count where they run (a row's sums do
  // not depend on the tile's other rows), else the mma.sync tiles (either height: the same steps).
  const bool wgmma_shapes = !f32 && d % 128 == 0 && inter % 128 == 0 && wgmma_;
  const int tile_rows = (!f32 && d % 8 == 0 && inter % 8 == 0 && entries_max >= 32 * n_exp) || ((invariant_ || fp4) && wgmma_shapes)
                            ? kn::kMoeBigTileRows
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
  const bool wgmma_fits = wgmma_shapes && tile_rows == kn::kMoeBigTileRows;
  const bool blas_fits = tile_rows == kn::kMoeBigTileRows && mode() == LaunchMode::kEager && !invariant_;
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
    const bool wgmma = wgmma_fits && (invariant_ || fp4 || entries <= kWgmmaMoeMaxRows * n_exp);
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
        if (!blas_experts(Tensor{x.data + r0 * d, nr, d}, ex, plan, n_exp, entries, k, d, inter, e.limit, b1, b3, b2, out.data + r0 * d,
                          weights.data + r0 * k, done))
          return;
        if (done) continue;  // else routing too skewed for slabs: the tile kernels below
      }
      if (!tile_buffers(!wgmma)) return;
      auto* hp = static_cast<kn::bf16_t*>(h);
      if (wgmma) {
        const kn::bf16_t* xs = xb ? xb + r0 * d : activations_bf16(x.data + r0 * d, nr * d);
        if (!xs ||
            !check(fp4 ? kn::moe_gate_up_wgmma_fp4(xs, plan.sources, w1.stored, w3.stored, d, inter, e.limit, plan.tiles, plan.n_tiles,
                                                   tiles, hp, stream_)
                       : kn::moe_gate_up_wgmma(xs, plan.sources, b1, b3, d, inter, e.limit, plan.tiles, plan.n_tiles, tiles, hp, stream_),
                   "moe gate/up"))
          return;
      } else {
        auto* xp = static_cast<kn::bf16_t*>(xperm);
        if (!check(kn::moe_gather(x.data + r0 * d, d, entries, k, plan.pos, xp, stream_), "moe gather") ||
            !check(kn::moe_gate_up(xp, b1, b3, d, inter, e.limit, plan.tiles, plan.n_tiles, tiles, tile_rows, hp, stream_), "moe gate/up"))
          return;
      }
      // The wgmma down product writes y in bf16 (half the bytes written and read back by the combine;
      // the 1.5e-2 tolerance of bf16 products holds).
      y_bf16 = wgmma;
      auto* yb = reinterpret_cast<kn::bf16_t*>(y);
      if (!check(fp4     ? kn::moe_down_wgmma_fp4(hp, w2.stored, inter, d, plan.tiles, plan.n_tiles, tiles, yb, stream_)
                 : wgmma ? kn::moe_down_wgmma(hp, b2, inter, d, plan.tiles, plan.n_tiles, tiles, yb, stream_)
                         : kn::moe_down(hp, b2, inter, d, plan.tiles, plan.n_tiles, tiles, tile_rows, y, stream_),
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
void CudaDevice::moe_ffn(Tensor x, IntTensor experts, Tensor weights, const Experts& routed, const Experts& shared, Tensor out) {
  const auto &w1 = cw(*routed.w1), &w3 = cw(*routed.w3), &w2 = cw(*routed.w2);
  const auto &s1 = cw(*shared.w1), &s3 = cw(*shared.w3), &s2 = cw(*shared.w2);
  const int64_t d = x.cols, inter = w1.rows;
  const int k = static_cast<int>(experts.cols);
  if (!invariant_ && x.rows <= kDecodeRows && w1.b16 && w3.b16 && w2.b16 && s1.b16 && s3.b16 && s2.b16 && routed.limit == shared.limit &&
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
  if ((x.rows > kDecodeRows || invariant_) && s1.has_matrix() && s3.has_matrix() && s2.has_matrix() && s1.rows == s3.rows && s1.cols == d &&
      s3.cols == d && s2.cols == s1.rows && s2.rows == out.cols && out.rows == x.rows) {
    // Prefill: one bf16 copy of x for the shared and the routed experts; the routed sums added to
    // the shared expert's output (no zeroed sum, no add). Eager forwards run the shared expert on the
    // side stream while the routed products (bound by reading the experts) run here.
    Op op(*this, "moe_ffn (routed + shared)");
    if (!op) return;
    const kn::bf16_t* xb = activations_bf16(x.data, x.rows * d);
    if (!xb) return;
    const bool beside = mode() == LaunchMode::kEager;
    if (beside && (!check(cudaEventRecord(fork_event_, stream_.id), "fork") || !check(cudaStreamWaitEvent(side_stream_.id, fork_event_), "fork")))
      return;
    const Lane lane = beside ? Lane{side_stream_, side_blas_, side_blas_ws_} : main_lane();
    const bool shared_ok = shared_expert(lane, xb, x.rows, d, s1, s3, s2, shared.limit, out);
    if (beside) join_pending_ = check(cudaEventRecord(join_event_, side_stream_.id), "join");
    if (shared_ok) routed_experts(x, xb, experts, weights, routed, out);
    join_side();
    return;
  }
  if (w1.stored_values || s1.stored_values) {
    // Decode with weights kept as stored (native_weights): the shared expert writes out, the routed
    // experts add to it (no zeroed sum, no add).
    Op op(*this, "moe_ffn (stored weights)");
    if (!op) return;
    swiglu(x, *shared.w1, *shared.w3, *shared.w2, shared.limit, out);
    if (!failed_) routed_experts(x, nullptr, experts, weights, routed, out);
    return;
  }
  Backend::moe_ffn(x, experts, weights, routed, shared, out);
}

// The clamped SwiGLU MLP (one expert) of xb's rows (bf16, prefill) into out on `lane`: both products
// from xb, the SwiGLU written in bf16 for the last (batch-invariant mode: gate, up and SwiGLU in one
// tile kernel).
bool CudaDevice::shared_expert(const Lane& lane, const kn::bf16_t* xb, int64_t rows, int64_t d, const CudaWeight& w1, const CudaWeight& w3,
                               const CudaWeight& w2, float limit, Tensor out) {
  const int64_t inter = w1.rows;
  if (invariant_) {
    auto* h = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(rows * inter) * 2));
    const kn::bf16_t* b1 = matrix_bf16(w1, lane.stream);
    const kn::bf16_t* b3 = matrix_bf16(w3, lane.stream);
    if (!h || !b1 || !b3) return false;
    const cudaError_t e = wgmma_ && d % 64 == 0 && inter % 64 == 0
                              ? kn::tile_gate_up_wgmma(xb, rows, d, b1, b3, inter, limit, h, lane.stream)
                              : kn::tile_gate_up(xb, rows, d, b1, b3, inter, limit, h, lane.stream);
    return check(e, "shared expert gate/up") && gemm_bf16(lane, h, rows, inter, inter, w2, 0, out.cols, inter, 0, 1, out.data, out.cols);
  }
  auto* g = static_cast<float*>(temp(static_cast<size_t>(rows * inter) * 4));
  auto* u = static_cast<float*>(temp(static_cast<size_t>(rows * inter) * 4));
  auto* hb = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(rows * inter) * 2));
  return g && u && hb && gemm_bf16(lane, xb, rows, d, d, w1, 0, inter, d, 0, 1, g, inter) &&
         gemm_bf16(lane, xb, rows, d, d, w3, 0, inter, d, 0, 1, u, inter) &&
         check(kn::swiglu_bf16(g, u, rows * inter, limit, hb, lane.stream), "swiglu") &&
         gemm_bf16(lane, hb, rows, inter, inter, w2, 0, out.cols, inter, 0, 1, out.data, out.cols);
}

// The main stream waits for the shared expert's side-stream work (moe_ffn), if any is pending.
void CudaDevice::join_side() {
  if (join_pending_) check(cudaStreamWaitEvent(stream_.id, join_event_), "join");
  join_pending_ = false;
}

void CudaDevice::swiglu(Tensor x, const DeviceWeight& w1, const DeviceWeight& w3, const DeviceWeight& w2, float limit, Tensor out) {
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
  }
  if ((x.rows > kDecodeRows || invariant_) && cw(w1).has_matrix() && cw(w3).has_matrix() && cw(w2).has_matrix()) {
    const kn::bf16_t* xb = activations_bf16(x.data, x.rows * x.cols);
    if (xb) shared_expert(main_lane(), xb, x.rows, x.cols, cw(w1), cw(w3), cw(w2), limit, out);
    return;
  }
  Tensor g{static_cast<float*>(temp(static_cast<size_t>(x.rows * inter) * 4)), x.rows, inter};
  Tensor u{static_cast<float*>(temp(static_cast<size_t>(x.rows * inter) * 4)), x.rows, inter};
  if (!g.data || !u.data) return;
  linear(x, w1, g);
  linear(x, w3, u);
  if (failed_ || !check(kn::swiglu(g.data, u.data, x.rows * inter, limit, stream_), "swiglu")) return;
  linear(g, w2, out);
}

// Prefill's expert products through cuBLAS: the host reads the per-expert row counts (one wait
// per MoE layer; eager forwards only) and gives every expert a slab of rows. Experts sorted by
// count form groups of kMoeGroupExperts (64), each with slabs of its largest count rounded up to 32
// rows (its cap): each weight (gate, up, down) is one batched product per group, over pointer
// arrays. (One cap for all experts wasted 25-50% of the products on rows no token fills. Fixed
// group sizes and rounded caps keep the product shapes few: cuBLAS spends ~0.5 ms of host time on
// each shape it has not seen.) `done` false: the routing is too skewed for slabs (the caller runs
// the tile kernels).
bool CudaDevice::blas_experts(Tensor x, const int32_t* experts, const kn::MoePlan& plan, int64_t n_exp, int64_t entries, int k, int64_t d,
                              int64_t inter, float limit, const kn::bf16_t* w1, const kn::bf16_t* w3, const kn::bf16_t* w2, float* out_rows,
                              const float* weights, bool& done) {
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
      const void* p[9] = {w1 + e * inter * d, xp + row * d,    g + row * inter,  // gate
                          w3 + e * inter * d, xp + row * d,    u + row * inter,  // up
                          w2 + e * d * inter, h + row * inter, y + row * d};     // down
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
bool CudaDevice::gemv_experts(Tensor x, const kn::GemvExperts& g, int64_t inter, float limit, bool accumulate, Tensor out) {
  const int64_t d = x.cols, entries = x.rows * g.per_row();
  if (invariant_ || x.rows > kDecodeRows || kn::expert_down_counters(x.rows, d) > kRouteCounter || entries > 65535 ||
      !kn::gemv_supported(x.data, d, g.w1, d) || !kn::gemv_supported(x.data, d, g.w2, inter))
    return false;
  auto* h = static_cast<float*>(temp(static_cast<size_t>(entries * inter) * 4));
  auto* part = static_cast<float*>(temp(static_cast<size_t>(entries * d) * 4));
  if (!h || !part) return true;  // (failed: the error is kept)
  if (check(kn::expert_gate_up(x.data, d, x.rows, g, inter, limit, h, stream_), "expert gate/up (GEMV)"))
    check(kn::expert_down(h, inter, x.rows, g, d, accumulate, out.data, part, counters_, stream_), "expert down (GEMV)");
  return true;
}

// Decode rows against experts kept as stored (native_weights): for each (row, expert) pair the gate
// and up products (kernels/native_gemv.h, expert ids read on the device), the SwiGLU, the down
// product, then each row's weighted sum in a fixed order. False (nothing launched) where the pairs
// are too many (the caller's prefill paths) or the kernels do not take the shapes.
bool CudaDevice::native_experts(Tensor x, IntTensor experts, Tensor weights, const CudaWeight& w1, const CudaWeight& w3,
                                const CudaWeight& w2, float limit, Tensor out) {
  const int64_t n_exp = w1.count, inter = w1.rows, d = x.cols, pairs = x.rows * experts.cols;
  const int k = static_cast<int>(experts.cols);
  if (invariant_ || pairs > kNativePairsPerExpert * n_exp || pairs > 65535 ||
      !kn::native_gemv_supported(w1.stored, w1.stored_format, x.data, d) ||
      !kn::native_gemv_supported(w3.stored, w3.stored_format, x.data, d))
    return false;
  auto* g = static_cast<float*>(temp(static_cast<size_t>(pairs * inter) * 4));
  auto* u = static_cast<float*>(temp(static_cast<size_t>(pairs * inter) * 4));
  auto* y = static_cast<float*>(temp(static_cast<size_t>(pairs * d) * 4));
  if (!g || !u || !y) return true;  // (failed: the error is kept)
  if (!kn::native_gemv_supported(w2.stored, w2.stored_format, g, inter)) return false;  // (g: the arena's alignment)
  if (check(kn::native_expert_gemv(x.data, d, experts.data, pairs, k, w1.stored, n_exp, w1.stored_format, g, inter, stream_),
            "expert gate (native)") &&
      check(kn::native_expert_gemv(x.data, d, experts.data, pairs, k, w3.stored, n_exp, w3.stored_format, u, inter, stream_),
            "expert up (native)") &&
      check(kn::swiglu(g, u, pairs * inter, limit, stream_), "expert swiglu") &&
      check(kn::native_expert_gemv(g, inter, experts.data, pairs, 1, w2.stored, n_exp, w2.stored_format, y, d, stream_),
            "expert down (native)")) {
    join_side();
    check(kn::moe_combine(y, nullptr, weights.data, x.rows, k, d, out.data, stream_), "expert combine");
  }
  return true;
}

}  // namespace deepinfer
