// Compressors and the sliding window: each closing window of the step pooled (softmax over the window
// of gate + position bias, weighted sum of kv) into one normalised, rotated entry (long windows in
// runs by more blocks, then merged), the compressor rings of the next windows, the window rings.
#include "common.cuh"

#include <algorithm>

namespace deepinfer::kernels {
namespace {

// A closing window's slots: slot k's position and the channel offset of its value / gate logit.
// With overlap (CSA) the previous window's first half joins: slots 0..rate-1 are those, then this
// window's second half.
struct PoolWindow {
  const float *kv, *gate, *ape, *ring;
  SeqInfo sq;
  int w, rate, width, ring_rows, half, n_slots;
  bool prev;

  __device__ PoolWindow(const float* kv_, const float* gate_, const float* ape_, bool indexer, const CompressJob& job, const BatchDev& b,
                        const StateDev& st, const LayerDev& L)
      : kv(kv_), gate(gate_), ape(ape_), sq(b.seqs[job.seq]), w(job.w), rate(L.rate) {
    const int dim = indexer ? L.index_dim : L.head_dim;
    width = indexer ? 2 * L.index_dim : (L.overlap ? 2 * L.head_dim : L.head_dim);
    ring_rows = L.overlap ? 2 * rate : rate;
    ring = st.slots + static_cast<int64_t>(sq.slot) * st.slot_floats + (indexer ? L.index_ring_offset : L.ring_offset);
    prev = L.overlap && w > 0;
    half = L.overlap ? dim : 0;
    n_slots = (prev ? rate : 0) + rate;
  }
  __device__ void fetch(int k, int ch, float& v, float& g) const {
    int q, off;
    if (prev && k < rate) {
      q = (w - 1) * rate + k;
      off = 0;
    } else {
      q = w * rate + (prev ? k - rate : k);
      off = half;
    }
    if (q >= sq.n_past) {
      const int64_t row = sq.first_row + (q - sq.n_past);
      v = kv[row * width + off + ch];
      g = gate[row * width + off + ch] + ape[static_cast<int64_t>(q % rate) * width + off + ch];
    } else {
      const float* rr = ring + static_cast<int64_t>(q % ring_rows) * 2 * width;
      v = rr[off + ch];
      g = rr[width + off + ch];
    }
  }
  // Channel ch over slots [k0, k1): the largest gate logit, the sum of exp(logit - it) and of
  // value * exp(logit - it). Two passes (the max, then the sums); the loads of a pass do not depend
  // on each other, so they are in flight together.
  __device__ void pool(int k0, int k1, int ch, float& mx, float& sum, float& acc) const {
    float v, g;
    mx = -INFINITY;
#pragma unroll 8
    for (int k = k0; k < k1; ++k) {
      fetch(k, ch, v, g);
      mx = fmaxf(mx, g);
    }
    sum = 0.0f;
    acc = 0.0f;
#pragma unroll 8
    for (int k = k0; k < k1; ++k) {
      fetch(k, ch, v, g);
      const float e = expf(g - mx);
      sum += e;
      acc += v * e;
    }
  }
};

// Long windows (HCA's 128 slots) in two launches: a block per (window, run of slots) writes each
// channel's max, sum and weighted sum of its run to part[window][run][3][dim] (one block a window
// walked 128 slots a thread, on 32 multiprocessors: 159 us a 4096-token layer), then compress_entry_kernel
// merges the runs.
__global__ void compress_runs_kernel(const float* __restrict__ kv, const float* __restrict__ gate, const float* __restrict__ ape,
                                     bool indexer, const CompressJob* __restrict__ jobs, const int32_t* __restrict__ n_jobs,
                                     BatchDev b, StateDev st, LayerDev L, int run, float* __restrict__ part) {
  pdl_begin();
  if (static_cast<int>(blockIdx.x) >= *n_jobs) return;
  const PoolWindow pw(kv, gate, ape, indexer, jobs[blockIdx.x], b, st, L);
  const int dim = indexer ? L.index_dim : L.head_dim;
  const int k0 = static_cast<int>(blockIdx.y) * run, k1 = min(pw.n_slots, k0 + run);
  float* p = part + (static_cast<int64_t>(blockIdx.x) * gridDim.y + blockIdx.y) * 3 * dim;
  for (int ch = threadIdx.x; ch < dim; ch += blockDim.x) {
    float mx, sum, acc;
    pw.pool(k0, k1, ch, mx, sum, acc);  // (an empty run: -inf, 0, 0)
    p[ch] = mx;
    p[dim + ch] = sum;
    p[2 * dim + ch] = acc;
  }
}

// One block per closing window, a thread per channel (or several channels per thread): the window's
// slots pooled here (part null) or the runs compress_runs_kernel pooled merged, then the entry
// normalised, rotated and stored.
__global__ void compress_entry_kernel(const float* __restrict__ kv, const float* __restrict__ gate, const float* __restrict__ ape,
                                      const float* __restrict__ part, int runs, const float* __restrict__ norm, float norm_eps,
                                      RopeDev rope, bool indexer, const CompressJob* __restrict__ jobs, const int32_t* __restrict__ n_jobs,
                                      BatchDev b, StateDev st, LayerDev L) {
  pdl_begin();
  extern __shared__ float entry[];
  __shared__ float red[32];
  if (static_cast<int>(blockIdx.x) >= *n_jobs) return;
  const PoolWindow pw(kv, gate, ape, indexer, jobs[blockIdx.x], b, st, L);
  const int dim = indexer ? L.index_dim : L.head_dim;
  const float* p = part ? part + static_cast<int64_t>(blockIdx.x) * runs * 3 * dim : nullptr;
  float ss = 0.0f;
  for (int ch = threadIdx.x; ch < dim; ch += blockDim.x) {
    float mx, sum, acc;
    if (!p) {
      pw.pool(0, pw.n_slots, ch, mx, sum, acc);
    } else {
      mx = -INFINITY;
      for (int i = 0; i < runs; ++i) mx = fmaxf(mx, p[i * 3 * dim + ch]);
      sum = 0.0f;
      acc = 0.0f;
      for (int i = 0; i < runs; ++i) {
        const float m = p[i * 3 * dim + ch];
        if (m == -INFINITY) continue;  // an empty run
        const float scale = expf(m - mx);
        sum += p[(i * 3 + 1) * dim + ch] * scale;
        acc += p[(i * 3 + 2) * dim + ch] * scale;
      }
    }
    entry[ch] = acc / sum;
    ss += entry[ch] * entry[ch];
  }
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + norm_eps);
  for (int ch = threadIdx.x; ch < dim; ch += blockDim.x) entry[ch] = norm[ch] * (entry[ch] * inv);
  __syncthreads();
  rotate_pairs(entry, dim, rope, pw.w * pw.rate, false, threadIdx.x, blockDim.x);
  __syncthreads();
  float* dst = const_cast<float*>(entry_ptr(b, st, L, pw.sq, pw.w, indexer ? L.index_key_offset : L.entry_offset, dim));
  if (!dst) return;
  for (int ch = threadIdx.x; ch < dim; ch += blockDim.x) dst[ch] = entry[ch];
}

// The most slots a closing window pools: two windows' halves when overlapping (CSA), else one.
int window_slots(const LayerDev& L) { return (L.overlap ? 2 : 1) * L.rate; }

// One block per batch row.
__global__ void compress_ring_kernel(const float* __restrict__ kv, const float* __restrict__ gate, const float* __restrict__ ape,
                                     bool indexer, BatchDev b, StateDev st, LayerDev L) {
  pdl_begin();
  const int64_t r = blockIdx.x;
  const SeqInfo sq = b.seqs[b.row_seq[r]];
  const int32_t i = static_cast<int32_t>(r) - sq.first_row;
  const int rate = L.rate, ring_rows = L.overlap ? 2 * rate : rate;
  if (i < sq.n_tokens - ring_rows) return;  // overwritten later in this step
  const int width = indexer ? 2 * L.index_dim : (L.overlap ? 2 * L.head_dim : L.head_dim);
  const int32_t q = sq.n_past + i;
  float* rr = st.slots + static_cast<int64_t>(sq.slot) * st.slot_floats + (indexer ? L.index_ring_offset : L.ring_offset) +
              static_cast<int64_t>(q % ring_rows) * 2 * width;
  const float* a = ape + static_cast<int64_t>(q % rate) * width;
  for (int ch = threadIdx.x; ch < width; ch += blockDim.x) {
    rr[ch] = kv[r * width + ch];
    rr[width + ch] = gate[r * width + ch] + a[ch];
  }
}

__global__ void window_kernel(const float* __restrict__ kv, BatchDev b, StateDev st, LayerDev L) {
  pdl_begin();
  const int64_t r = blockIdx.x;
  const SeqInfo sq = b.seqs[b.row_seq[r]];
  const int32_t i = static_cast<int32_t>(r) - sq.first_row;
  if (i < sq.n_tokens - L.window) return;
  const int hd = L.head_dim;
  float* dst = st.slots + static_cast<int64_t>(sq.slot) * st.slot_floats + L.window_offset +
               static_cast<int64_t>((sq.n_past + i) % L.window) * hd;
  for (int c = threadIdx.x; c < hd; c += blockDim.x) dst[c] = kv[r * hd + c];
}

}  // namespace

