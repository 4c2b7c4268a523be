// One row's passes over its logits, the building blocks of the sampler's select kernel
// (sampling.cu, the only file that includes this): reductions and scans, loops over the row, the
// first crossing of a running total in token id order, and the shortest rank prefix of a candidate
// set that holds a count or a mass. A row is taken by one block or, at small batches on sm_90, by a
// cluster of blocks: each block loops over its slice of the row, and every reduction is completed
// across the cluster through distributed shared memory, so each block holds the row's results.
// Every result is exact (integer sums, min / max, a sort by a total order), so it depends on the
// row alone, not on the thread or block that saw what.
#pragma once

#include "common.cuh"

#include <cooperative_groups.h>

namespace deepinfer::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 512;  // a block of the select kernel
constexpr int kWarps = kThreads / 32;
constexpr int kMaxRowBlocks = 8;  // blocks sharing a row (the largest portable cluster; 16 measured no faster)
constexpr int kBuckets = 2048;
constexpr int kCompact = 2048;  // boundary buckets of at most this many members are sorted in shared memory
constexpr int kTopSlots = 32;   // top logprobs gathered in Shared::top (>= kMaxTopLogprobs)
static_assert(kCompact <= 4 * kThreads && kCompact <= kBuckets + kBuckets / 2, "walk_sorted takes 4 entries a thread");
static_assert(kTopSlots >= kMaxTopLogprobs, "top logprobs slots");
static_assert(kBuckets % 32 == 0 && ((kBuckets / 32) & (kBuckets / 32 - 1)) == 0, "find_boundary gives each lane kBuckets / 32 buckets");
static_assert(kBuckets % kThreads == 0, "histograms are summed kBuckets / kThreads buckets a thread");

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000); }

