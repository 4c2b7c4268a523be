// Kernels that read or write model state: compressor pooling and rings, the sliding window,
// attention over window + compressed entries, the lightning indexer's scores and top-k.
#include "common.cuh"

#include <algorithm>

#include <cfloat>

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

constexpr int kAttnWarps = 4;

// One block per (row, head); each warp runs an online softmax over a share of the keys, then the
// warps merge with the sink. kChunks * 32 >= head_dim.
template <int kChunks>
__global__ void __launch_bounds__(kAttnWarps * 32) attention_kernel(const float* __restrict__ q, const float* __restrict__ kv,
                                                                    const float* __restrict__ sinks,
                                                                    const int32_t* __restrict__ selected, int64_t sel_cols,
                                                                    int heads, BatchDev b, StateDev st, LayerDev L,
                                                                    float* __restrict__ out, int n_splits,
                                                                    float* __restrict__ part) {
  pdl_begin();
  extern __shared__ float smem[];
  const int hd = L.head_dim;
  float* qs = smem;                       // [hd]
  float* accs = smem + hd;                // [warps][hd]
  float* ms = accs + kAttnWarps * hd;     // [warps]
  float* ls = ms + kAttnWarps;            // [warps]
  const int split = static_cast<int>(blockIdx.x % n_splits);
  const int64_t rh = blockIdx.x / n_splits;
  const int64_t r = rh / heads;
  const int h = static_cast<int>(rh % heads);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* qrow = q + (r * heads + h) * hd;
  for (int c = threadIdx.x; c < hd; c += blockDim.x) qs[c] = qrow[c];
  __syncthreads();

  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  const AttentionKeys keys(b, st, L, kv, selected, sel_cols, r);

  float acc[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) acc[c] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  // With n_splits > 1 this block takes one contiguous share of the keys.
  int64_t j_begin, j_end;
  keys.share(split, n_splits, j_begin, j_end);
  for (int64_t j = j_begin + warp; j < j_end; j += kAttnWarps) {
    const float* key = keys.key(j, b, st, L);
    if (!key) continue;
    float kr[kChunks];
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int ch = c * 32 + lane;
      kr[c] = ch < hd ? key[ch] : 0.0f;
      dot += (ch < hd ? qs[ch] : 0.0f) * kr[c];
    }
    dot = warp_sum(dot);
    const float logit = dot * scale;
    const float m_new = fmaxf(m, logit);
    const float corr = expf(m - m_new);
    const float pj = expf(logit - m_new);
    l = l * corr + pj;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) acc[c] = acc[c] * corr + pj * kr[c];
    m = m_new;
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int ch = c * 32 + lane;
    if (ch < hd) accs[warp * hd + ch] = acc[c];
  }
  if (lane == 0) {
    ms[warp] = m;
    ls[warp] = l;
  }
  __syncthreads();
  if (n_splits > 1) {  // this share's unnormalised sum, its max and its denominator; the sink joins in the combine
    float mx = -INFINITY;
    for (int w = 0; w < kAttnWarps; ++w)
      if (ls[w] > 0.0f) mx = fmaxf(mx, ms[w]);
    float denom = 0.0f;
    float f[kAttnWarps];
    for (int w = 0; w < kAttnWarps; ++w) {
      f[w] = ls[w] > 0.0f ? expf(ms[w] - mx) : 0.0f;
      denom += ls[w] * f[w];
    }
    float* pp = part + static_cast<int64_t>(blockIdx.x) * (hd + 2);
    for (int c = threadIdx.x; c < hd; c += blockDim.x) {
      float v = 0.0f;
      for (int w = 0; w < kAttnWarps; ++w) v += accs[w * hd + c] * f[w];
      pp[c] = v;
    }
    if (threadIdx.x == 0) {
      pp[hd] = mx;
      pp[hd + 1] = denom;
    }
    return;
  }
  const float sink = sinks[h];
  float mx = sink;
  for (int w = 0; w < kAttnWarps; ++w) mx = fmaxf(mx, ms[w]);
  float denom = expf(sink - mx);
  float f[kAttnWarps];
  for (int w = 0; w < kAttnWarps; ++w) {
    f[w] = ls[w] > 0.0f ? expf(ms[w] - mx) : 0.0f;
    denom += ls[w] * f[w];
  }
  float* o = out + (r * heads + h) * hd;
  for (int c = threadIdx.x; c < hd; c += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) v += accs[w * hd + c] * f[w];
    o[c] = v / denom;
  }
}

