// The compressors and the sliding window of DeepSeek-V4 on the CUDA backend (kernels/compressor.cu):
// each closing window of a step pooled into one normalised, rotated entry (long windows in runs by
// more blocks in eager forwards, one launch in a graph capture), the rings of the next windows, and
// the window ring of each sequence.
#include "backend/cuda/v4/cuda_v4_backend.h"
#include "compressor.h"

namespace deepinfer {

void CudaV4Backend::compress(int layer, Tensor kv, Tensor gate, const Compressor& c) {
  Op op(*this, "compress");
  if (!op || !layer_ok(layer)) return;
  const LayerStateLayout& L = layout_.layers[layer];
  const int width = c.indexer ? L.index_width() : L.width();
  if (!expect(L.rate > 0 && (!c.indexer || L.index_dim > 0) && kv.cols == width && gate.cols == width && kv.rows == fwd_.dev.rows &&
                  gate.rows == fwd_.dev.rows && c.ape->rows == L.rate && c.ape->cols == width,
              "compress: layer {} (rate {}) with kv [{}, {}], gate [{}, {}]", layer, L.rate, kv.rows, kv.cols, gate.rows, gate.cols))
    return;
  const float* ape = fvec(*c.ape, "compressor ape");
  const float* norm = fvec(*c.norm, "compressor norm");
  kn::RopeDev r = rope_dev(c.rope);
  if (!ape || !norm || !r.inv_freq) return;
  const CompressJobs& jobs = fwd_.jobs_by_rate[L.rate];
  // Long windows pooled by more blocks (eager forwards: the partials are temporaries). Not in
  // batch-invariant mode: runs merge their sums in another order than one block does, and a
  // captured step pools in one block.
  const int runs = kn::compress_pool_runs(layers_[layer]);
  float* part = nullptr;
  if (runs > 1 && mode() == LaunchMode::kEager && !invariant_ &&
      !(part = static_cast<float*>(temp(static_cast<size_t>(jobs.capacity) * runs * 3 * (c.indexer ? L.index_dim : L.head_dim) * 4))))
    return;
  if (!check(kn::compress_pool(kv.data, gate.data, ape, norm, c.norm_eps, r, c.indexer, jobs.jobs, jobs.count, jobs.capacity, fwd_.dev,
                               state_, layers_[layer], part, stream_),
             "compress pool"))
    return;
  check(kn::compress_ring_write(kv.data, gate.data, ape, c.indexer, fwd_.dev, state_, layers_[layer], stream_), "compress ring");
}

void CudaV4Backend::window_update(int layer, Tensor kv) {
  Op op(*this, "window_update");
  if (!op || !layer_ok(layer)) return;
  const LayerStateLayout& L = layout_.layers[layer];
  if (!expect(kv.cols == L.head_dim && kv.rows == fwd_.dev.rows, "window_update: layer {} with kv [{}, {}]", layer, kv.rows, kv.cols))
    return;
  check(kn::window_write(kv.data, fwd_.dev, state_, layers_[layer], stream_), "window_update");
}

}  // namespace deepinfer