// Larger value, larger key (candidate_set.cpp's rank_key).
__device__ __forceinline__ uint32_t rank_key(float x) {
  const uint32_t u = __float_as_uint(x == 0.0f ? 0.0f : x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) { return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

// (value descending, id ascending) as one descending 64-bit key.
__device__ __forceinline__ unsigned long long sort_key(float v, int64_t t) {
  return (static_cast<unsigned long long>(rank_key(v)) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(t));
}

// --- the row's blocks

// This block's rank among the row's blocks and their number (a cluster's; one block without
// clusters); row_sync: a barrier of every thread of the row's blocks, after which their shared-memory
// writes before it are visible to all; in_block: the object at p in the shared memory of the row's
// block `rank`.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned row_block() { return cg::this_cluster().block_rank(); }
__device__ __forceinline__ unsigned row_blocks() { return cg::this_cluster().num_blocks(); }
__device__ __forceinline__ void row_sync() { cg::this_cluster().sync(); }
template <class T>
__device__ __forceinline__ T* in_block(T* p, unsigned rank) {
  return cg::this_cluster().map_shared_rank(p, rank);
}
#else
__device__ __forceinline__ unsigned row_block() { return 0; }
__device__ __forceinline__ unsigned row_blocks() { return 1; }
__device__ __forceinline__ void row_sync() { __syncthreads(); }
template <class T>
__device__ __forceinline__ T* in_block(T* p, unsigned) {
  return p;
}
#endif

// The tokens of the row this block loops over: an equal share, a multiple of 4 (16-byte vectors).
struct Slice {
  int64_t begin, end;
};
__device__ __forceinline__ Slice my_slice(int64_t n) {
  const unsigned nb = row_blocks();  // (a power of two: a shift, not a 64-bit division in every pass)
  const int64_t per = (((n + nb - 1) >> (__ffs(nb) - 1)) + 3) & ~int64_t{3};
  const int64_t begin = min(n, per * row_block());
  return Slice{begin, min(n, begin + per)};
}

// --- reductions over the row (kThreads threads a block)

__device__ __forceinline__ unsigned long long warp_sum_u64(unsigned long long v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

struct Shared {
  unsigned long long big[kBuckets + kBuckets / 2];  // a histogram (masses, then counts) or a sort buffer
  unsigned long long stage[kCompact];               // a block's members of a bucket, gathered into big by every block
  unsigned long long red[kWarps], scan[kWarps];
  float fmax[kWarps], fmin[kWarps];
  int64_t imin[kWarps], icount[kWarps], iarg[kWarps];
  unsigned long long top[kTopSlots];
  float fbest[kWarps];
  unsigned long long xchg[5];                      // this block's part of an exchange between the row's blocks
  unsigned long long gathered[5 * kMaxRowBlocks];  // every block's part, by rank
  // results handed from one thread to all
  int boundary;
  unsigned boundary_count;
  unsigned long long need, before;
  unsigned long long list_mass;  // the top_p mass of a short list's kept entries
  int find_warp;
  unsigned long long find_rem;
  int64_t found;
  unsigned n_compact;
};

// Every block's v (the same in all its threads), by rank: valid until the next exchange. Every
// thread of the row's blocks calls it, in the same sequence of exchanges.
template <class T>
__device__ const T* gather_blocks(T v, Shared& sh) {
  static_assert(sizeof(T) <= sizeof(sh.xchg) && alignof(T) <= alignof(unsigned long long), "an exchange slot");
  T* slot = reinterpret_cast<T*>(sh.xchg);
  T* all = reinterpret_cast<T*>(sh.gathered);
  if (threadIdx.x == 0) *slot = v;
  row_sync();
  if (threadIdx.x < row_blocks()) all[threadIdx.x] = *in_block(slot, threadIdx.x);
  row_sync();  // (the slots are written again by the next exchange)
  return all;
}

// op over the blocks' parts (op exact, associative and commutative: the same result in every block).
template <class T, class Op>
__device__ T across_blocks(T v, Op op, Shared& sh) {
  const unsigned nb = row_blocks();
  if (nb == 1) return v;
  const T* all = gather_blocks(v, sh);
  T acc = all[0];
  for (unsigned b = 1; b < nb; ++b) acc = op(acc, all[b]);
  return acc;
}

// A mass and a count summed over the row (every thread gets both).
struct Sums {
  unsigned long long mass;
  int64_t count;
};

__device__ Sums row_sums(Sums v, Shared& sh) {
  v.mass = warp_sum_u64(v.mass);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v.count += __shfl_xor_sync(kFull, v.count, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) {
    sh.red[threadIdx.x >> 5] = v.mass;
    sh.icount[threadIdx.x >> 5] = v.count;
  }
  __syncthreads();
  Sums t{0, 0};
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    t.mass += sh.red[w];
    t.count += sh.icount[w];
  }
  return across_blocks(
      t,
      [](Sums a, Sums b) {
        return Sums{a.mass + b.mass, a.count + b.count};
      },
      sh);
}

// The row's max and min of floats (every thread gets both).
__device__ float2 row_max_min(float mx, float mn, Shared& sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, o));
    mn = fminf(mn, __shfl_xor_sync(kFull, mn, o));
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) {
    sh.fmax[threadIdx.x >> 5] = mx;
    sh.fmin[threadIdx.x >> 5] = mn;
  }
  __syncthreads();
  mx = sh.fmax[0];
  mn = sh.fmin[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) {
    mx = fmaxf(mx, sh.fmax[w]);
    mn = fminf(mn, sh.fmin[w]);
  }
  return across_blocks(
      make_float2(mx, mn), [](float2 a, float2 b) { return make_float2(fmaxf(a.x, b.x), fminf(a.y, b.y)); }, sh);
}

// What the select kernel's first pass finds in a row: the first non-finite raw logit (bad; the
// row's width where none), and of the processed row the range and count of the finite values and
// the first id of the largest value (best_id; -inf values count too).
struct RowStats {
  int64_t bad;
  float max, min, best;
  int64_t finite, best_id;
};

__device__ __forceinline__ RowStats merge(RowStats a, const RowStats& b) {
  a.bad = min(a.bad, b.bad);
  a.max = fmaxf(a.max, b.max);
  a.min = fminf(a.min, b.min);
  a.finite += b.finite;
  if (b.best > a.best || (b.best == a.best && b.best_id < a.best_id)) {
    a.best = b.best;
    a.best_id = b.best_id;
  }
  return a;
}