// One block per (row, head): merges the key shares of attention_kernel with the sink.
__global__ void attention_combine_kernel(const float* __restrict__ part, const float* __restrict__ sinks, int heads, int hd,
                                         int n_splits, float* __restrict__ out, RopeDev unrope, const int32_t* __restrict__ positions) {
  pdl_begin();
  __shared__ float w[kMaxAttnSplits];  // each share's factor exp(max_s - max), 0 for an empty share
  __shared__ float denom;
  const int64_t rh = blockIdx.x;
  const int h = static_cast<int>(rh % heads);
  const float* pp = part + rh * n_splits * (hd + 2);
  const float sink = sinks[h];
  if (threadIdx.x < 32) {  // one warp: the shares' maxima and denominators (loads in parallel, sums in share order)
    const int s = threadIdx.x;
    const bool live = s < n_splits && pp[s * (hd + 2) + hd + 1] > 0.0f;
    const float m = live ? pp[s * (hd + 2) + hd] : -INFINITY;
    const float mx = fmaxf(warp_max(m), sink);
    if (s < n_splits) w[s] = live ? expf(m - mx) : 0.0f;
    __syncwarp();
    if (s == 0) {
      float d = expf(sink - mx);
      for (int i = 0; i < n_splits; ++i)
        if (w[i] > 0.0f) d += pp[i * (hd + 2) + hd + 1] * w[i];
      denom = d;
    }
  }
  __syncthreads();
  float* o = out + rh * hd;
  if (hd % 4 == 0 && (!unrope.inv_freq || unrope.rope_dim % 4 == 0) && reinterpret_cast<uintptr_t>(part) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(out) % 16 == 0) {
    // Four columns per thread: (hd + 2) % 4 == 2, so a share's columns are 8-byte aligned; read as
    // float2 pairs.
    for (int c = threadIdx.x * 4; c < hd; c += blockDim.x * 4) {
      float4 v = make_float4(0, 0, 0, 0);
      for (int s = 0; s < n_splits; ++s) {
        const float2 a = *reinterpret_cast<const float2*>(pp + s * (hd + 2) + c), b = *reinterpret_cast<const float2*>(pp + s * (hd + 2) + c + 2);
        v.x += a.x * w[s];
        v.y += a.y * w[s];
        v.z += b.x * w[s];
        v.w += b.y * w[s];
      }
      v = make_float4(v.x / denom, v.y / denom, v.z / denom, v.w / denom);
      const int first = c - (hd - unrope.rope_dim);  // rope channel of column c (pairs: even)
      if (unrope.inv_freq && first >= 0) {
        const int32_t p = positions[rh / heads];
        const float2 a = rotate_pair(v.x, v.y, unrope, p, first / 2, true), b = rotate_pair(v.z, v.w, unrope, p, first / 2 + 1, true);
        v = make_float4(a.x, a.y, b.x, b.y);
      }
      *reinterpret_cast<float4*>(o + c) = v;
    }
    return;
  }
  for (int c = threadIdx.x; c < hd; c += blockDim.x) {
    float v = 0.0f;
    for (int s = 0; s < n_splits; ++s) v += pp[s * (hd + 2) + c] * w[s];
    o[c] = v / denom;
  }
  if (!unrope.inv_freq) return;
  __syncthreads();  // the head's columns are written before their pairs are rotated
  rotate_pairs(o, hd, unrope, positions[rh / heads], true, threadIdx.x, blockDim.x);
}

constexpr int kIdxWarps = 8;
constexpr int kIdxEntriesPerBlock = 64;

