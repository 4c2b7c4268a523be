// Prefill attention for head_dim 512 with one shared K=V head on Hopper's warpgroup MMA (wgmma),
// reading keys from a bf16 key table made for the forward (the state keeps fp32 rows).
//
// Items are (row, group of 64 heads); a block of two warpgroups takes one at a time (a block a
// multiprocessor walking them, or a block an item). Warpgroup h owns dims 256 h .. +256: it stages
// that half of the 64 query heads and of every 64-key tile (cp.async straight into the swizzled
// layout wgmma reads), multiplies its half of S = Q K^T (m64n64, K-major operands), and the two
// halves are summed through shared memory. Both warpgroups then run the same online softmax (base 2)
// on the full S (identical max and denominator), and each adds P V for its 256 dims (P from
// registers, V = the same key tile read N-major). Key tiles are double-buffered: the next tile's
// copies go out while the tensor cores multiply this one's S; the next item's query goes out while
// the last tile's softmax and P V run. The output leaves through shared memory in whole head rows.
#include "common.cuh"
#include "mma.cuh"
#include "wgmma.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kHd = 512, kHeads = 64, kKeys = 64, kThreads = 256;
constexpr uint32_t kAtom = 8192;                       // one 64-wide column block of a 64-row tile
constexpr uint32_t kQBytes = 8 * kAtom, kTileBytes = 8 * kAtom;
constexpr uint32_t kExchFloat4 = 8 * 128;              // per warpgroup: 32 floats of S per thread
constexpr size_t kSmemBytes = 1024 /* alignment */ + kQBytes + 2 * kTileBytes + 2 * kExchFloat4 * 16 +
                              3 * kKeys * sizeof(const __nv_bfloat16*) + 3 * 2 * sizeof(uint32_t);  // (231960 of the 232448 allowed)

// Key j of row r (AttentionKeys' order) in the table, in two steps so that the global load of a
// selected entry's index is in flight while the block works: key_index gives the entry (the
// `selected` value, or kWindowKey, or kNoKey past the row's keys), key_row the row it names (null
// where AttentionKeys::key is null).
constexpr int32_t kWindowKey = -2, kNoKey = -3;

struct TableKeys {
  AttentionKeys k;
  const __nv_bfloat16* kv;    // this forward's rows
  const __nv_bfloat16* seq;   // the row's sequence in the table: ring, then entries
  int32_t ring, entries;

  __device__ TableKeys(const BatchDev& b, const StateDev& st, const LayerDev& L, const KeyTableDev& t, const int32_t* selected,
                       int64_t sel_cols, int64_t r)
      : k(b, st, L, nullptr, selected, sel_cols, r) {
    kv = reinterpret_cast<const __nv_bfloat16*>(t.kv);
    seq = reinterpret_cast<const __nv_bfloat16*>(t.rows) + static_cast<int64_t>(t.seq_first[b.row_seq[r]]) * kHd;
    ring = k.sq.n_past > 0 ? L.window : 0;
    entries = L.rate > 0 ? (k.sq.n_past + k.sq.n_tokens) / L.rate : 0;
  }
  __device__ int32_t key_index(int64_t j) const {
    if (j >= k.total) return kNoKey;
    if (j < k.n_win) return kWindowKey;
    const int64_t idx = j - k.n_win;
    return k.selected ? k.selected[k.r * k.sel_cols + idx] : static_cast<int32_t>(idx);
  }
  __device__ const __nv_bfloat16* key_row(int64_t j, int32_t w, const LayerDev& L) const {
    if (w == kWindowKey) {
      const int32_t pos = k.lo + static_cast<int32_t>(j);
      return pos >= k.sq.n_past ? kv + static_cast<int64_t>(k.sq.first_row + pos - k.sq.n_past) * kHd
                                : seq + static_cast<int64_t>(pos % L.window) * kHd;
    }
    return w >= 0 && w < entries ? seq + static_cast<int64_t>(ring + w) * kHd : nullptr;
  }
};