// The row's RowStats from every thread's (one barrier pair and one exchange for all of them).
__device__ RowStats row_stats(RowStats v, Shared& sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    RowStats u;
    u.bad = __shfl_xor_sync(kFull, v.bad, o);
    u.max = __shfl_xor_sync(kFull, v.max, o);
    u.min = __shfl_xor_sync(kFull, v.min, o);
    u.best = __shfl_xor_sync(kFull, v.best, o);
    u.finite = __shfl_xor_sync(kFull, v.finite, o);
    u.best_id = __shfl_xor_sync(kFull, v.best_id, o);
    v = merge(v, u);
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) {
    const int w = threadIdx.x >> 5;
    sh.imin[w] = v.bad;
    sh.fmax[w] = v.max;
    sh.fmin[w] = v.min;
    sh.fbest[w] = v.best;
    sh.icount[w] = v.finite;
    sh.iarg[w] = v.best_id;
  }
  __syncthreads();
  RowStats t{sh.imin[0], sh.fmax[0], sh.fmin[0], sh.fbest[0], sh.icount[0], sh.iarg[0]};
#pragma unroll
  for (int w = 1; w < kWarps; ++w) t = merge(t, RowStats{sh.imin[w], sh.fmax[w], sh.fmin[w], sh.fbest[w], sh.icount[w], sh.iarg[w]});
  return across_blocks(
      t, [](RowStats a, RowStats b) { return merge(a, b); }, sh);
}

// Exclusive prefix over this block in thread order; *total gets the block's sum.
__device__ unsigned long long block_exclusive_scan_u64(unsigned long long v, Shared& sh, unsigned long long* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned long long x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned long long y = __shfl_up_sync(kFull, x, o);
    if (lane >= o) x += y;
  }
  __syncthreads();
  if (lane == 31) sh.scan[warp] = x;
  __syncthreads();
  unsigned long long before = 0, all = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += sh.scan[w];
    all += sh.scan[w];
  }
  *total = all;
  return before + x - v;
}

// f(t, row[t]) for every token of this block's slice, threads striding over it. Each thread loads
// kAhead tokens at once (loads in flight hide the memory latency), then runs f on them in a loop
// that is not unrolled (f's body once: the heavier passes would spill with more), rotating the
// values through registers.
constexpr int kAhead = 8;

template <class F>
__device__ __forceinline__ void for_each_token(const float* row, int64_t n, F&& f) {
  const Slice sl = my_slice(n);
  for (int64_t base = sl.begin + threadIdx.x; base < sl.end; base += kAhead * kThreads) {
    float v[kAhead];
#pragma unroll
    for (int k = 0; k < kAhead; ++k) {
      const int64_t t = base + k * kThreads;
      v[k] = t < sl.end ? row[t] : 0.0f;
    }
#pragma unroll 1
    for (int k = 0; k < kAhead; ++k) {
      const int64_t t = base + k * kThreads;
      if (t < sl.end) f(t, v[0]);
#pragma unroll
      for (int j = 0; j + 1 < kAhead; ++j) v[j] = v[j + 1];
    }
  }
}

// The same for light passes: 16-byte vectors where the row allows, f inlined for each element.
template <class F>
__device__ __forceinline__ void for_each_token_vec(const float* row, int64_t n, F&& f) {
  if ((reinterpret_cast<uintptr_t>(row) & 15) == 0) {
    const Slice sl = my_slice(n);  // (begins at a multiple of 4)
    const float4* r4 = reinterpret_cast<const float4*>(row + sl.begin);
    const int64_t n4 = (sl.end - sl.begin) >> 2;
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < n4; i += kThreads) {
      const float4 v = r4[i];
      const int64_t t = sl.begin + 4 * i;
      f(t, v.x);
      f(t + 1, v.y);
      f(t + 2, v.z);
      f(t + 3, v.w);
    }
    for (int64_t t = sl.begin + 4 * n4 + threadIdx.x; t < sl.end; t += kThreads) f(t, row[t]);
  } else {
    for_each_token(row, n, f);
  }
}

