// Attention for layers whose query heads share one K=V head of 512 (DeepSeek-V4's shape) on the
// tensor cores: bf16 operands, fp32 accumulation and softmax (the backend's bf16 mode).
//
// One block per (row, group of 64 heads, share of the keys). The block converts its 64 query heads
// to bf16 in shared memory once, then walks the row's keys (sliding window, then the selected or
// all compressed entries) in tiles of 32: each key is read once for all 64 heads, which is the point
// (the fp32 kernel in attention.cu re-reads it per head). Per tile: S = Q K^T (mma.sync m16n8k16), an
// online softmax on S, O += P V with V = the same tile. Eight warps: warp w owns heads
// 16 (w % 4) .. +16 and, for O, dims 256 (w / 4) .. +256, so O stays in registers (128 per thread).
#include "common.cuh"
#include "mma.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kHd = 512, kHeadTile = 64, kKeyTile = 32, kThreads = 256;
constexpr int kLd = kHd + 8;        // bf16 row stride of the Q and K tiles: ldmatrix rows hit distinct banks
constexpr int kSld = kKeyTile + 4;  // fp32 row stride of the score tile
constexpr size_t kSmemBytes = sizeof(__nv_bfloat16) * (kHeadTile + kKeyTile) * kLd + sizeof(float) * kHeadTile * kSld +
                              sizeof(float) * kKeyTile * kHd + sizeof(const float*) * 2 * kKeyTile;

// Pointers of the key tile at j0 of [.., j_end) into dst, a thread per key (null: masked).
__device__ __forceinline__ void resolve_tile(const AttentionKeys& keys, const BatchDev& b, const StateDev& st, const LayerDev& L, int64_t j0,
                                             int64_t j_end, const float** dst) {
  const int tid = threadIdx.x;
  if (tid < kKeyTile) dst[tid] = j0 + tid < j_end ? keys.key(j0 + tid, b, st, L) : nullptr;
}

// Asynchronous copies of a tile's fp32 keys into `stage` (zeros for masked keys): they land while
// the block computes on the tile before.
__device__ __forceinline__ void issue_tile(const float* const* ptrs, const float* kv, float* stage) {
#pragma unroll
  for (int u = 0; u < kKeyTile * kHd / 4 / kThreads; ++u) {
    const int idx = u * kThreads + threadIdx.x, key = idx / (kHd / 4), c = (idx % (kHd / 4)) * 4;
    const float* kr = ptrs[key];
    cp_async16(stage + key * kHd + c, kr ? kr + c : kv, kr != nullptr);
  }
  cp_async_commit();
}

// The landed tile (fp32 in `stage`) as bf16 rows of Ks.
__device__ __forceinline__ void tile_to_bf16(const float* stage, __nv_bfloat16* Ks) {
#pragma unroll
  for (int u = 0; u < kKeyTile * kHd / 4 / kThreads; ++u) {
    const int idx = u * kThreads + threadIdx.x, key = idx / (kHd / 4), c = (idx % (kHd / 4)) * 4;
    store_bf16x4(Ks + key * kLd + c, *reinterpret_cast<const float4*>(stage + key * kHd + c));
  }
}

// kHeads query heads of row r from head h0 (past nh: zeros) as bf16 rows of Qs, kBatch float4 loads
// of a thread in flight at a time. (The row's address is formed here, next to its loads: the compiler
// then folds it as it did inside the kernels.)
template <int kHeads, int kBatch>
__device__ __forceinline__ void stage_query(__nv_bfloat16* Qs, const float* q, int64_t r, int heads, int h0, int nh, int tid) {
  const float* qrow = q + (r * heads + h0) * kHd;
  constexpr int kQLoads = kHeads * (kHd / 4) / kThreads;  // float4 per thread
#pragma unroll
  for (int batch = 0; batch < kQLoads / kBatch; ++batch) {
    float4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int idx = (batch * kBatch + u) * kThreads + tid, h = idx / (kHd / 4), c = (idx % (kHd / 4)) * 4;
      v[u] = h < nh ? *reinterpret_cast<const float4*>(qrow + static_cast<int64_t>(h) * kHd + c) : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int idx = (batch * kBatch + u) * kThreads + tid, h = idx / (kHd / 4), c = (idx % (kHd / 4)) * 4;
      store_bf16x4(Qs + h * kLd + c, v[u]);
    }
  }
}