// A bf16 query row's heads as the kernel loads them (v[u]: channels 8 lane .. + 8 of this
// warpgroup's 256 of head 4 u + warp), rotated by position, NOT scaled: rope commutes with the
// per-head 1 / rms, which the softmax applies to the scores instead (query_inv), so that nothing
// but the rotation stands between the query's loads and the first product. Each head's sum of
// squares over this warpgroup's half goes to qss[64 wg + head] (read after a barrier). The
// rotation (rope_dim <= 64: at most 32 pairs) takes one cosine / sine per lane, shuffled to the
// lanes holding the pairs.
__device__ __forceinline__ void rotate_query(uint4 (&v)[16], const QueryNorm& qn, int32_t position, int wg, int wt, float* qss) {
  const int warp = wt >> 5, lane = wt & 31;
#pragma unroll
  for (int u = 0; u < 16; ++u) {
    const uint32_t w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = unpack_bf16(w[k]);
      acc += f.x * f.x + f.y * f.y;
    }
    acc = warp_sum(acc);
    if (lane == 0) qss[64 * wg + 4 * u + warp] = acc;
  }
  const int pairs = qn.rope.rope_dim / 2, first = kHd - qn.rope.rope_dim;  // the rotated channels: first ..
  if (256 * wg + 256 <= first) return;  // (warpgroup-uniform: no rotated channel in this half)
  const float2 mine = lane < pairs ? rope_cos_sin(qn.rope, position, lane, false) : make_float2(1.0f, 0.0f);
  const int dim0 = 256 * wg + 8 * lane;  // this thread's first channel
  float2 cs[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int pair = (dim0 + 2 * k - first) / 2;  // (negative: not rotated)
    const int src = pair < 0 ? 0 : pair;
    cs[k] = make_float2(__shfl_sync(kFull, mine.x, src), __shfl_sync(kFull, mine.y, src));
  }
  if (dim0 + 8 <= first) return;
#pragma unroll
  for (int u = 0; u < 16; ++u) {
    uint32_t w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (dim0 + 2 * k >= first) {
        const float2 f = unpack_bf16(w[k]);
        const float2 rf = rotate_by(f.x, f.y, cs[k]);
        w[k] = pack_bf16(rf.x, rf.y);
      }
    v[u] = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// 1 / rms of head h's query from the two warpgroups' sums of squares (rotate_query).
__device__ __forceinline__ float query_inv(const float* qss, int h, float eps) {
  return 1.0f / sqrtf((qss[h] + qss[64 + h]) / static_cast<float>(kHd) + eps);
}

#if defined(DI_WGMMA)
// Issues this warpgroup's half of S = Q K^T for the key tile at shared address kt (16 m64n64k16
// products over its 256 dims; K-major operands); the caller waits for them.
__device__ __forceinline__ void issue_scores(float (&s)[32], uint32_t q_addr, uint32_t kt, int wg) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 16; ++ks) {
    const uint32_t col = (4 * wg + (ks >> 2)) * kAtom + (ks & 3) * 32;
    wgmma_m64n64k16_ss(s, smem_desc(q_addr + col, 16, 1024), smem_desc(kt + col, 16, 1024), ks > 0);
  }
  wgmma_commit();
}

// Rows g, g + 8 of S (of this warp's 16 heads) scaled, -inf where the key is masked (vk: the tile's
// validity bits): this thread's keys are 8 j + 2 t4 + {0, 1} (sa[2 j + e], sb[2 j + e] from the
// accumulator's n8 tile j).
__device__ __forceinline__ void masked_scores(float (&sa)[16], float (&sb)[16], const float (&s)[32], const uint32_t* vk, float scale_a,
                                              float scale_b, int t4) {
  const uint64_t valid_keys = (static_cast<uint64_t>(vk[1]) << 32 | vk[0]) >> (2 * t4);
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const bool valid = (valid_keys >> (8 * j + e)) & 1;
      sa[2 * j + e] = valid ? s[4 * j + e] * scale_a : -INFINITY;
      sb[2 * j + e] = valid ? s[4 * j + 2 + e] * scale_b : -INFINITY;
    }
}

// O's rows g (corr.x) and g + 8 (corr.y) rescaled after their maxima moved.
__device__ __forceinline__ void rescale_output(float (&o)[128], float2 corr) {
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    o[4 * j] *= corr.x;
    o[4 * j + 1] *= corr.x;
    o[4 * j + 2] *= corr.y;
    o[4 * j + 3] *= corr.y;
  }
}