cudaError_t compress_pool(const float* kv, const float* gate, const float* ape, const float* norm, float norm_eps,
                          RopeDev rope, bool indexer, const CompressJob* jobs, const int32_t* n_jobs, int max_jobs,
                          BatchDev b, StateDev st, LayerDev L, float* part, Stream s) {
  if (max_jobs <= 0) return cudaSuccess;
  const int dim = indexer ? L.index_dim : L.head_dim;
  // A thread per channel (up to 512): each walks its channel's slots (or its run of them).
  const int threads = std::clamp((dim + 31) / 32 * 32, 128, 512);
  const int runs = part ? compress_pool_runs(L) : 1;
  if (runs > 1)
    launch(compress_runs_kernel, dim3(static_cast<unsigned>(max_jobs), static_cast<unsigned>(runs)), threads, 0, s)(
        kv, gate, ape, indexer, jobs, n_jobs, b, st, L, (window_slots(L) + runs - 1) / runs, part);
  launch(compress_entry_kernel, max_jobs, threads, dim * sizeof(float), s)(kv, gate, ape, runs > 1 ? part : nullptr, runs, norm, norm_eps,
                                                                      rope, indexer, jobs, n_jobs, b, st, L);
  return cudaGetLastError();
}

int compress_pool_runs(const LayerDev& L) { return std::max(1, window_slots(L) / kCompressRunSlots); }

cudaError_t compress_ring_write(const float* kv, const float* gate, const float* ape, bool indexer, BatchDev b,
                                StateDev st, LayerDev L, Stream s) {
  if (b.rows <= 0) return cudaSuccess;
  launch(compress_ring_kernel, b.rows, 128, 0, s)(kv, gate, ape, indexer, b, st, L);
  return cudaGetLastError();
}

cudaError_t window_write(const float* kv, BatchDev b, StateDev st, LayerDev L, Stream s) {
  if (b.rows <= 0 || L.window <= 0) return cudaSuccess;
  launch(window_kernel, b.rows, 128, 0, s)(kv, b, st, L);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