// Keeps the tokens ranked at or before (v, id) in the order (value descending, id ascending); off
// (Cut{}): keeps every token.
struct Cut {
  float v;
  int64_t id;
  bool on;
  __device__ bool keeps(float x, int64_t t) const { return !on || x > v || (x == v && t <= id); }
};

// --- selection of a rank prefix

__device__ __forceinline__ int bucket_of(float v, float hi, double scale) {
  const double d = (static_cast<double>(hi) - static_cast<double>(v)) * scale;
  return d < static_cast<double>(kBuckets - 1) ? static_cast<int>(d) : kBuckets - 1;
}

// Counts (and masses) of the set's members with values in [lo, hi], by bucket (0: the highest).
template <class S>
__device__ void histogram(const S& set, int64_t vocab, bool by_mass, float lo, float hi, double scale, Shared& sh) {
  unsigned long long* mass = sh.big;
  unsigned* count = reinterpret_cast<unsigned*>(sh.big + kBuckets);
  __syncthreads();
  for (int i = threadIdx.x; i < kBuckets; i += kThreads) {
    mass[i] = 0;
    count[i] = 0;
  }
  __syncthreads();
  for_each_token(set.row(), vocab, [&](int64_t t, float x) {
    const float v = set.value(t, x);
    if (!(v >= lo && v <= hi)) return;
    const int b = bucket_of(v, hi, scale);
    atomicAdd(&count[b], 1u);
    if (by_mass) atomicAdd(&mass[b], set.mass(v));
  });
  __syncthreads();
  const unsigned nb = row_blocks();
  if (nb == 1) return;
  // Every block sums the row's blocks' histograms into its own.
  constexpr int kPer = kBuckets / kThreads;
  unsigned long long m[kPer];
  unsigned c[kPer];
  row_sync();
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    m[i] = 0;
    c[i] = 0;
  }
  for (unsigned r = 0; r < nb; ++r) {
    const unsigned long long* rm = in_block(mass, r);
    const unsigned* rc = in_block(count, r);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      c[i] += rc[threadIdx.x + i * kThreads];
      if (by_mass) m[i] += rm[threadIdx.x + i * kThreads];
    }
  }
  row_sync();
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    count[threadIdx.x + i * kThreads] = c[i];
    mass[threadIdx.x + i * kThreads] = m[i];
  }
  __syncthreads();
}

// fraction (top_p) of a total mass, rounded up, at least 1 and at most the total.
__device__ __forceinline__ unsigned long long fraction_need(float fraction, unsigned long long total) {
  const double want = ceil(static_cast<double>(fraction) * static_cast<double>(total));
  return want < 1.0 ? 1 : (want >= static_cast<double>(total) ? total : static_cast<unsigned long long>(want));
}

