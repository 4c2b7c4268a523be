// The lightning indexer: per row, score[e] = sum over heads h of relu(q_h . k_e) / sqrt(dim) * w_h /
// sqrt(heads) over the row's visible index keys, then the top k of them.
//
// fp32 scores (fp32 mode, shapes the tensor cores do not take): one block per (row, chunk of keys),
// one warp per key.
//
// Tensor-core scores (bf16 mode): all heads share each key k_e, so one row's scores are a (heads x dim)
// by (dim x visible) product. One block per (R rows, chunk of 64-key tiles); four warps of 16 heads
// per row; bf16 operands, fp32 accumulation; the head sum is reduced across lanes, then across a
// row's warps in a fixed order (deterministic, the same for every R). R = 4 for prefill: the rows of
// one sequence see the same keys, so a key tile is loaded and converted once for four rows (at 32K
// context the key loads, not the products, were the kernel's cost). Prefill on an sm_90a device runs
// indexer_wgmma.cu instead.
//
// Top-k: a radix select of the k-th largest score, the winners written in index order.
#include "common.cuh"
#include "mma.cuh"

#include <algorithm>

namespace deepinfer::kernels {
namespace {

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

constexpr int kHeads = 64, kMaxDim = 128, kTile = 64;
constexpr int kLd = kMaxDim + 8;  // bf16 row stride: ldmatrix rows hit distinct banks


constexpr size_t smem_bytes(int R) {
  return sizeof(__nv_bfloat16) * static_cast<size_t>((R + 1) * kHeads) * kLd + sizeof(float) * (R * kHeads + 4 * R * kTile) +
         sizeof(const float*) * kTile;
}

// grid (row groups of R, key chunks of tiles_per_block * 64): the block stages its rows' queries
// once, then scores its chunk one 64-key tile at a time. Rows of different sequences (a packed
// batch's boundary) do not share keys: each then gets its own pass over the tile.
template <int R>
__global__ void __launch_bounds__(R * 128) indexer_scores_mqa_kernel(const float* __restrict__ q, const float* __restrict__ weights,
                                                                    int heads, int64_t row_begin, int64_t n_rows, BatchDev b, StateDev st,
                                                                    LayerDev L, int tiles_per_block, float* __restrict__ scores,
                                                                    int64_t ld) {
  pdl_begin();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* Qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);            // [R * kHeads][kLd]
  __nv_bfloat16* Ks = Qs + R * kHeads * kLd;                         // [kTile][kLd]
  auto* ws = reinterpret_cast<float*>(Ks + kTile * kLd);             // [R * kHeads]
  float* part = ws + R * kHeads;                                      // [4 R][kTile]
  auto* kp = reinterpret_cast<const float**>(part + 4 * R * kTile);  // [kTile]
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * R;          // the block's first row of this launch
  int32_t vis[R], seq[R];
  bool shared;
  const int32_t vis_max = rows_visible(b, L, row_begin, i0, n_rows, vis, seq, shared);
  const int64_t chunk0 = static_cast<int64_t>(blockIdx.y) * tiles_per_block * kTile;
  if (chunk0 >= vis_max) return;
  const int dim = L.index_dim, d4 = dim / 4;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;