// O += P V for kPairs pairs of m16n8 output tiles: P (A fragment) times the V rows at vrow (this lane's
// ldmatrix row of the key tile), 16 dims a pair.
template <int kPairs>
__device__ __forceinline__ void add_pv(float (&o)[2 * kPairs][4], const uint32_t (&pf)[4], const __nv_bfloat16* vrow) {
#pragma unroll
  for (int np = 0; np < kPairs; ++np) {
    uint32_t bv[4];
    ldmatrix_x4_trans(bv, vrow + np * 16);
    mma_bf16(o[2 * np], pf, bv[0], bv[1]);
    mma_bf16(o[2 * np + 1], pf, bv[2], bv[3]);
  }
}

// S (scaled) for heads 16 hg .. +16 and keys 16 dg .. +16 of the tile into Ss.
__device__ __forceinline__ void score_tile(float* Ss, const __nv_bfloat16* Qs, const __nv_bfloat16* Ks, float scale, int hg, int dg,
                                           int lane) {
  const int g = lane >> 2, t4 = lane & 3;
  float sacc[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll 4
  for (int k0 = 0; k0 < kHd; k0 += 16) {
    uint32_t a[4], bk[4];
    ldmatrix_x4(a, Qs + (hg * 16 + (lane & 15)) * kLd + k0 + (lane >> 4) * 8);
    ldmatrix_x4(bk, Ks + (dg * 16 + (lane & 7) + ((lane >> 4) << 3)) * kLd + k0 + ((lane >> 3) & 1) * 8);
    mma_bf16(sacc[0], a, bk[0], bk[1]);
    mma_bf16(sacc[1], a, bk[2], bk[3]);
  }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const int col = dg * 16 + nt * 8 + 2 * t4;
    *reinterpret_cast<float2*>(Ss + (hg * 16 + g) * kSld + col) = make_float2(sacc[nt][0] * scale, sacc[nt][1] * scale);
    *reinterpret_cast<float2*>(Ss + (hg * 16 + g + 8) * kSld + col) = make_float2(sacc[nt][2] * scale, sacc[nt][3] * scale);
  }
}

// The end of an item for this thread's heads 16 hg + g, + 8 (the quad's denominators summed first)
// and dims 256 dg .. +256: with key shares (n_splits > 1) the unnormalised sum with its max and
// denominator into part, else the output scaled by the denominator and sink.
template <bool kBf16Out>
__device__ __forceinline__ void write_output(const float (&o)[kHd / 2 / 8][4], float m_a, float m_b, float l_a, float l_b,
                                             const float* __restrict__ sinks, float* __restrict__ out, __nv_bfloat16* __restrict__ out_b16,
                                             float* __restrict__ part, int64_t r, int heads, int h0, int nh, int n_splits, int split,
                                             int hg, int dg, int lane) {
  const int g = lane >> 2, t4 = lane & 3;
  l_a += __shfl_xor_sync(kFull, l_a, 1);
  l_a += __shfl_xor_sync(kFull, l_a, 2);
  l_b += __shfl_xor_sync(kFull, l_b, 1);
  l_b += __shfl_xor_sync(kFull, l_b, 2);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int hl = hg * 16 + g + half * 8;
    if (hl >= nh) continue;
    const int h = h0 + hl;
    const float m = (half ? m_b : m_a) * kLn2, l = half ? l_b : l_a;  // (the max back in base e)
    if (n_splits > 1) {  // this share's unnormalised sum with its max and denominator; the sink joins in the combine
      float* pp = part + ((r * heads + h) * n_splits + split) * (kHd + 2);
#pragma unroll
      for (int nt = 0; nt < kHd / 2 / 8; ++nt)
        *reinterpret_cast<float2*>(pp + dg * (kHd / 2) + nt * 8 + 2 * t4) = make_float2(o[nt][2 * half], o[nt][2 * half + 1]);
      if (dg == 0 && t4 == 0) {
        pp[kHd] = m;
        pp[kHd + 1] = l;
      }
    } else {
      const float2 fi = sink_scale(m, l, sinks[h]);
      const int64_t o0 = (r * heads + h) * kHd + dg * (kHd / 2);
#pragma unroll
      for (int nt = 0; nt < kHd / 2 / 8; ++nt) {
        const float2 v = make_float2(o[nt][2 * half] * fi.x * fi.y, o[nt][2 * half + 1] * fi.x * fi.y);
        if constexpr (kBf16Out)
          *reinterpret_cast<__nv_bfloat162*>(out_b16 + o0 + nt * 8 + 2 * t4) = __floats2bfloat162_rn(v.x, v.y);
        else
          *reinterpret_cast<float2*>(out + o0 + nt * 8 + 2 * t4) = v;
      }
    }
  }
}