// O += P V for the tile at kt (this warpgroup's 256 dims, V = the key tile read N-major): keys
// 16 kk .. +16 are S's column tiles 2 kk and 2 kk + 1 (the A fragment layout, packed into pf).
__device__ __forceinline__ void add_pv(float (&o)[128], uint32_t (&pf)[4][4], const float (&sa)[16], const float (&sb)[16], uint32_t kt,
                                       int wg) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    pf[kk][0] = pack_bf16(sa[4 * kk], sa[4 * kk + 1]);
    pf[kk][1] = pack_bf16(sb[4 * kk], sb[4 * kk + 1]);
    pf[kk][2] = pack_bf16(sa[4 * kk + 2], sa[4 * kk + 3]);
    pf[kk][3] = pack_bf16(sb[4 * kk + 2], sb[4 * kk + 3]);
  }
  fence_operands(o);  // the rescale stays before the fence (an accumulator written inside the stage serializes it)
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_m64n256k16_rs_nmajor(o, pf[kk], smem_desc(kt + 4 * wg * kAtom + kk * 2048, kAtom, 1024));
  wgmma_commit();
  wgmma_wait<0>();  // (left in flight across the loop's back edge, ptxas serializes every product)
  fence_operands(o);
}

// This warpgroup's half of item `item`'s bf16 query heads into Qs by cp.async (zeros past the heads);
// thread wt copies the chunks it later rotates (rotate_query), so it needs no barrier to read them.
__device__ __forceinline__ void issue_query_copies(unsigned char* Qs, const __nv_bfloat16* qb, int64_t item, int groups, int heads, int wg,
                                                   int wt) {
  const int64_t r = item / groups;
  const int h0 = static_cast<int>(item % groups) * kHeads, nh = min(kHeads, heads - h0);
  const __nv_bfloat16* qrow = qb + (r * heads + h0) * kHd + 256 * wg;
#pragma unroll
  for (int u = 0; u < 16; ++u) {
    const int idx = u * 128 + wt, h = idx >> 5, c = idx & 31;
    cp_async16(Qs + (4 * wg + (c >> 3)) * kAtom + swizzle128(h, c & 7),
               h < nh ? static_cast<const void*>(qrow + static_cast<int64_t>(h) * kHd + 8 * c) : static_cast<const void*>(qb), h < nh);
  }
  cp_async_commit();
}

// This warpgroup's half of the block's n-th key tile (64 keys x 32 chunks of 16 B; rows from kp slot
// n % 3, null: zeros) into key buffer n & 1 by cp.async.
__device__ __forceinline__ void issue_key_copies(unsigned char* Ks, const __nv_bfloat16* const* kp, const void* kv, int64_t n, int wg,
                                                 int wt) {
  const __nv_bfloat16* const* ptr = kp + (n % 3) * kKeys;
  unsigned char* dst = Ks + (n & 1) * kTileBytes + 4 * wg * kAtom;
#pragma unroll
  for (int u = 0; u < kKeys * 32 / 128; ++u) {
    const int idx = u * 128 + wt, key = idx >> 5, c = idx & 31;
    const __nv_bfloat16* src = ptr[key];
    cp_async16(dst + (c >> 3) * kAtom + swizzle128(key, c & 7), src ? static_cast<const void*>(src + 256 * wg + 8 * c) : kv,
               src != nullptr);
  }
  cp_async_commit();
}

// This warpgroup's half of S into its exchange slots (the other warpgroup adds it to its half).
__device__ __forceinline__ void store_half(float4* mine, const float (&s)[32], int wt) {
#pragma unroll
  for (int i = 0; i < 8; ++i) mine[i * 128 + wt] = make_float4(s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]);
}

