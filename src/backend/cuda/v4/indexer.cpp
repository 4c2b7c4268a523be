// The lightning indexer of DeepSeek-V4 on the CUDA backend (kernels/indexer*.cu): each row's scores
// over its visible index keys (prefill rows on wgmma from a bf16 key table on an sm_90a device,
// mma.sync for other rows and devices, fp32 in fp32 mode and for shapes the tensor-core kernels do
// not take), then the top k by a radix select (kernels::topk_rows).
#include "backend/cuda/v4/cuda_v4_backend.h"
#include "indexer.h"
#include "key_table.h"

#include <algorithm>

namespace deepinfer {
namespace {

// Scores of the indexer are computed for row chunks of at most this many floats.
constexpr int64_t kIndexerScoreFloats = int64_t(64) << 20;

}  // namespace

void CudaV4Backend::indexer_topk(int layer, Tensor q, Tensor weights, int heads, IntTensor out) {
  Op op(*this, "indexer_topk");
  if (!op || !layer_ok(layer)) return;
  const LayerStateLayout& L = layout_.layers[layer];
  if (!expect(L.rate > 0 && L.index_dim > 0 && heads > 0 && q.cols == static_cast<int64_t>(heads) * L.index_dim &&
                  weights.cols == heads && q.rows == fwd_.dev.rows && out.rows == q.rows && out.cols > 0 && out.cols <= 4096,
              "indexer_topk: layer {} with q [{}, {}], {} heads, top {}", layer, q.rows, q.cols, heads, out.cols))
    return;
  const int64_t max_visible = std::max<int64_t>(1, fwd_.pos_bound / L.rate);
  const bool tensor_cores = !fp32_ && kn::indexer_scores_mqa_supported(heads, state_, layers_[layer]) &&
                            reinterpret_cast<uintptr_t>(q.data) % 16 == 0;
  const int64_t chunk = std::max<int64_t>(1, kIndexerScoreFloats / max_visible);
  float* scores = static_cast<float*>(temp(static_cast<size_t>(std::min(chunk, q.rows) * max_visible) * 4));
  if (!scores) return;
  kn::KeyTableDev table;
  const bool wgmma = tensor_cores && !invariant_ && q.rows >= 64 && fwd_.dev.rows >= 4 * static_cast<int64_t>(fwd_.dev.n_seqs) &&
                     index_key_table(layer, heads, table);
  if (failed_) return;
  for (int64_t r0 = 0; r0 < q.rows; r0 += chunk) {
    const int64_t nr = std::min(chunk, q.rows - r0);
    const cudaError_t e =
        wgmma          ? kn::indexer_scores_wgmma(q.data, weights.data, heads, r0, nr, max_visible, fwd_.dev, layers_[layer], table, scores,
                                                  max_visible, stream_)
        : tensor_cores ? kn::indexer_scores_mqa(q.data, weights.data, heads, r0, nr, max_visible, fwd_.dev, state_, layers_[layer], scores,
                                                max_visible, stream_)
                       : kn::indexer_scores(q.data, weights.data, heads, r0, nr, max_visible, fwd_.dev, state_, layers_[layer], scores,
                                            max_visible, stream_);
    if (!check(e, "indexer scores")) return;
    if (!check(kn::topk_rows(scores, max_visible, r0, nr, L.rate, fwd_.dev, static_cast<int>(out.cols), out.data, stream_), "indexer top-k"))
      return;
  }
}

// The forward's index keys of layer `layer` as a bf16 table for kernels::indexer_scores_wgmma (prefill
// rows; eager forwards: the table is sized from the host's positions). False where it does not apply
// (or on a failure, which is kept).
bool CudaV4Backend::index_key_table(int layer, int heads, kn::KeyTableDev& t) {
  const kn::LayerDev& L = layers_[layer];
  if (!wgmma_ || mode() != LaunchMode::kEager || fwd_.seq_steps.size() > 65535 || !kn::indexer_scores_wgmma_supported(heads, L)) return false;
  const auto [rows, longest] = key_table_extent(L, kn::KeyTableKind::kIndexer);
  auto* table = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(std::max<int64_t>(rows, 1) * L.index_dim) * 2));
  auto* first = static_cast<int32_t*>(temp(fwd_.seq_steps.size() * 4));
  if (!table || !first) return false;
  t = kn::KeyTableDev{nullptr, table, first};
  return check(kn::key_table_build(fwd_.dev, state_, L, kn::KeyTableKind::kIndexer, longest, table, first, stream_), "index key table");
}

}  // namespace deepinfer