// kBf16Out (no key shares): the output in bf16, into out_b16 (out unused).
template <bool kBf16Out>
__global__ void __launch_bounds__(kThreads, 1) mqa_attention_kernel(const float* __restrict__ q, const float* __restrict__ kv,
                                                                    const float* __restrict__ sinks,
                                                                    const int32_t* __restrict__ selected, int64_t sel_cols,
                                                                    int heads, BatchDev b, StateDev st, LayerDev L,
                                                                    float* __restrict__ out, int n_splits,
                                                                    float* __restrict__ part, __nv_bfloat16* __restrict__ out_b16) {
  pdl_begin();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* Qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);  // [kHeadTile][kLd]
  __nv_bfloat16* Ks = Qs + kHeadTile * kLd;                // [kKeyTile][kLd]
  auto* Ss = reinterpret_cast<float*>(Ks + kKeyTile * kLd);  // [kHeadTile][kSld]
  float* stage = Ss + kHeadTile * kSld;                       // [kKeyTile][kHd]: the next tile, fp32, in flight
  auto* kp = reinterpret_cast<const float**>(stage + kKeyTile * kHd);  // [2][kKeyTile]: each key's row, null if masked

  const int groups = (heads + kHeadTile - 1) / kHeadTile;
  const int split = static_cast<int>(blockIdx.x % n_splits);
  const int64_t rg = blockIdx.x / n_splits;
  const int64_t r = rg / groups;
  const int h0 = static_cast<int>(rg % groups) * kHeadTile;
  const int nh = min(kHeadTile, heads - h0);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int hg = warp & 3, dg = warp >> 2, g = lane >> 2, t4 = lane & 3;

  const AttentionKeys keys(b, st, L, kv, selected, sel_cols, r);
  int64_t j_begin, j_end;
  keys.share(split, n_splits, j_begin, j_end);
  const float scale = kLog2e / sqrtf(static_cast<float>(kHd));  // (base-2 scores: online_softmax_step)

  float o[kHd / 2 / 8][4];  // this warp's 16 heads x 256 dims: 32 n-tiles of m16n8