// The bucket where the running total (counts or masses, from bucket 0) first reaches `need` (with
// fraction > 0: fraction of the histogram's total, rounded up): sh.boundary (-1: never),
// sh.boundary_count, sh.before (the total of the buckets before it), sh.need.
__device__ void find_boundary(bool by_mass, unsigned long long need, float fraction, Shared& sh) {
  const unsigned long long* mass = sh.big;
  const unsigned* count = reinterpret_cast<const unsigned*>(sh.big + kBuckets);
  if (threadIdx.x < 32) {
    constexpr int kPer = kBuckets / 32;
    const int lane = threadIdx.x, b0 = lane * kPer;
    unsigned long long sum = 0;
#pragma unroll 8
    for (int i = 0; i < kPer; ++i) {  // (each lane starts at its own offset: lanes kPer apart would share a bank)
      const int b = b0 + ((i + lane) & (kPer - 1));
      sum += by_mass ? mass[b] : count[b];
    }
    unsigned long long incl = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const unsigned long long y = __shfl_up_sync(kFull, incl, o);
      if (lane >= o) incl += y;
    }
    const unsigned long long total = __shfl_sync(kFull, incl, 31);
    if (fraction > 0.0f) need = fraction_need(fraction, total);
    // The lane whose buckets hold the crossing, then those buckets (kPer / 32 a lane, in order)
    // scanned over the warp: the first where the running total reaches need.
    const unsigned long long excl = incl - sum;
    const unsigned owner = __ballot_sync(kFull, excl < need && need <= incl);
    int found = -1;
    unsigned long long before = 0;
    unsigned who = 0;
    if (owner) {
      const int o = __ffs(owner) - 1;
      constexpr int kSub = kPer / 32;
      static_assert(kPer % 32 == 0, "a lane takes kPer / 32 of the buckets");
      const int b1 = o * kPer + lane * kSub;
      unsigned long long m[kSub], s = 0;
#pragma unroll
      for (int i = 0; i < kSub; ++i) {
        m[i] = by_mass ? mass[b1 + i] : count[b1 + i];
        s += m[i];
      }
      unsigned long long run = s;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const unsigned long long y = __shfl_up_sync(kFull, run, d);
        if (lane >= d) run += y;
      }
      unsigned long long acc = __shfl_sync(kFull, excl, o) + run - s;
#pragma unroll
      for (int i = 0; i < kSub; ++i) {
        if (found < 0 && acc + m[i] >= need) {
          found = b1 + i;
          before = acc;
        }
        acc += m[i];
      }
      who = __ballot_sync(kFull, found >= 0);  // (every lane after the crossing's finds one too)
    }
    const int leader = who ? __ffs(who) - 1 : 0;
    found = __shfl_sync(kFull, found, leader);
    before = __shfl_sync(kFull, before, leader);
    if (lane == 0) {
      sh.boundary = who ? found : -1;
      sh.boundary_count = who ? count[found] : 0;
      sh.before = before;
      sh.need = need;
    }
  }
  __syncthreads();
}

// The token at which the running total of metric(t, row[t]) over the row in id order first exceeds
// target_of(total) (< total); -1 where it never does. Each warp owns a contiguous range of its
// block's slice: the blocks' and then the warps' sums locate the range, then its block scans it 4
// tokens a thread.
template <class Metric, class Target>
__device__ int64_t ordered_find(const float* row, int64_t vocab, const Metric& metric, const Target& target_of, Shared& sh) {
  constexpr int64_t kStep = 4 * kThreads;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const Slice sl = my_slice(vocab);
  const int64_t per_warp = ((sl.end - sl.begin + kWarps - 1) / kWarps + 31) / 32 * 32;
  const int64_t begin = sl.begin + warp * per_warp, end = min(sl.end, begin + per_warp);
  unsigned long long sum = 0;
  for (int64_t at = begin + lane; at < end; at += kAhead * 32) {  // kAhead loads in flight, as for_each_token
    float v[kAhead];
#pragma unroll
    for (int k = 0; k < kAhead; ++k) v[k] = at + 32 * k < end ? row[at + 32 * k] : 0.0f;
#pragma unroll 1
    for (int k = 0; k < kAhead; ++k) {
      if (at + 32 * k < end) sum += metric(at + 32 * k, v[0]);
#pragma unroll
      for (int j = 0; j + 1 < kAhead; ++j) v[j] = v[j + 1];
    }
  }
  sum = warp_sum_u64(sum);
  __syncthreads();
  if (lane == 0) sh.red[warp] = sum;
  __syncthreads();
  const unsigned nb = row_blocks();
  unsigned long long mine = 0;
  for (int w = 0; w < kWarps; ++w) mine += sh.red[w];
  const unsigned long long* block_sums = nb == 1 ? &mine : gather_blocks(mine, sh);
  if (threadIdx.x == 0) {
    unsigned long long total = 0;
    for (unsigned r = 0; r < nb; ++r) total += block_sums[r];
    const unsigned long long target = target_of(total);
    unsigned long long acc = 0;
    unsigned owner = 0;
    while (owner < nb && target >= acc + block_sums[owner]) acc += block_sums[owner++];
    int at = -1;
    if (owner == row_block())
      for (int w = 0; w < kWarps; ++w) {
        if (target < acc + sh.red[w]) {
          at = w;
          break;
        }
        acc += sh.red[w];
      }
    sh.find_warp = at;
    sh.find_rem = target - acc;
    sh.found = -1;
  }
  __syncthreads();
  const int at = sh.find_warp;
  if (at >= 0) {  // this block's warp `at` holds it
    unsigned long long rem = sh.find_rem;
    const int64_t wb = sl.begin + at * per_warp, we = min(sl.end, wb + per_warp);
    for (int64_t base = wb; base < we; base += kStep) {
      const int64_t t0 = base + 4 * threadIdx.x;
      unsigned long long m[4], s = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        m[j] = t0 + j < we ? metric(t0 + j, row[t0 + j]) : 0;
        s += m[j];
      }
      unsigned long long step_total;
      const unsigned long long excl = block_exclusive_scan_u64(s, sh, &step_total);
      if (excl <= rem && rem < excl + s) {
        unsigned long long acc = excl;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          acc += m[j];
          if (acc > rem) {
            sh.found = t0 + j;
            break;
          }
        }
      }
      __syncthreads();
      if (sh.found >= 0) break;
      rem -= step_total;
    }
  }
  const int64_t found = sh.found;
  __syncthreads();
  return across_blocks(
      found, [](int64_t a, int64_t b) { return max(a, b); }, sh);
}