// grid (rows, entry chunks): scores of one row's visible indexer keys, one warp per key; lanes split
// the heads.
__global__ void __launch_bounds__(kIdxWarps * 32) indexer_scores_kernel(const float* __restrict__ q,
                                                                        const float* __restrict__ weights, int heads,
                                                                        int64_t row_begin, BatchDev b, StateDev st,
                                                                        LayerDev L, float* __restrict__ scores, int64_t ld) {
  pdl_begin();
  extern __shared__ float smem[];
  const int dim = L.index_dim, qld = dim + 1;
  float* qs = smem;                          // [heads][dim + 1]
  float* ws = qs + heads * qld;              // [heads]
  float* keys = ws + heads;                  // [warps][dim]
  const int64_t r = row_begin + blockIdx.x;
  const int32_t visible = (b.positions[r] + 1) / L.rate;
  const int64_t e0 = static_cast<int64_t>(blockIdx.y) * kIdxEntriesPerBlock;
  if (e0 >= visible) return;
  const SeqInfo sq = b.seqs[b.row_seq[r]];
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dim));
  const float w_scale = 1.0f / sqrtf(static_cast<float>(heads));
  for (int i = threadIdx.x; i < heads * dim; i += blockDim.x) qs[(i / dim) * qld + i % dim] = q[r * heads * dim + i];
  for (int i = threadIdx.x; i < heads; i += blockDim.x) ws[i] = weights[r * heads + i] * w_scale;
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* kb = keys + warp * dim;
  const int64_t e1 = min(static_cast<int64_t>(visible), e0 + kIdxEntriesPerBlock);
  for (int64_t e = e0 + warp; e < e1; e += kIdxWarps) {
    const float* key = entry_ptr(b, st, L, sq, static_cast<int32_t>(e), L.index_key_offset, dim);
    for (int c = lane; c < dim; c += 32) kb[c] = key ? key[c] : 0.0f;
    __syncwarp();
    float total = 0.0f;
    for (int h = lane; h < heads; h += 32) {
      const float* qh = qs + h * qld;
      float dot = 0.0f;
      for (int c = 0; c < dim; ++c) dot += qh[c] * kb[c];
      total += fmaxf(dot, 0.0f) * q_scale * ws[h];
    }
    total = warp_sum(total);
    if (lane == 0) scores[blockIdx.x * ld + e] = total;
    __syncwarp();
  }
}