#pragma unroll
  for (int i = 0; i < kHd / 2 / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;  // rows g and g + 8 of the warp's heads

  auto resolve = [&](int64_t j0, const float** dst) { resolve_tile(keys, b, st, L, j0, j_end, dst); };
  auto issue = [&](const float* const* ptrs) { issue_tile(ptrs, kv, stage); };
  if (j_begin < j_end) {
    resolve(j_begin, kp);
    __syncthreads();
    issue(kp);
  }
  // The query heads to bf16 while the first tile's keys are in flight (the loop's first barrier
  // publishes them).
  stage_query<kHeadTile, 16>(Qs, q, r, heads, h0, nh, tid);
  int buf = 0;
  for (int64_t j0 = j_begin; j0 < j_end; j0 += kKeyTile, buf ^= 1) {
    cp_async_wait<0>();
    __syncthreads();  // the tile has landed (everyone's copies); the previous tile's readers are done with Ks and Ss
    tile_to_bf16(stage, Ks);
    const bool more = j0 + kKeyTile < j_end;
    if (more) resolve(j0 + kKeyTile, kp + (buf ^ 1) * kKeyTile);
    __syncthreads();  // Ks holds the tile, stage is free, the next pointers are known
    if (more) issue(kp + (buf ^ 1) * kKeyTile);
    const float* const* cur = kp + buf * kKeyTile;

    score_tile(Ss, Qs, Ks, scale, hg, dg, lane);
    __syncthreads();

    // Online softmax over the tile for rows g, g + 8: this thread's keys are, per 16-key step ks,
    // 16 ks + 2 t4 + {0, 1} and 16 ks + 8 + 2 t4 + {0, 1} (the A-fragment layout of P).
    float sa[8], sb[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int key = (i >> 2) * 16 + ((i >> 1) & 1) * 8 + 2 * t4 + (i & 1);
      const bool valid = cur[key] != nullptr;
      sa[i] = valid ? Ss[(hg * 16 + g) * kSld + key] : -INFINITY;
      sb[i] = valid ? Ss[(hg * 16 + g + 8) * kSld + key] : -INFINITY;
    }
    const float2 corr = online_softmax_step(sa, sb, m_a, m_b, l_a, l_b);
    const float corr_a = corr.x, corr_b = corr.y;
#pragma unroll
    for (int i = 0; i < kHd / 2 / 8; ++i) {
      o[i][0] *= corr_a;
      o[i][1] *= corr_a;
      o[i][2] *= corr_b;
      o[i][3] *= corr_b;
    }
    // O += P V over the tile's 32 keys (2 steps of 16), dims 256 dg .. +256 (16 pairs of n-tiles)
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      const uint32_t pf[4] = {pack_bf16(sa[4 * ks], sa[4 * ks + 1]), pack_bf16(sb[4 * ks], sb[4 * ks + 1]),
                              pack_bf16(sa[4 * ks + 2], sa[4 * ks + 3]), pack_bf16(sb[4 * ks + 2], sb[4 * ks + 3])};
      add_pv<kHd / 2 / 16>(o, pf, Ks + (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kLd + dg * (kHd / 2) + (lane >> 4) * 8);
    }
  }

  write_output<kBf16Out>(o, m_a, m_b, l_a, l_b, sinks, out, out_b16, part, r, heads, h0, nh, n_splits, split, hg, dg, lane);
}

// --- Decode: 16-head tiles. A 64-head block stages 128 KB of fp32 queries and writes 128 KB of
// partial output per key share, and 16 of them run at batch 1; with 16 heads a block stages and
// writes a quarter of that, and four times as many blocks share the work. The score tile S
// (16 heads x 32 keys) is split over the 512 dims: warp w multiplies dims 64 w .. +64, the eight
// partial tiles are summed in order in shared memory; the softmax of heads 2 w, 2 w + 1 is warp w's
// (its running max and denominator stay in its registers); for O += P V warp w owns dims 64 w .. +64.
constexpr int kNarrowHeads = 16;
constexpr int kPld = kKeyTile + 8;   // bf16 row stride of P: ldmatrix rows 16-byte aligned, distinct banks
constexpr int kSpLd = kKeyTile + 1;  // fp32 row stride of the partial score tiles
constexpr size_t kNarrowSmemBytes = sizeof(__nv_bfloat16) * (kNarrowHeads + kKeyTile) * kLd + sizeof(float) * kKeyTile * kHd +
                                    sizeof(float) * (kThreads / 32) * kNarrowHeads * kSpLd + sizeof(__nv_bfloat16) * kNarrowHeads * kPld +
                                    sizeof(float) * 3 * kNarrowHeads + sizeof(const float*) * 2 * kKeyTile;

