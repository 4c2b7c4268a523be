// Compressors and the sliding window (compressor.cu).
#pragma once

#include "launch.h"

namespace deepinfer::kernels {

// Pools each closing window of `jobs` into one normalised, rotated entry (reads this step's kv/gate
// rows and the ring of earlier steps). Run before compress_ring_write of the same step.
// Launches max_jobs blocks; those at or past *n_jobs (device) do nothing, so that a captured graph
// serves steps with any number of closing windows up to max_jobs. With `part` (max_jobs x
// compress_pool_runs(L) x 3 x dim floats; null: one launch) windows of more than kCompressRunSlots
// slots are pooled in runs of that many by more blocks, then merged.
cudaError_t compress_pool(const float* kv, const float* gate, const float* ape, const float* norm, float norm_eps,
                          RopeDev rope, bool indexer, const CompressJob* jobs, const int32_t* n_jobs, int max_jobs,
                          BatchDev b, StateDev st, LayerDev L, float* part, Stream s);
constexpr int kCompressRunSlots = 8;
int compress_pool_runs(const LayerDev& L);
// Stores this step's last ring_rows kv | gate+ape rows into each sequence's compressor ring.
cudaError_t compress_ring_write(const float* kv, const float* gate, const float* ape, bool indexer, BatchDev b,
                                StateDev st, LayerDev L, Stream s);
// Appends this step's kv rows to each sequence's sliding-window ring.
cudaError_t window_write(const float* kv, BatchDev b, StateDev st, LayerDev L, Stream s);

}  // namespace deepinfer::kernels