// Larger key = larger score; -0 counts as +0 so that equal scores tie.
__device__ __forceinline__ uint32_t order_key(float f) {
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

constexpr int kTopkThreads = 1024;

// hist[bin] += 1 for every lane whose bin >= 0, one atomic per distinct bin of the warp: a radix
// pass's first digit (sign and exponent) puts nearly every score in one or two bins, where a
// block's atomics on one address serialise.
__device__ __forceinline__ void hist_add(int* hist, int bin) {
  const unsigned peers = __match_any_sync(kFull, bin);
  if (bin >= 0 && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[bin], __popc(peers));
}

// The radix pass's digit: the bin holding the need-th largest key among those matching prefix
// (hist counts them per bin), counted from the top bin down and scanned in parallel. Updates
// prefix, need (how many of the bin's keys are still to take) and equal (the bin's count).
__device__ __forceinline__ void radix_digit(const int* hist, int* red, int shift, uint32_t& prefix, int& need, int& equal,
                                            uint32_t* sh_prefix, int* sh_need, int* sh_equal) {
  const int tid = threadIdx.x;
  const int c = tid < 256 ? hist[255 - tid] : 0;
  int total;
  const int above = block_exclusive_scan(c, red, &total);
  if (tid < 256 && above < need && above + c >= need) {
    *sh_prefix = prefix | (static_cast<uint32_t>(255 - tid) << shift);
    *sh_need = need - above;
    *sh_equal = c;
  }
  __syncthreads();
  prefix = *sh_prefix;
  need = *sh_need;
  equal = *sh_equal;
}

// Keys a thread keeps in registers when the row fits (kTopkPer * kTopkThreads entries: 64 K
// tokens of context at compression rate 4); longer rows are read from memory every pass.
constexpr int kTopkPer = 16;

// One block per row: radix-select the k-th largest key (8 bits a pass), then write the winners in
// index order: every key above it, and of the keys equal to it the lowest-indexed ones. No sort: the
// attention that reads the selection does not care about its order, and sorting k = 512 winners
// by score took most of the kernel's time (a 45-stage bitonic network over 1024 threads).
// A row that fits is held in registers, each thread owning a run of up to 16 entries: four passes
// without memory reads, and the compaction is one scan (two with ties) instead of one a chunk
// (at 32K context the chunked version took 23 us a call).
__global__ void __launch_bounds__(kTopkThreads) topk_kernel(const float* __restrict__ scores, int64_t ld, int64_t row_begin,
                                                            int rate, BatchDev b, int k, bool regs, int32_t* __restrict__ out) {
  pdl_begin();
  __shared__ int hist[256];
  __shared__ int red[33];
  __shared__ uint32_t sh_prefix;
  __shared__ int sh_need, sh_equal;
  const int64_t r = row_begin + blockIdx.x;
  const int64_t visible = (b.positions[r] + 1) / rate;
  const float* sc = scores + blockIdx.x * ld;
  const int tid = threadIdx.x, lane = tid & 31;
  int32_t* o = out + r * k;
  const int64_t take = visible < k ? visible : k;
  const bool in_regs = regs && visible <= static_cast<int64_t>(kTopkPer) * blockDim.x;

  // In registers: thread t holds entries [per t, per t + per), per as small as the row allows (the
  // loops below run per times for every thread).
  uint32_t key[kTopkPer];
  const int per = in_regs ? static_cast<int>((visible + blockDim.x - 1) / blockDim.x) : 0;
  const int64_t first = static_cast<int64_t>(tid) * per;
  const int mine = in_regs ? static_cast<int>(min(max(visible - first, int64_t{0}), static_cast<int64_t>(per))) : 0;
  if (in_regs) {
#pragma unroll
    for (int u = 0; u < kTopkPer; ++u) key[u] = u < mine ? order_key(sc[first + u]) : 0u;
  }

  uint32_t prefix = 0;  // every key is taken (>= 0) when k covers the row
  int need = 0, equal = 0;  // of the keys equal to prefix: how many are taken, how many there are
  if (visible > k) {
    uint32_t mask = 0;
    need = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int i = tid; i < 256; i += blockDim.x) hist[i] = 0;
      __syncthreads();
      if (in_regs) {
#pragma unroll
        for (int u = 0; u < kTopkPer; ++u)
          if (u < per)  // (block-uniform: every lane takes part in hist_add)
            hist_add(hist, u < mine && (key[u] & mask) == prefix ? static_cast<int>((key[u] >> shift) & 255u) : -1);
      } else {
        for (int64_t i = tid; i - lane < visible; i += blockDim.x) {  // warp-uniform trips: hist_add needs every lane
          const uint32_t kv = i < visible ? order_key(sc[i]) : 0u;
          hist_add(hist, i < visible && (kv & mask) == prefix ? static_cast<int>((kv >> shift) & 255u) : -1);
        }
      }
      __syncthreads();
      radix_digit(hist, red, shift, prefix, need, equal, &sh_prefix, &sh_need, &sh_equal);
      mask |= 0xffu << shift;
    }
  }
  // A key equal to prefix is taken while fewer than `need` equal ones came before it (counted only
  // when some equal ones are left out).
  if (in_regs) {
    int eq_mine = 0;
#pragma unroll
    for (int u = 0; u < kTopkPer; ++u) eq_mine += u < mine && key[u] == prefix;
    int eq_before = 0;
    if (need < equal) {
      int eq_total;
      eq_before = block_exclusive_scan(eq_mine, red, &eq_total);
    }
    uint32_t wins = 0;  // bit u: entry first + u is taken
#pragma unroll
    for (int u = 0; u < kTopkPer; ++u) {
      const bool eq = u < mine && key[u] == prefix;
      bool win = u < mine && (key[u] > prefix || (eq && need == equal));
      if (need < equal && eq) win = eq_before++ < need;
      wins |= static_cast<uint32_t>(win) << u;
    }
    int total;
    int pos = block_exclusive_scan(__popc(wins), red, &total);
#pragma unroll
    for (int u = 0; u < kTopkPer; ++u)
      if (wins & (1u << u)) o[pos++] = static_cast<int32_t>(first + u);
  } else {  // a block-wide chunk at a time, in index order
    int64_t written = 0, equal_before = 0;
    for (int64_t start = 0; start < visible && written < take; start += blockDim.x) {
      const int64_t i = start + tid;
      const uint32_t kv = i < visible ? order_key(sc[i]) : 0u;
      const bool eq = i < visible && kv == prefix;
      bool win = i < visible && (kv > prefix || (eq && need == equal));
      if (need < equal) {
        int eq_total;
        const int eq_rank = block_exclusive_scan(eq ? 1 : 0, red, &eq_total);
        win = win || (eq && equal_before + eq_rank < need);
        equal_before += eq_total;
      }
      int total;
      const int pos = block_exclusive_scan(win ? 1 : 0, red, &total);
      if (win) o[written + pos] = static_cast<int32_t>(i);
      written += total;
    }
  }
  for (int64_t i = take + tid; i < k; i += blockDim.x) o[i] = -1;
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