  for (int i = tid; i < R * kHeads; i += blockDim.x) {
    const int j = i / kHeads, h = i % kHeads;
    ws[i] = h < heads && i0 + j < n_rows
                ? weights[(row_begin + i0 + j) * heads + h] / sqrtf(static_cast<float>(heads)) / sqrtf(static_cast<float>(dim))
                : 0.0f;
  }
  // The queries to bf16, kBatch loads in flight per thread before any is stored (a round of
  // latency per batch, not per load).
  constexpr int kBatch = R == 1 ? 8 : 4;
  for (int idx0 = tid; idx0 < R * kHeads * d4; idx0 += kBatch * blockDim.x) {
    float4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int idx = idx0 + u * blockDim.x, jh = idx / d4, j = jh / kHeads, h = jh % kHeads, c = (idx % d4) * 4;
      const float* qrow = q + (row_begin + i0 + j) * heads * dim;
      v[u] = idx < R * kHeads * d4 && h < heads && i0 + j < n_rows ? *reinterpret_cast<const float4*>(qrow + static_cast<int64_t>(h) * dim + c)
                                                                   : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int idx = idx0 + u * blockDim.x;
      if (idx < R * kHeads * d4) store_bf16x4(Qs + (idx / d4) * kLd + (idx % d4) * 4, v[u]);
    }
  }
  const int passes = shared ? 1 : R;
  for (int tile = 0; tile < tiles_per_block; ++tile) {
    const int64_t e0 = chunk0 + static_cast<int64_t>(tile) * kTile;
    if (e0 >= vis_max) break;
    for (int p = 0; p < passes; ++p) {
      const int32_t kvis = shared ? vis_max : vis[p];  // the keys of row p's sequence (all rows' when shared)
      if (e0 >= kvis) continue;                       // (uniform over the block)
      __syncthreads();  // the previous tile's readers are done with kp, Ks and part
      if (tid < kTile) {
        const int64_t e = e0 + tid;
        kp[tid] = e < kvis ? entry_ptr(b, st, L, b.seqs[seq[shared ? 0 : p]], static_cast<int32_t>(e), L.index_key_offset, dim) : nullptr;
      }
      __syncthreads();
      for (int idx0 = tid; idx0 < kTile * d4; idx0 += kBatch * blockDim.x) {  // the keys, batched as the queries
        float4 v[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int idx = idx0 + u * blockDim.x;
          const float* kr = idx < kTile * d4 ? kp[idx / d4] : nullptr;
          v[u] = kr ? *reinterpret_cast<const float4*>(kr + (idx % d4) * 4) : make_float4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int idx = idx0 + u * blockDim.x;
          if (idx < kTile * d4) store_bf16x4(Ks + (idx / d4) * kLd + (idx % d4) * 4, v[u]);
        }
      }
      __syncthreads();

      float acc[kTile / 8][4];
#pragma unroll
      for (int i = 0; i < kTile / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
      for (int k0 = 0; k0 < dim; k0 += 16) {
        uint32_t a[4];
        ldmatrix_x4(a, Qs + (warp * 16 + (lane & 15)) * kLd + k0 + (lane >> 4) * 8);
#pragma unroll
        for (int np = 0; np < kTile / 16; ++np) {
          uint32_t bk[4];
          ldmatrix_x4(bk, Ks + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * kLd + k0 + ((lane >> 3) & 1) * 8);
          mma_bf16(acc[2 * np], a, bk[0], bk[1]);
          mma_bf16(acc[2 * np + 1], a, bk[2], bk[3]);
        }
      }
      const float wa = ws[warp * 16 + g], wb = ws[warp * 16 + g + 8];
#pragma unroll
      for (int nt = 0; nt < kTile / 8; ++nt) {
        // (explicit roundings: every instantiation, 1 or 4 rows a block, sums the same way)
        float v0 = __fmaf_rn(fmaxf(acc[nt][2], 0.0f), wb, __fmul_rn(fmaxf(acc[nt][0], 0.0f), wa));
        float v1 = __fmaf_rn(fmaxf(acc[nt][3], 0.0f), wb, __fmul_rn(fmaxf(acc[nt][1], 0.0f), wa));
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) {
          v0 += __shfl_xor_sync(kFull, v0, o);
          v1 += __shfl_xor_sync(kFull, v1, o);
        }
        if (g == 0) {
          part[warp * kTile + nt * 8 + 2 * t4] = v0;
          part[warp * kTile + nt * 8 + 2 * t4 + 1] = v1;
        }
      }
      __syncthreads();
      if (tid < R * kTile) {
        const int j = tid / kTile, key = tid % kTile;
        const float* pj = part + 4 * j * kTile + key;
        if ((shared || j == p) && e0 + key < vis[j])
          scores[(i0 + j) * ld + e0 + key] = ((pj[0] + pj[kTile]) + pj[2 * kTile]) + pj[3 * kTile];
      }
    }
  }
}

template <int R>
cudaError_t launch_scores(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows, int64_t chunks,
                          BatchDev b, StateDev st, LayerDev L, int per_block, float* scores, int64_t ld, Stream s) {
  const int64_t groups = (n_rows + R - 1) / R;
  launch(indexer_scores_mqa_kernel<R>, dim3(static_cast<unsigned>(groups), static_cast<unsigned>(chunks)), R * 128, smem_bytes(R), s)(
      q, weights, heads, row_begin, n_rows, b, st, L, per_block, scores, ld);
  return cudaGetLastError();
}

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
                                                            int rate, BatchDev b, int k, int32_t* __restrict__ out) {
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
  const bool in_regs = visible <= static_cast<int64_t>(kTopkPer) * blockDim.x;

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
  launch(topk_kernel, static_cast<unsigned>(n_rows), threads, 0, s)(scores, ld, row_begin, rate, b, k, out);
  return cudaGetLastError();
}

cudaError_t prepare_indexer_mma(size_t device_max) {
  const cudaError_t e = allow_smem<indexer_scores_mqa_kernel<1>>(smem_bytes(1), device_max);
  return e == cudaSuccess ? allow_smem<indexer_scores_mqa_kernel<4>>(smem_bytes(4), device_max) : e;
}

bool indexer_scores_mqa_supported(int heads, const StateDev& st, const LayerDev& L) {
  return heads >= 1 && heads <= kHeads && L.index_dim >= 16 && L.index_dim <= kMaxDim && L.index_dim % 16 == 0 &&
         st.block_floats % 4 == 0 && L.index_key_offset % 4 == 0 && aligned16(st.blocks);
}

cudaError_t indexer_scores_mqa(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows, int64_t max_visible,
                               BatchDev b, StateDev st, LayerDev L, float* scores, int64_t ld, Stream s) {
  if (n_rows <= 0 || max_visible <= 0) return cudaSuccess;
  if (!indexer_scores_mqa_supported(heads, st, L) || !aligned16(q)) return cudaErrorInvalidValue;
  // 64+ rows: 8 tiles per block, so that each row's queries are staged 8x less often; and where the
  // sequences average 4+ rows (prefill chunks), 4 rows per block, each key tile loaded once for them
  // (decode rows are each their own sequence's: a block of them would pass over every row's keys).
  // Small batches keep one row and one tile per block to spread over the GPU.
  const int64_t tiles = (max_visible + kTile - 1) / kTile;
  const bool many = n_rows >= 64;
  const int per_block = many ? 8 : 1;
  const int64_t chunks = (tiles + per_block - 1) / per_block;
  if (chunks > 65535 || n_rows > 2147483647) return cudaErrorInvalidValue;
  return many && b.rows >= 4 * static_cast<int64_t>(b.n_seqs) ? launch_scores<4>(q, weights, heads, row_begin, n_rows, chunks, b, st, L, per_block, scores, ld, s)
              : launch_scores<1>(q, weights, heads, row_begin, n_rows, chunks, b, st, L, per_block, scores, ld, s);
}

}  // namespace deepinfer::kernels