// O (this thread's heads warp_heads + g, + 8; rows scaled by f) into `stage` as bf16, the rope
// channels rotated back by the row's position (unrope.inv_freq; rope_dim <= 64): one cosine / sine a
// lane, shuffled to the lanes holding each n8 tile's pair. Layout [head][32 chunks of 16 B] with chunk
// j at j ^ (head & 7) (no bank conflicts either way). The lane is read here (an argument would turn
// a comparison around).
__device__ __forceinline__ void stage_output(unsigned char* stage, const float (&o)[128], const float (&f)[2], const RopeDev& unrope,
                                             const int32_t* positions, int64_t r, int warp_heads, int wg, int g, int t4) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int first = unrope.inv_freq ? kHd - unrope.rope_dim : kHd;
  const float2 mine = lane < (kHd - first) / 2 ? rope_cos_sin(unrope, positions[r], lane, true) : make_float2(1.0f, 0.0f);
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const int dim = 256 * wg + 8 * j + 2 * t4;
    float2 cs = make_float2(1.0f, 0.0f);
    if (256 * wg + 8 * j + 8 > first) {  // (warp-uniform)
      const int pair = max((dim - first) / 2, 0);
      const float2 c = make_float2(__shfl_sync(kFull, mine.x, pair), __shfl_sync(kFull, mine.y, pair));
      if (dim >= first) cs = c;
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int hl = warp_heads + g + 8 * half;
      const float2 v = rotate_by(o[4 * j + 2 * half] * f[half], o[4 * j + 2 * half + 1] * f[half], cs);
      *reinterpret_cast<uint32_t*>(stage + hl * 512 + ((j ^ (hl & 7)) << 4) + 4 * t4) = pack_bf16(v.x, v.y);
    }
  }
}

// The staged output (stage_output, in this warpgroup's half of key buffer 0) to out, a 512-byte head
// row a warp (heads past nh skipped).
__device__ __forceinline__ void copy_out(const unsigned char* Ks, __nv_bfloat16* out, int64_t r, int heads, int h0, int nh, int wg, int wt,
                                         int lane) {
  const unsigned char* stage = Ks + 4 * wg * kAtom;
#pragma unroll
  for (int u = 0; u < 16; ++u) {
    const int hl = 4 * u + (wt >> 5), c = lane;
    if (hl < nh)
      *reinterpret_cast<uint4*>(out + (r * heads + h0 + hl) * kHd + 256 * wg + 8 * c) =
          *reinterpret_cast<const uint4*>(stage + hl * 512 + ((c ^ (hl & 7)) << 4));
  }
}

// The other warpgroup's half of S (from its exchange slots, store_half) added to this warpgroup's.
__device__ __forceinline__ void add_other_half(float (&s)[32], const float4* exch, int wg, int wt) {
  const float4* other = exch + (wg ^ 1) * kExchFloat4;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 v = other[i * 128 + wt];
    s[4 * i] += v.x, s[4 * i + 1] += v.y, s[4 * i + 2] += v.z, s[4 * i + 3] += v.w;
  }
}

// Each of this thread's heads' output scale (f[0]: head warp_heads + g, f[1]: + 8): the softmax
// denominator summed over the quad, and the sink; 0 past the heads.
__device__ __forceinline__ void output_scales(float (&f)[2], float m_a, float m_b, float l_a, float l_b, const float* sinks, int h0, int nh,
                                              int warp_heads, int g) {
  l_a += __shfl_xor_sync(kFull, l_a, 1);
  l_a += __shfl_xor_sync(kFull, l_a, 2);
  l_b += __shfl_xor_sync(kFull, l_b, 1);
  l_b += __shfl_xor_sync(kFull, l_b, 2);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int hl = warp_heads + g + 8 * half;
    const float2 fi =
        hl < nh ? sink_scale((half ? m_b : m_a) * kLn2, half ? l_b : l_a, sinks[h0 + hl]) : make_float2(0.0f, 0.0f);  // (max in base e)
    f[half] = fi.x * fi.y;
  }
}

// The bf16 query staged in Qs (this warpgroup's half) rotated in place (rotate_query).
__device__ __forceinline__ void rotate_staged_query(uint4 (&v)[16], unsigned char* Qs, const QueryNorm& qn, const int32_t* positions,
                                                    int64_t r, int wg, int wt, float* qss) {
#pragma unroll
  for (int u = 0; u < 16; ++u) {
    const int idx = u * 128 + wt, h = idx >> 5, c = idx & 31;
    v[u] = *reinterpret_cast<const uint4*>(Qs + (4 * wg + (c >> 3)) * kAtom + swizzle128(h, c & 7));
  }
  rotate_query(v, qn, positions[r], wg, wt, qss);
#pragma unroll
  for (int u = 0; u < 16; ++u) {
    const int idx = u * 128 + wt, h = idx >> 5, c = idx & 31;
    *reinterpret_cast<uint4*>(Qs + (4 * wg + (c >> 3)) * kAtom + swizzle128(h, c & 7)) = v[u];
  }
}