cudaError_t attention(const float* q, const float* kv, const float* sinks, const int32_t* selected, int64_t sel_cols,
                      int heads, BatchDev b, StateDev st, LayerDev L, float* out, Stream s, int n_splits,
                      float* partial, RopeDev unrope) {
  if (b.rows <= 0 || heads <= 0) return cudaSuccess;
  const int hd = L.head_dim;
  if (hd <= 0 || hd > 512 || n_splits < 1 || (n_splits > 1 && !partial)) return cudaErrorInvalidValue;
  const size_t smem = sizeof(float) * (static_cast<size_t>(hd) * (1 + kAttnWarps) + 2 * kAttnWarps);
  const int64_t rh = static_cast<int64_t>(b.rows) * heads;
  const unsigned grid = static_cast<unsigned>(rh * n_splits);
  if (hd <= 128)
    launch(attention_kernel<4>, grid, kAttnWarps * 32, smem, s)(q, kv, sinks, selected, sel_cols, heads, b, st, L, out, n_splits, partial);
  else
    launch(attention_kernel<16>, grid, kAttnWarps * 32, smem, s)(q, kv, sinks, selected, sel_cols, heads, b, st, L, out, n_splits, partial);
  if (n_splits > 1) return attention_combine(partial, sinks, rh, heads, hd, n_splits, out, s, unrope, b.positions);
  if (unrope.inv_freq) return rope(out, b.rows, static_cast<int64_t>(heads) * hd, hd, unrope, b.positions, true, s);
  return cudaGetLastError();
}

cudaError_t attention_combine(const float* partial, const float* sinks, int64_t row_heads, int heads, int hd, int n_splits, float* out,
                              Stream s, RopeDev unrope, const int32_t* positions) {
  if (row_heads <= 0) return cudaSuccess;
  if (n_splits < 1 || n_splits > kMaxAttnSplits || row_heads > 2147483647 ||
      (unrope.inv_freq && (!positions || unrope.rope_dim % 2 != 0 || unrope.rope_dim > hd)))
    return cudaErrorInvalidValue;
  launch(attention_combine_kernel, static_cast<unsigned>(row_heads), 128, 0, s)(partial, sinks, heads, hd, n_splits, out, unrope, positions);
  return cudaGetLastError();
}

cudaError_t indexer_scores(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows,
                           int64_t max_visible, BatchDev b, StateDev st, LayerDev L, float* scores, int64_t ld,
                           Stream s) {
  if (n_rows <= 0 || max_visible <= 0) return cudaSuccess;
  const int dim = L.index_dim;
  const size_t smem = sizeof(float) * (static_cast<size_t>(heads) * (dim + 1) + heads + static_cast<size_t>(kIdxWarps) * dim);
  if (smem > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(indexer_scores_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  const int64_t chunks = (max_visible + kIdxEntriesPerBlock - 1) / kIdxEntriesPerBlock;
  if (chunks > 65535) return cudaErrorInvalidValue;
  dim3 grid(static_cast<unsigned>(n_rows), static_cast<unsigned>(chunks));
  launch(indexer_scores_kernel, grid, kIdxWarps * 32, smem, s)(q, weights, heads, row_begin, b, st, L, scores, ld);
  return cudaGetLastError();
}

cudaError_t topk_rows(const float* scores, int64_t ld, int64_t row_begin, int64_t n_rows, int rate, BatchDev b, int k,
                      int32_t* out, Stream s) {
  if (n_rows <= 0 || k <= 0) return cudaSuccess;
  if (k > 4096 || rate <= 0) return cudaErrorInvalidValue;
  // Blocks as small as keep a row (of at most ld entries) in registers at <= 8 entries a thread: a
  // row's passes are a chain of barriers, so more rows a multiprocessor (8 blocks of 256 threads
  // rather than 2 of 1024) hide each other's. (radix_digit reads the histogram with 256 threads.)
  const int threads = static_cast<int>(std::clamp<int64_t>((ld + 8 * 32 - 1) / (8 * 32) * 32, 256, kTopkThreads));
  launch(topk_kernel, static_cast<unsigned>(n_rows), threads, 0, s)(scores, ld, row_begin, rate, b, k, true, out);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