// Sorts n keys descending (bitonic, n padded to a power of two with zeros, which sort last).
__device__ void sort_desc(unsigned long long* buf, int n) {
  int size = 1;
  while (size < n) size <<= 1;
  for (int i = n + threadIdx.x; i < size; i += kThreads) buf[i] = 0;
  __syncthreads();
  for (int k = 2; k <= size; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < size; i += kThreads) {
        const int p = i ^ j;
        if (p > i) {
          const unsigned long long a = buf[i], b = buf[p];
          if ((i & k) == 0 ? a < b : a > b) {
            buf[i] = b;
            buf[p] = a;
          }
        }
      }
      __syncthreads();
    }
}

// The keys of the row's tokens that key_of admits (key_of(t, x, key): whether t is in, and its key),
// at most kCompact of them, gathered from all the row's blocks into every block's sh.big in no
// particular order; returns their number.
template <class KeyOf>
__device__ unsigned gather_keys(const float* row, int64_t vocab, const KeyOf& key_of, Shared& sh) {
  const unsigned nb = row_blocks();
  unsigned long long* mine = nb == 1 ? sh.big : sh.stage;  // (several blocks: gathered into big below)
  __syncthreads();
  if (threadIdx.x == 0) sh.n_compact = 0;
  __syncthreads();
  for_each_token(row, vocab, [&](int64_t t, float x) {
    unsigned long long key;
    if (!key_of(t, x, key)) return;
    const cg::coalesced_group g = cg::coalesced_threads();
    unsigned slot = 0;
    if (g.thread_rank() == 0) slot = atomicAdd(&sh.n_compact, g.size());
    slot = g.shfl(slot, 0) + g.thread_rank();
    if (slot < static_cast<unsigned>(kCompact)) mine[slot] = key;
  });
  __syncthreads();
  if (nb == 1) return min(sh.n_compact, static_cast<unsigned>(kCompact));
  const unsigned* counts = gather_blocks(sh.n_compact, sh);
  unsigned at = 0;
  for (unsigned r = 0; r < nb; ++r) {
    const unsigned long long* theirs = in_block(sh.stage, r);
    const unsigned k = min(counts[r], static_cast<unsigned>(kCompact) - at);
    for (unsigned i = threadIdx.x; i < k; i += kThreads) sh.big[at + i] = theirs[i];
    at += k;
  }
  row_sync();  // (the stages are written again by the next gather)
  return at;
}