// This warpgroup's half of the fp32 query heads h0 .. of row r into Qs, rounded to bf16 (zeros past
// the heads): all 32 loads of a thread at once (one round of latency).
__device__ __forceinline__ void stage_query_f32(float4 (&v)[32], unsigned char* Qs, const float* q, int64_t r, int heads, int h0, int nh,
                                                int wg, int wt) {
  const float* qrow = q + (r * heads + h0) * kHd + 256 * wg;
#pragma unroll
  for (int u = 0; u < 16; ++u) {
    const int idx = u * 128 + wt, h = idx >> 5, c = idx & 31;
    const float* src = qrow + static_cast<int64_t>(h) * kHd + 8 * c;
    v[2 * u] = h < nh ? *reinterpret_cast<const float4*>(src) : make_float4(0, 0, 0, 0);
    v[2 * u + 1] = h < nh ? *reinterpret_cast<const float4*>(src + 4) : make_float4(0, 0, 0, 0);
  }
#pragma unroll
  for (int u = 0; u < 16; ++u) {
    const int idx = u * 128 + wt, h = idx >> 5, c = idx & 31;
    const uint4 packed = make_uint4(pack_bf16(v[2 * u].x, v[2 * u].y), pack_bf16(v[2 * u].z, v[2 * u].w),
                                    pack_bf16(v[2 * u + 1].x, v[2 * u + 1].y), pack_bf16(v[2 * u + 1].z, v[2 * u + 1].w));
    *reinterpret_cast<uint4*>(Qs + (4 * wg + (c >> 3)) * kAtom + swizzle128(h, c & 7)) = packed;
  }
}

// This warpgroup's half of the query heads h0 .. of row r in Qs as the products read them (qb's
// copies already issued).
__device__ __forceinline__ void stage_query(unsigned char* Qs, const float* q, const __nv_bfloat16* qb, const QueryNorm& qn,
                                            const int32_t* positions, int64_t r, int heads, int h0, int nh, int64_t n_tiles, int wg, int wt,
                                            float* qss) {
  if (qb) {  // already bf16 (in Qs: the group before the first tile's)
    if (n_tiles > 0)
      cp_async_wait<1>();
    else
      cp_async_wait<0>();
    if (qn.eps >= 0.0f) {  // rotated in place
      uint4 v[16];
      rotate_staged_query(v, Qs, qn, positions, r, wg, wt, qss);
    }
  } else {  // ... from fp32, rounded here: all 32 loads of a thread at once (one round of latency)
    float4 v[32];
    stage_query_f32(v, Qs, q, r, heads, h0, nh, wg, wt);
  }
}

// The softmax scale of this thread's rows (heads ha, ha + 8), times each head's 1 / rms when the
// query is normalised here (after a barrier: every warp's sums of squares are in qss).
__device__ __forceinline__ void softmax_scales(float& scale_a, float& scale_b, float scale, const QueryNorm& qn, const float* qss, int tid,
                                               int g) {
  scale_a = scale, scale_b = scale;
  if (qn.eps >= 0.0f) {
    __syncthreads();
    const int ha = 16 * ((tid >> 5) & 3) + g;
    scale_a *= query_inv(qss, ha, qn.eps);
    scale_b *= query_inv(qss, ha + 8, qn.eps);
  }
}

#endif