// Warp `warp`'s partial S over dims 64 warp .. +64 (16 heads x 32 keys: 4 n-tiles) into its tile of Sp.
// sacc comes zeroed from the kernel: declared here, it changed the kernel's register assignment.
__device__ __forceinline__ void partial_scores(float (&sacc)[4][4], float* Sp, const __nv_bfloat16* Qs, const __nv_bfloat16* Ks, int warp,
                                               int lane) {
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const int k0 = warp * 64 + ks * 16;
    uint32_t a[4];
    ldmatrix_x4(a, Qs + (lane & 15) * kLd + k0 + (lane >> 4) * 8);
#pragma unroll
    for (int np = 0; np < 2; ++np) {
      uint32_t bk[4];
      ldmatrix_x4(bk, Ks + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * kLd + k0 + ((lane >> 3) & 1) * 8);
      mma_bf16(sacc[2 * np], a, bk[0], bk[1]);
      mma_bf16(sacc[2 * np + 1], a, bk[2], bk[3]);
    }
  }
  float* sp = Sp + warp * kNarrowHeads * kSpLd;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    sp[g * kSpLd + nt * 8 + 2 * t4] = sacc[nt][0];
    sp[g * kSpLd + nt * 8 + 2 * t4 + 1] = sacc[nt][1];
    sp[(g + 8) * kSpLd + nt * 8 + 2 * t4] = sacc[nt][2];
    sp[(g + 8) * kSpLd + nt * 8 + 2 * t4 + 1] = sacc[nt][3];
  }
}

// The online softmax of warp `warp`'s heads 2 warp + i over the tile (lane = key; the eight partial
// scores summed in warp order): running max and denominator in m_own, l_own; P (bf16) and each
// head's rescale factor into shared memory.
__device__ __forceinline__ void tile_softmax(float (&m_own)[2], float (&l_own)[2], __nv_bfloat16* P, float* corr_s, const float* Sp,
                                             const float* const* cur, float scale, int warp, int lane) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int h = 2 * warp + i;
    float sv = 0.0f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) sv += Sp[(w * kNarrowHeads + h) * kSpLd + lane];
    sv = cur[lane] != nullptr ? sv * scale : -INFINITY;
    const float mn = fmaxf(m_own[i], warp_max(sv));
    // A head with no valid key so far keeps max -inf: nothing to rescale, every p is 0.
    const float corr = mn == -INFINITY ? 1.0f : expf(m_own[i] - mn);
    const float pv = sv == -INFINITY ? 0.0f : expf(sv - mn);
    l_own[i] = l_own[i] * corr + warp_sum(pv);
    m_own[i] = mn;
    P[h * kPld + lane] = __float2bfloat16_rn(pv);
    if (lane == 0) corr_s[h] = corr;
  }
}

