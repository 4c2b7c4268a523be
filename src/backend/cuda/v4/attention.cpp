// The attention of DeepSeek-V4 on the CUDA backend: one shared K=V head per layer, per-head sinks, the
// sliding window and the compressed entries (kernels/attention*.cu, kernels/key_table.cu). Head
// dim 512 in bf16 mode runs on the tensor cores: prefill on wgmma from a bf16 key table (an sm_90a
// device, eager forwards, tables not much larger than the batch), else mma.sync (decode in blocks of
// 16 heads, prefill of 64); the fp32 kernel serves fp32 mode and other head dims. Prefill keeps the
// attention's output in bf16 through wo_a into wo_b (attention_projected), and its query in bf16
// with the norm + rope left to the wgmma kernel (CudaDevice::AttentionQuery).
#include "backend/cuda/v4/cuda_v4_backend.h"
#include "attention.h"
#include "elementwise.h"
#include "key_table.h"
#include "norm_rope.h"

#include <algorithm>

namespace deepinfer {
namespace {

// Attention splits a small batch's keys until about this many blocks run.
constexpr int64_t kAttnBlocks = 1024;
constexpr int64_t kSmCount = 132;  // H100 SXM / H200; only sizes key splits

}  // namespace

// A prefill query that only the wgmma attention will read is kept in bf16 (written so by its
// product and by the norm + rope): half the bytes written and read twice (2 GB a layer at 8192 rows).
Tensor CudaV4Backend::attention_query(int layer, int64_t rows, int64_t cols) {
  Tensor q = scratch_uninit(rows, cols);
  query_.norm = {};
  if (q.data && fused_attention_fits(layer, rows, cols) && wgmma_table_rows(layer, rows).first >= 0) query_.data = q.data;
  return q;
}

void CudaV4Backend::attention(int layer, Tensor q, Tensor kv, const DeviceWeight& sinks, const IntTensor* selected, Tensor out,
                              const Rope* unrope) {
  Op op(*this, "attention");
  if (!op || !layer_ok(layer) || !(q = query_f32(q)).data) return;
  const LayerStateLayout& L = layout_.layers[layer];
  const int hd = L.head_dim;
  if (!expect(hd > 0 && hd <= 512 && q.cols % hd == 0 && kv.cols == hd && q.rows == fwd_.dev.rows && kv.rows == q.rows &&
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
    // Batch-invariant mode: 64-head blocks and one share for every row (the 16-head kernel's sums and
    // the shares' merge differ from it; both were chosen by the batch shape).
    const int head_tile = q.rows <= kDecodeRows && !invariant_ ? 16 : 64;
    const int splits = invariant_ ? 1 : mqa_splits(q.rows, heads, head_tile);
    float* part = nullptr;
    if (splits > 1) {
      part = static_cast<float*>(temp(static_cast<size_t>(q.rows * heads * splits * (hd + 2)) * 4));
      if (!part) return;
    }
    check(kn::attention_mqa(q.data, kv.data, sk, sel ? selected->data : nullptr, sel ? selected->cols : 0, heads, fwd_.dev, state_,
                            layers_[layer], out.data, stream_, splits, part, un, head_tile),
          "attention (tensor cores)");
    return;
  }
  // Small batches: share each (row, head)'s keys among up to 16 blocks so that ~1024 blocks run.
  const int64_t rh = q.rows * heads;
  const int splits = rh < kAttnBlocks && !invariant_ ? static_cast<int>(std::min<int64_t>(16, kAttnBlocks / rh)) : 1;
  float* part = nullptr;
  if (splits > 1) {
    part = static_cast<float*>(temp(static_cast<size_t>(rh * splits * (hd + 2)) * 4));
    if (!part) return;
  }
  check(kn::attention(q.data, kv.data, sk, sel ? selected->data : nullptr, sel ? selected->cols : 0, heads, fwd_.dev, state_,
                      layers_[layer], out.data, stream_, splits, part, un),
        "attention");
}

// Key shares of the tensor-core attention for rows x heads in blocks of head_tile heads.
int CudaV4Backend::mqa_splits(int64_t rows, int heads, int head_tile) {
  const int64_t blocks = rows * ((heads + head_tile - 1) / head_tile);
  return static_cast<int>(std::clamp<int64_t>((2 * kSmCount) / std::max<int64_t>(blocks, 1), 1, 16));
}

// (a query kept in bf16 by attention_query reaching an fp32 kernel) q in fp32 in the temporaries;
// the query is consumed. Null data: the error kept.
Tensor CudaV4Backend::query_f32(Tensor q) {
  if (!q.data || q.data != query_.data) return q;
  if (!apply_query_norm(q)) return Tensor{nullptr, q.rows, q.cols};
  query_.data = nullptr;
  Tensor f{static_cast<float*>(temp(static_cast<size_t>(q.rows * q.cols) * 4)), q.rows, q.cols};
  if (f.data && !check(kn::bf16_to_f32(reinterpret_cast<const kn::bf16_t*>(q.data), f.data, q.rows * q.cols, stream_), "query to fp32"))
    f.data = nullptr;
  return f;
}

// The bf16 query's norm (no weight) + rope left to the wgmma attention, which applies it as it loads
// the query (one pass over it fewer). False: not deferred (the caller normalises now).
bool CudaV4Backend::defer_query_norm(const DeviceWeight* weight, float eps, int head_dim, const kn::RopeDev& r) {
  if (weight || head_dim != kMqaHd || eps < 0.0f || r.rope_dim > 64) return false;
  query_.norm = {eps, r};
  return true;
}

// A deferred query norm applied now (to a query some other kernel reads). False: the error kept.
bool CudaV4Backend::apply_query_norm(Tensor q) {
  if (query_.norm.eps < 0.0f) return true;
  const kn::QueryNorm qn = query_.norm;
  query_.norm = {};
  return check(kn::rms_norm_pair(kn::NormTensor{q.data, nullptr, q.cols, q.data, true}, kn::NormTensor{}, qn.eps, q.rows, kMqaHd, stream_,
                                 &qn.rope, fwd_.dev.positions),
               "query rms_norm + rope");
}

// attention_projected's fused path (below) for a query of rows x cols, as far as the query decides it.
bool CudaV4Backend::fused_attention_fits(int layer, int64_t rows, int64_t cols) const {
  return !fp32_ && !invariant_ && layer >= 0 && layer < static_cast<int>(layout_.layers.size()) &&
         layout_.layers[layer].head_dim == kMqaHd && kn::attention_mqa_supported(state_, layers_[layer]) && rows > kDecodeRows &&
         cols % kMqaHd == 0 && mqa_splits(rows, static_cast<int>(cols / kMqaHd), 64) == 1;
}

// The rows of the wgmma attention's key table for layer's forward and the longest sequence's
// share, or {-1, 0} where the wgmma kernel does not apply: the table would be large next to the
// batch (long contexts with few new rows each), no sm_90a device, or a graph capture (the table's
// size comes from the host's positions, which a replay would not update).
std::pair<int64_t, int64_t> CudaV4Backend::wgmma_table_rows(int layer, int64_t rows) const {
  if (!wgmma_ || invariant_ || mode() != LaunchMode::kEager || fwd_.seq_steps.size() > 65535) return {-1, 0};
  const auto extent = key_table_extent(layers_[layer], kn::KeyTableKind::kAttention);
  if (extent.first > 2 * rows + 8192) return {-1, 0};
  return extent;
}

// Rows of a key table of kind `kind` for this forward's sequences, and the longest sequence's share.
std::pair<int64_t, int64_t> CudaV4Backend::key_table_extent(const kn::LayerDev& L, kn::KeyTableKind kind) const {
  int64_t rows = 0, longest = 0;
  for (const auto& [n_past, n_tokens] : fwd_.seq_steps) {
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
void CudaV4Backend::attention_projected(int layer, Tensor q, Tensor kv, const DeviceWeight& sinks, const IntTensor* selected,
                                        const Rope* unrope, const DeviceWeight& wo_a, int groups, const DeviceWeight& wo_b, Tensor out) {
  const CudaWeight& wa = cw(wo_a);
  const CudaWeight& wb = cw(wo_b);
  const int heads = static_cast<int>(q.cols / kMqaHd);
  // (weights kept as stored: their bf16 matrices made per call, gemm_bf16's matrix_bf16)
  const bool fused = fused_attention_fits(layer, q.rows, q.cols) && wa.has_matrix() && wa.count == 1 && groups > 0 &&
                     q.cols % groups == 0 && wa.rows % groups == 0 && wa.cols == q.cols / groups && wb.has_matrix() && wb.count == 1 &&
                     wb.cols == wa.rows && out.rows == q.rows && out.cols == wb.rows;
  if (!fused)  // (attention converts a bf16 query)
    return Backend::attention_projected(layer, q, kv, sinks, selected, unrope, wo_a, groups, wo_b, out);
  Op op(*this, "attention + wo_a + wo_b (bf16 between)");
  if (!op) return;
  const LayerStateLayout& L = layout_.layers[layer];
  if (!expect(kv.cols == kMqaHd && q.rows == fwd_.dev.rows && kv.rows == q.rows && sinks.rows * sinks.cols == heads &&
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
        !check(kn::attention_mqa(q.data, kv.data, sk, sel ? selected->data : nullptr, sel ? selected->cols : 0, heads, fwd_.dev, state_,
                                 layers_[layer], nullptr, stream_, 1, nullptr, un, 64, ob),
               "attention (tensor cores, bf16 output)"))
      return;
  }
  const int64_t k = q.cols / groups, n = wa.rows / groups;
  (void)(gemm_bf16(main_lane(), ob, q.rows, k, q.cols, wa, 0, n, k, n * k, groups, reinterpret_cast<float*>(gb), wa.rows, true) &&
         gemm_bf16(main_lane(), gb, q.rows, wa.rows, wa.rows, wb, 0, wb.rows, wb.cols, 0, 1, out.data, out.cols));
}

// The prefill attention on Hopper's warpgroup MMA (kernels::attention_wgmma) into ob, from a bf16
// key table of the forward's sequences: their rings and compressed entries, converted once
// (each key is then read by every row that attends to it, in half the bytes). The query is read
// in bf16 where attention_query kept it so (and consumed). False (nothing launched) where
// wgmma_table_rows says it does not apply; true with the error kept where a launch failed.
bool CudaV4Backend::wgmma_attention(int layer, Tensor q, Tensor kv, const float* sinks, const IntTensor* selected, int heads,
                                    kn::RopeDev un, kn::bf16_t* ob) {
  const auto [table, longest] = wgmma_table_rows(layer, q.rows);
  if (table < 0) return false;
  const bool query_bf16 = q.data == query_.data;
  const kn::QueryNorm qn = query_bf16 ? query_.norm : kn::QueryNorm{};
  query_.data = nullptr;
  query_.norm = {};
  const kn::LayerDev& L = layers_[layer];
  auto* kvb = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(kv.rows * kv.cols) * 2));
  auto* rows = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(std::max<int64_t>(table, 1) * kv.cols) * 2));
  auto* first = static_cast<int32_t*>(temp(fwd_.seq_steps.size() * 4));
  if (!kvb || !rows || !first) return true;
  const kn::KeyTableDev t{kvb, rows, first};
  (void)(check(kn::f32_to_bf16(kv.data, kvb, kv.rows * kv.cols, stream_), "attention keys to bf16") &&
         check(kn::key_table_build(fwd_.dev, state_, L, kn::KeyTableKind::kAttention, longest, rows, first, stream_), "attention key table") &&
         check(kn::attention_wgmma(query_bf16 ? nullptr : q.data, query_bf16 ? reinterpret_cast<const kn::bf16_t*>(q.data) : nullptr, t,
                                   sinks, selected ? selected->data : nullptr, selected ? selected->cols : 0, heads, fwd_.dev, state_, L,
                                   ob, un, qn, stream_),
               "attention (wgmma)"));
  return true;
}

}  // namespace deepinfer