__global__ void __launch_bounds__(kThreads, 1)
    mqa_attention_wgmma_kernel(const float* __restrict__ q, const __nv_bfloat16* __restrict__ qb, KeyTableDev t,
                               const float* __restrict__ sinks, const int32_t* __restrict__ selected, int64_t sel_cols, int heads,
                               BatchDev b, StateDev st, LayerDev L, QueryNorm qn, RopeDev unrope, __nv_bfloat16* __restrict__ out) {
  pdl_begin();
#if defined(DI_WGMMA)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* Qs = smem_raw + ((1024 - (raw & 1023)) & 1023);  // [8 column blocks][64 heads x 128 B]
  unsigned char* Ks = Qs + kQBytes;                                // [2 buffers][8 column blocks][64 keys x 128 B]
  auto* exch = reinterpret_cast<float4*>(Ks + 2 * kTileBytes);     // [2 warpgroups][8][128 threads]: halves of S
  auto* kp = reinterpret_cast<const __nv_bfloat16**>(exch + 2 * kExchFloat4);  // [3][kKeys]: key rows, null if masked
  auto* kvalid = reinterpret_cast<uint32_t*>(kp + 3 * kKeys);      // [3][2]: bit k of a tile's keys: kp[k] != null
  auto* qss = reinterpret_cast<float*>(exch);  // [2 warpgroups][64 heads]: the query's sums of squares, read before the loop
  const uint32_t q_addr = static_cast<uint32_t>(__cvta_generic_to_shared(Qs)), k_addr = q_addr + kQBytes;

  const int groups = (heads + kHeads - 1) / kHeads;
  const int64_t items = static_cast<int64_t>(b.rows) * groups;
  const int tid = threadIdx.x, wg = tid >> 7, wt = tid & 127, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const float scale = kLog2e / sqrtf(static_cast<float>(kHd));  // (base-2 scores: online_softmax_step)

  auto issue_query = [&](int64_t item) { issue_query_copies(Qs, qb, item, groups, heads, wg, wt); };

  // The block walks items (row, group of 64 heads) blockIdx.x, + gridDim.x, ...; `walked` counts the
  // key tiles of its earlier items (tile i of an item sits in buffer (walked + i) & 1, its rows in
  // kp slot (walked + i) % 3). While an item's last tile is multiplied, the next item's query is
  // already on its way into Qs (query_ahead).
  int64_t walked = 0;
  bool query_ahead = false;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t r = item / groups;
    const int h0 = static_cast<int>(item % groups) * kHeads, nh = min(kHeads, heads - h0);
    const TableKeys keys(b, st, L, t, selected, sel_cols, r);
    const int64_t n_tiles = (keys.k.total + kKeys - 1) / kKeys;

    // The key rows of a tile into kp[tile % 3]: fetch (threads < kKeys) starts the index load, place
    // stores the row.
    auto fetch = [&](int64_t tile) { return tid < kKeys ? keys.key_index(tile * kKeys + tid) : kNoKey; };
    auto place = [&](int64_t tile, int32_t w) {
      if (tid < kKeys) {  // (warps 0 and 1)
        const __nv_bfloat16* row = keys.key_row(tile * kKeys + tid, w, L);
        kp[((walked + tile) % 3) * kKeys + tid] = row;
        const uint32_t bits = __ballot_sync(kFull, row != nullptr);
        if (lane == 0) kvalid[((walked + tile) % 3) * 2 + (tid >> 5)] = bits;
      }
    };
    auto issue = [&](int64_t tile) { issue_key_copies(Ks, kp, t.kv, walked + tile, wg, wt); };

    place(0, fetch(0));
    place(1, fetch(1));
    __syncthreads();  // (also: the previous item's output is out of the staging buffer)
    if (qb && !query_ahead) issue_query(item);
    query_ahead = false;
    if (n_tiles > 0) issue(0);
    stage_query(Qs, q, qb, qn, b.positions, r, heads, h0, nh, n_tiles, wg, wt, qss);

    float scale_a, scale_b;
    softmax_scales(scale_a, scale_b, scale, qn, qss, tid, g);

    float o[128] = {};  // O for heads 16 (warp % 4) + g, + 8 x this warpgroup's 256 dims (m64n256 accumulator layout)
    float m_b = -INFINITY, m_a = -INFINITY, l_b = 0.0f, l_a = 0.0f;  // (in this order: ptxas schedules by register numbering)

    for (int64_t tile = 0; tile < n_tiles; ++tile) {
      cp_async_wait<0>();
      fence_proxy_async();
      __syncthreads();  // the tile has landed (both halves); everyone is done with the other buffer and the S halves

      const int32_t w_ahead = fetch(tile + 2);  // (its load overlaps the products below)
      float s[32];  // this warpgroup's half of S: 64 heads x 64 keys over its 256 dims
      const uint32_t kt = k_addr + static_cast<uint32_t>((walked + tile) & 1) * kTileBytes;
      issue_scores(s, q_addr, kt, wg);
      if (tile + 1 < n_tiles) issue(tile + 1);  // while the tensor cores work: the next tile into the other buffer
      wgmma_wait<0>();
      fence_operands(s);
      place(tile + 2, w_ahead);  // (its slot was last read before this iteration's first barrier)
      store_half(exch + wg * kExchFloat4, s, wt);
      __syncthreads();  // both halves written (and both warpgroups' products read Qs for the last time this tile)
      if (tile == n_tiles - 1 && qb && item + gridDim.x < items) {  // the next item's query, behind this tile's softmax and P V
        issue_query(item + gridDim.x);
        query_ahead = true;
      }
      add_other_half(s, exch, wg, wt);

      // Online softmax of rows g, g + 8 (of this warp's 16 heads): this thread's keys are 8 j + 2 t4 + {0, 1}
      // (sa[2 j + e], sb[2 j + e] from the accumulator's n8 tile j).
      float sa[16], sb[16];
      masked_scores(sa, sb, s, kvalid + ((walked + tile) % 3) * 2, scale_a, scale_b, t4);
      const float2 corr = online_softmax_step(sa, sb, m_a, m_b, l_a, l_b);
      if (__any_sync(kFull, corr.x != 1.0f || corr.y != 1.0f)) rescale_output(o, corr);  // (once the maxima settle, most tiles skip this)
      // O += P V: keys 16 kk .. +16 are S's column tiles 2 kk and 2 kk + 1 (the A fragment layout).
      uint32_t pf[4][4];
      add_pv(o, pf, sa, sb, kt, wg);
    }

    // Each head's output scaled by its softmax denominator and sink; the rope channels rotated back by
    // the row's position, staged in this warpgroup's half of key buffer 0 (its products and copies are
    // done), then written a 512-byte head row a warp.
    const int warp_heads = 16 * ((tid >> 5) & 3);
    float f[2];
    output_scales(f, m_a, m_b, l_a, l_b, sinks, h0, nh, warp_heads, g);
    unsigned char* stage = Ks + 4 * wg * kAtom;
    stage_output(stage, o, f, unrope, b.positions, r, warp_heads, wg, g, t4);
    warpgroup_sync(wg);
    copy_out(Ks, out, r, heads, h0, nh, wg, wt, lane);
    walked += n_tiles;
  }