// The end of an item for this thread's heads g, g + 8 (their max and denominator from m_s, l_s) and
// dims 64 warp .. +64: with key shares (n_splits > 1) the unnormalised sum with its max and
// denominator into part, else the output scaled by the denominator and sink.
__device__ __forceinline__ void write_output_narrow(const float (&o)[8][4], const float* m_s, const float* l_s,
                                                    const float* __restrict__ sinks, float* __restrict__ out, float* __restrict__ part,
                                                    int64_t r, int heads, int h0, int nh, int n_splits, int split, int warp, int g,
                                                    int t4) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int hl = g + half * 8;
    if (hl >= nh) continue;
    const int h = h0 + hl;
    const float m = m_s[hl], l = l_s[hl];
    if (n_splits > 1) {  // this share's unnormalised sum with its max and denominator; the sink joins in the combine
      float* pp = part + ((r * heads + h) * n_splits + split) * (kHd + 2);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        *reinterpret_cast<float2*>(pp + warp * 64 + nt * 8 + 2 * t4) = make_float2(o[nt][2 * half], o[nt][2 * half + 1]);
      if (warp == 0 && t4 == 0) {
        pp[kHd] = m;
        pp[kHd + 1] = l;
      }
    } else {
      const float2 fi = sink_scale(m, l, sinks[h]);
      float* orow = out + (r * heads + h) * kHd + warp * 64;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        *reinterpret_cast<float2*>(orow + nt * 8 + 2 * t4) = make_float2(o[nt][2 * half] * fi.x * fi.y, o[nt][2 * half + 1] * fi.x * fi.y);
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1) mqa_attention_narrow_kernel(const float* __restrict__ q, const float* __restrict__ kv,
                                                                           const float* __restrict__ sinks,
                                                                           const int32_t* __restrict__ selected, int64_t sel_cols,
                                                                           int heads, BatchDev b, StateDev st, LayerDev L,
                                                                           float* __restrict__ out, int n_splits,
                                                                           float* __restrict__ part) {
  pdl_begin();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* Qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);                   // [kNarrowHeads][kLd]
  __nv_bfloat16* Ks = Qs + kNarrowHeads * kLd;                              // [kKeyTile][kLd]
  auto* stage = reinterpret_cast<float*>(Ks + kKeyTile * kLd);             // [kKeyTile][kHd]: the next tile, fp32, in flight
  float* Sp = stage + kKeyTile * kHd;                                       // [warps][kNarrowHeads][kSpLd]: partial scores
  auto* P = reinterpret_cast<__nv_bfloat16*>(Sp + (kThreads / 32) * kNarrowHeads * kSpLd);  // [kNarrowHeads][kPld]
  auto* corr_s = reinterpret_cast<float*>(P + kNarrowHeads * kPld);        // [kNarrowHeads]: this tile's rescale
  float* m_s = corr_s + kNarrowHeads;                                       // [kNarrowHeads]: the final max
  float* l_s = m_s + kNarrowHeads;                                          // [kNarrowHeads]: the final denominator
  auto* kp = reinterpret_cast<const float**>(l_s + kNarrowHeads);          // [2][kKeyTile]

  const int groups = (heads + kNarrowHeads - 1) / kNarrowHeads;
  const int split = static_cast<int>(blockIdx.x % n_splits);
  const int64_t rg = blockIdx.x / n_splits;
  const int64_t r = rg / groups;
  const int h0 = static_cast<int>(rg % groups) * kNarrowHeads;
  const int nh = min(kNarrowHeads, heads - h0);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;

  const AttentionKeys keys(b, st, L, kv, selected, sel_cols, r);
  int64_t j_begin, j_end;
  keys.share(split, n_splits, j_begin, j_end);
  const float scale = 1.0f / sqrtf(static_cast<float>(kHd));

  auto resolve = [&](int64_t j0, const float** dst) { resolve_tile(keys, b, st, L, j0, j_end, dst); };
  auto issue = [&](const float* const* ptrs) { issue_tile(ptrs, kv, stage); };
  if (j_begin < j_end) {
    resolve(j_begin, kp);
    __syncthreads();
    issue(kp);
  }
  // The block's query heads to bf16 (rows past nh: zeros) while the first keys are in flight.
  {
    const float* qrow = q + (r * heads + h0) * kHd;
    constexpr int kQLoads = kNarrowHeads * (kHd / 4) / kThreads;
    float4 v[kQLoads];
#pragma unroll
    for (int u = 0; u < kQLoads; ++u) {
      const int idx = u * kThreads + tid, h = idx / (kHd / 4), c = (idx % (kHd / 4)) * 4;
      v[u] = h < nh ? *reinterpret_cast<const float4*>(qrow + static_cast<int64_t>(h) * kHd + c) : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kQLoads; ++u) {
      const int idx = u * kThreads + tid, h = idx / (kHd / 4), c = (idx % (kHd / 4)) * 4;
      store_bf16x4(Qs + h * kLd + c, v[u]);
    }
  }
  float o[8][4];  // heads g, g + 8 x this warp's dims 64 warp .. +64 (8 n-tiles)
#pragma unroll
  for (int i = 0; i < 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_own[2] = {-INFINITY, -INFINITY}, l_own[2] = {0.0f, 0.0f};  // heads 2 warp, 2 warp + 1 (every lane)
  int buf = 0;
  for (int64_t j0 = j_begin; j0 < j_end; j0 += kKeyTile, buf ^= 1) {
    cp_async_wait<0>();
    __syncthreads();  // the tile has landed; the previous tile's readers are done with Ks and P
    tile_to_bf16(stage, Ks);
    const bool more = j0 + kKeyTile < j_end;
    if (more) resolve(j0 + kKeyTile, kp + (buf ^ 1) * kKeyTile);
    __syncthreads();  // Ks holds the tile, stage is free, the next pointers are known
    if (more) issue(kp + (buf ^ 1) * kKeyTile);
    const float* const* cur = kp + buf * kKeyTile;

    float sacc[4][4] = {};
    partial_scores(sacc, Sp, Qs, Ks, warp, lane);
    __syncthreads();

    tile_softmax(m_own, l_own, P, corr_s, Sp, cur, scale, warp, lane);
    __syncthreads();  // P and the rescale factors are ready

    const float ca = corr_s[g], cb = corr_s[g + 8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      o[i][0] *= ca;
      o[i][1] *= ca;
      o[i][2] *= cb;
      o[i][3] *= cb;
    }
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      uint32_t pf[4];
      ldmatrix_x4(pf, P + (lane & 15) * kPld + ks * 16 + (lane >> 4) * 8);
      add_pv<4>(o, pf, Ks + (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kLd + warp * 64 + (lane >> 4) * 8);
    }
  }
  if (lane == 0) {
    m_s[2 * warp] = m_own[0], m_s[2 * warp + 1] = m_own[1];
    l_s[2 * warp] = l_own[0], l_s[2 * warp + 1] = l_own[1];
  }
  __syncthreads();
  write_output_narrow(o, m_s, l_s, sinks, out, part, r, heads, h0, nh, n_splits, split, warp, g, t4);
}

}  // namespace