// The members of bucket b (values in [lo, hi]; n of them in the row) as sort keys in sh.big, sorted
// descending.
template <class S>
__device__ void sort_bucket(const S& set, int64_t vocab, float lo, float hi, double scale, int b, int n, Shared& sh) {
  gather_keys(
      set.row(), vocab,
      [&](int64_t t, float x, unsigned long long& key) {
        const float v = set.value(t, x);
        if (!(v >= lo && v <= hi) || bucket_of(v, hi, scale) != b) return false;
        key = sort_key(v, t);
        return true;
      },
      sh);
  sort_desc(sh.big, n);
}

// The index of the sorted bucket's entry at which the running count (or mass) reaches need.
template <class S>
__device__ int walk_sorted(const S& set, int n, bool by_mass, unsigned long long need, Shared& sh) {
  if (!by_mass) return static_cast<int>(need) - 1;
  const int per = (n + kThreads - 1) / kThreads, i0 = threadIdx.x * per;
  unsigned long long m[4], s = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    m[j] = j < per && i0 + j < n ? set.mass(key_value(static_cast<uint32_t>(sh.big[i0 + j] >> 32))) : 0;
    s += m[j];
  }
  if (threadIdx.x == 0) sh.found = n - 1;  // (need never exceeds the bucket's mass)
  unsigned long long total;
  const unsigned long long excl = block_exclusive_scan_u64(s, sh, &total);
  if (excl < need && need <= excl + s) {
    unsigned long long acc = excl;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      acc += m[j];
      if (acc >= need) {
        sh.found = i0 + j;
        break;
      }
    }
  }
  __syncthreads();
  return static_cast<int>(sh.found);
}

// The cut that keeps the shortest rank prefix of the set (members with finite values in [lo, hi],
// the whole set) holding `need` members, or (by_mass) `need` of mass; with fraction > 0, need is
// that fraction of the set's mass, rounded up. counted: the first histogram and find_boundary's
// results for these arguments are in sh already.
template <class S>
__device__ Cut select_prefix(const S& set, int64_t vocab, bool by_mass, unsigned long long need, float fraction, float lo, float hi,
                             Shared& sh, bool counted = false) {
  for (;; counted = false) {
    const double scale = hi > lo ? (kBuckets - 1) / (static_cast<double>(hi) - static_cast<double>(lo)) : 0.0;
    if (!counted) {
      histogram(set, vocab, by_mass, lo, hi, scale, sh);
      find_boundary(by_mass, need, fraction, sh);
    }
    const int b = sh.boundary;
    if (b < 0) return Cut{};  // (exact sums: unreachable)
    const unsigned n = sh.boundary_count;
    need = sh.need - sh.before;
    fraction = 0.0f;
    if (n <= static_cast<unsigned>(kCompact)) {
      sort_bucket(set, vocab, lo, hi, scale, b, static_cast<int>(n), sh);
      const unsigned long long k = sh.big[walk_sorted(set, static_cast<int>(n), by_mass, need, sh)];
      return Cut{key_value(static_cast<uint32_t>(k >> 32)), static_cast<int64_t>(~static_cast<uint32_t>(k)), true};
    }
    if (hi == lo) {  // more equal values than the sort holds: the lowest ids among them
      const unsigned long long w = set.mass(lo);
      unsigned long long keep = by_mass ? (w > 0 ? (need + w - 1) / w : n) : need;
      if (keep >= n) return Cut{lo, INT64_MAX, true};
      const int64_t id = ordered_find(
          set.row(), vocab, [&](int64_t t, float x) { return set.value(t, x) == lo ? 1ull : 0ull; },
          [keep](unsigned long long) { return keep - 1; }, sh);
      return Cut{lo, id, true};
    }
    // Too many members: split the bucket's value range again.
    float mx = neg_inf(), mn = pos_inf();
    for_each_token(set.row(), vocab, [&](int64_t t, float x) {
      const float v = set.value(t, x);
      if (v >= lo && v <= hi && bucket_of(v, hi, scale) == b) {
        mx = fmaxf(mx, v);
        mn = fminf(mn, v);
      }
    });
    const float2 r = row_max_min(mx, mn, sh);
    hi = r.x;
    lo = r.y;
  }
}
}  // namespace
}  // namespace deepinfer::kernels