#else
  __trap();  // built without sm_90a: wgmma_supported() kept the backend from launching this
#endif
}

}  // namespace

bool wgmma_supported() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  cudaFuncAttributes fa{};
  // The kernel must have been built for sm_90a (its ptxVersion/binaryVersion 90).
  if (cudaFuncGetAttributes(&fa, mqa_attention_wgmma_kernel) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0 && fa.binaryVersion == 90;
}

cudaError_t prepare_attention_wgmma(size_t device_max) { return allow_smem<mqa_attention_wgmma_kernel>(kSmemBytes, device_max); }

cudaError_t attention_wgmma(const float* q, const bf16_t* qb, KeyTableDev t, const float* sinks, const int32_t* selected,
                            int64_t sel_cols, int heads, BatchDev b, StateDev st, LayerDev L, bf16_t* out, RopeDev unrope,
                            QueryNorm qn, Stream s) {
  if (b.rows <= 0 || heads <= 0) return cudaSuccess;
  if (L.head_dim != kHd || !t.kv || !t.rows || !t.seq_first) return cudaErrorInvalidValue;
  int64_t blocks = static_cast<int64_t>(b.rows) * ((heads + kHeads - 1) / kHeads);
  if (blocks > 2147483647) return cudaErrorInvalidValue;
  if (const int sms = multiprocessors(); sms > 0) blocks = std::min<int64_t>(blocks, sms);  // (one block a multiprocessor fits)
  if ((q == nullptr) == (qb == nullptr)) return cudaErrorInvalidValue;
  if (qn.eps >= 0.0f && (!qb || !qn.rope.inv_freq || qn.rope.rope_dim % 2 != 0 || qn.rope.rope_dim > 64)) return cudaErrorInvalidValue;
  const bool unrope_here = unrope.inv_freq && unrope.rope_dim % 2 == 0 && unrope.rope_dim <= 64;  // (else a pass after)
  launch(mqa_attention_wgmma_kernel, static_cast<unsigned>(blocks), kThreads, kSmemBytes, s)(
      q, reinterpret_cast<const __nv_bfloat16*>(qb), t, sinks, selected, sel_cols, heads, b, st, L, qn,
      unrope_here ? unrope : RopeDev{}, reinterpret_cast<__nv_bfloat16*>(out));
  if (unrope.inv_freq && !unrope_here) return rope_bf16(out, b.rows, static_cast<int64_t>(heads) * kHd, kHd, unrope, b.positions, true, s);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