cudaError_t prepare_attention_mma(size_t device_max) {
  cudaError_t e = allow_smem<mqa_attention_narrow_kernel>(kNarrowSmemBytes, device_max);
  if (e == cudaSuccess) e = allow_smem<mqa_attention_kernel<true>>(kSmemBytes, device_max);
  if (e == cudaSuccess) e = allow_smem<mqa_attention_kernel<false>>(kSmemBytes, device_max);
  return e;
}

bool attention_mqa_supported(const StateDev& st, const LayerDev& L) {
  // float4 loads of keys: every row the kernel reads must start 16-byte aligned
  auto al = [](int64_t floats) { return floats % 4 == 0; };
  return L.head_dim == kHd && al(st.slot_floats) && al(st.block_floats) && al(L.window_offset) && al(L.entry_offset) &&
         aligned16(st.slots) && aligned16(st.blocks);
}

cudaError_t attention_mqa(const float* q, const float* kv, const float* sinks, const int32_t* selected, int64_t sel_cols, int heads,
                          BatchDev b, StateDev st, LayerDev L, float* out, Stream s, int n_splits, float* partial,
                          RopeDev unrope, int head_tile, bf16_t* out_b16) {
  if (b.rows <= 0 || heads <= 0) return cudaSuccess;
  if (!attention_mqa_supported(st, L) || n_splits < 1 || (n_splits > 1 && !partial) || (head_tile != kHeadTile && head_tile != kNarrowHeads) ||
      (out_b16 && (n_splits != 1 || head_tile != kHeadTile)))
    return cudaErrorInvalidValue;
  const bool narrow = head_tile == kNarrowHeads;
  const int groups = (heads + head_tile - 1) / head_tile;
  const int64_t blocks = static_cast<int64_t>(b.rows) * groups * n_splits;
  if (blocks > 2147483647) return cudaErrorInvalidValue;
  if (narrow)
    launch(mqa_attention_narrow_kernel, static_cast<unsigned>(blocks), kThreads, kNarrowSmemBytes, s)(q, kv, sinks, selected, sel_cols, heads,
                                                                                                    b, st, L, out, n_splits, partial);
  else if (out_b16) {  // then the rotation back on the bf16 values
    launch(mqa_attention_kernel<true>, static_cast<unsigned>(blocks), kThreads, kSmemBytes, s)(
        q, kv, sinks, selected, sel_cols, heads, b, st, L, out, n_splits, partial, reinterpret_cast<__nv_bfloat16*>(out_b16));
    if (unrope.inv_freq) return rope_bf16(out_b16, b.rows, static_cast<int64_t>(heads) * kHd, kHd, unrope, b.positions, true, s);
    return cudaGetLastError();
  } else {
    launch(mqa_attention_kernel<false>, static_cast<unsigned>(blocks), kThreads, kSmemBytes, s)(q, kv, sinks, selected, sel_cols, heads, b, st,
                                                                                            L, out, n_splits, partial, nullptr);
  }
  if (n_splits > 1)
    return attention_combine(partial, sinks, static_cast<int64_t>(b.rows) * heads, heads, kHd, n_splits, out, s, unrope, b.positions);
  if (unrope.inv_freq) return rope(out, b.rows, static_cast<int64_t>(heads) * kHd, kHd, unrope, b.positions, true, s);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
