// native_gemv.h on the tensor cores: a block owns 16 or 32 outputs, its warps split their columns,
// and each warp runs mma.sync m16n8k16 (bf16 in, fp32 accumulate) with the weight as A (16 outputs x
// 16 columns; one or two such tiles) and the activation rows as B (up to 8 rows; unused columns of B
// are zero). The activations are read once per tile instead of once per output, and the tensor cores
// do the multiply-adds: what is left per weight value is its decoding, a few integer operations.
//
// Decoding: each lane reads 16 stored bytes of each of its rows (g and g + 8 of each tile) per step.
// A dot product does not care in which order its columns are summed, so the columns a lane feeds to
// the mma are the ones its own load holds: the bytes become bf16 pairs where they lie, and the lane's
// activations are packed in the same order. A value becomes bf16 by moving its sign, exponent and
// mantissa bits into bf16's fields (exact, subnormals included) and multiplying (bf16x2) by the power
// of two that rebiases the exponent (2^120 for E4M3, 2^126 for E2M1).
//
// Scales: a step of a warp covers 64 columns (FP8), which lie in one scale block column, so each
// row's FP8 block scale multiplies the step's fp32 partial sums after the mma (F32 / BF16 scales stay
// exact). MXFP4's E8M0 scales change every 32 values, within a step, so they multiply the bf16 values
// (exact: powers of two), folded into the rebiasing multiply where the product is a bf16.
//
// The activations are rounded to bf16 (as the prefill products round them); the weights' values are
// exact; partial sums below fp32's normal range (2^-126) may be flushed to zero by the tensor cores.
// A block's warps add their shares in warp order: each output's sum has a fixed order whatever the
// number of rows.
#include "common.cuh"
#include "mma.cuh"
#include "native_gemv.h"
#include "stored_formats.cuh"

namespace deepinfer::kernels {
namespace {

template <StoredFormat F>
inline constexpr int kChunkValues = F == StoredFormat::kFp8Block ? 16 : 32;  // values in 16 stored bytes

constexpr uint32_t kRebiasE4m3 = 0x7b807b80u;  // bf16x2 2^120, 2^120
constexpr uint32_t kRebiasE2m1 = 0x7e807e80u;  // bf16x2 2^126, 2^126

// Four E4M3 bytes b0..b3 of word w as bf16 pairs (b0, b2) and (b1, b3), placed: bf16 bits
// sign << 15 | magnitude << 4, i.e. the value times 2^-120.
__device__ __forceinline__ void place_e4m3(uint32_t w, uint32_t& lo, uint32_t& hi) {
  lo = ((w << 4) & 0x07f007f0u) | ((w << 8) & 0x80008000u);
  hi = ((w >> 4) & 0x07f007f0u) | (w & 0x80008000u);
}
// Whether any of the words holds an E4M3 NaN code.
template <int N>
__device__ __forceinline__ bool any_fp8_nan(const uint32_t (&w)[N]) {
  uint32_t carry = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) carry |= e4m3_nan_marks(w[i]);
  return (carry & 0x80808080u) != 0;
}
// The placed pairs of word w with each NaN byte's value replaced by a bf16 NaN.
__device__ __forceinline__ void mark_nans(uint32_t w, uint32_t& lo, uint32_t& hi) {
  const uint32_t nan_half[2] = {0x00007fc0u, 0x7fc00000u}, keep_half[2] = {0xffff0000u, 0x0000ffffu};
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    if (((w >> (8 * b)) & 0x7fu) != 0x7fu) continue;
    uint32_t& r = (b & 1) ? hi : lo;  // bytes 0, 2 in lo; 1, 3 in hi; bytes 0, 1 in the low halves
    r = (r & keep_half[b >> 1]) | nan_half[b >> 1];
  }
}
// E2M1 nibbles k and k + 4 (k < 2) of word w as a placed bf16 pair: sign << 15 | magnitude << 6, the
// value times 2^-126 (nibbles 2, 3 and 6, 7: the same of w >> 8). Left shifts only: they may run as
// multiplies, beside the logic operations.
template <int K>
__device__ __forceinline__ uint32_t place_e2m1(uint32_t w) {
  return ((w << (6 - 4 * K)) & 0x01c001c0u) | ((w << (12 - 4 * K)) & 0x80008000u);
}
// An E8M0 scale s as the bf16 pair that multiplies a group's placed values. kOne: 2^126 · 2^(s - 127)
// = 2^(s - 1), a bf16 for s <= 128 (what weights hold in practice); otherwise 2^(s - 127) alone (the
// values are first multiplied by 2^126; 2^-127 is a bf16 subnormal, 0xff NaN).
template <bool kOne>
__device__ __forceinline__ uint32_t e8m0_factor(uint32_t s) {
  const uint32_t b = kOne ? (s + 126u) << 7 : e8m0_as_bf16(s);
  return b | (b << 16);
}
// A lane's activations for one chunk: x[c0 .. c0 + V) of its row as bf16 pairs, in the order its
// placed weights are: FP8 word i -> (4i, 4i+2), (4i+1, 4i+3); MXFP4 word i -> (8i, 8i+4), (8i+1, 8i+5),
// (8i+2, 8i+6), (8i+3, 8i+7).
template <StoredFormat F>
__device__ __forceinline__ void load_x(const float* xr, bool in, uint32_t (&b)[kChunkValues<F> / 2]) {
  constexpr int V = kChunkValues<F>;
  if (!in) {
#pragma unroll
    for (int i = 0; i < V / 2; ++i) b[i] = 0;
    return;
  }
  const float4* p = reinterpret_cast<const float4*>(xr);
  if constexpr (F == StoredFormat::kFp8Block) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 v = __ldg(p + i);
      b[2 * i] = pack_bf16(v.x, v.z);
      b[2 * i + 1] = pack_bf16(v.y, v.w);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 u = __ldg(p + 2 * i), v = __ldg(p + 2 * i + 1);
      b[4 * i] = pack_bf16(u.x, v.x);
      b[4 * i + 1] = pack_bf16(u.y, v.y);
      b[4 * i + 2] = pack_bf16(u.z, v.z);
      b[4 * i + 3] = pack_bf16(u.w, v.w);
    }
  }
}

// One FP8 chunk of rows g (qa) and g + 8 (qb) of a tile: four mma steps of 16 columns into fresh
// sums, which the rows' block scales (sa, sb) then add to the tile's accumulator.
template <bool kNanTest>
__device__ __forceinline__ void add_fp8_chunk(uint4 qa, uint4 qb, float sa, float sb, const uint32_t (&b)[8], float (&acc)[4]) {
  const uint32_t wa[4] = {qa.x, qa.y, qa.z, qa.w}, wb[4] = {qb.x, qb.y, qb.z, qb.w};
  const bool nan = kNanTest && (any_fp8_nan(wa) || any_fp8_nan(wb));
  float part[4] = {};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t a[4];
    place_e4m3(wa[i], a[0], a[2]);
    place_e4m3(wb[i], a[1], a[3]);
    if (nan) {  // rare: the NaN bytes' halves become NaN
      mark_nans(wa[i], a[0], a[2]);
      mark_nans(wb[i], a[1], a[3]);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) a[j] = mul_bf16x2(a[j], kRebiasE4m3);
    mma_bf16(part, a, b[2 * i], b[2 * i + 1]);
  }
  acc[0] = fmaf(part[0], sa, acc[0]);
  acc[1] = fmaf(part[1], sa, acc[1]);
  acc[2] = fmaf(part[2], sb, acc[2]);
  acc[3] = fmaf(part[3], sb, acc[3]);
}

// One MXFP4 chunk (one E8M0 group) of rows g (qa, scale code sa) and g + 8: eight mma steps. kOne:
// every scale code of the warp's chunks is <= 128, one multiply a value pair.
template <bool kOne>
__device__ __forceinline__ void add_fp4_chunk(uint4 qa, uint4 qb, uint32_t sa, uint32_t sb, const uint32_t (&b)[16], float (&acc)[4]) {
  const uint32_t wa[4] = {qa.x, qa.y, qa.z, qa.w}, wb[4] = {qb.x, qb.y, qb.z, qb.w};
  const uint32_t ma = e8m0_factor<kOne>(sa), mb = e8m0_factor<kOne>(sb);
  const auto value = [](uint32_t placed, uint32_t factor) { return mul_bf16x2(kOne ? placed : mul_bf16x2(placed, kRebiasE2m1), factor); };
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t ha = wa[i] >> 8, hb = wb[i] >> 8;
    const uint32_t a0[4] = {value(place_e2m1<0>(wa[i]), ma), value(place_e2m1<0>(wb[i]), mb), value(place_e2m1<1>(wa[i]), ma),
                            value(place_e2m1<1>(wb[i]), mb)};
    mma_bf16(acc, a0, b[4 * i], b[4 * i + 1]);
    const uint32_t a1[4] = {value(place_e2m1<0>(ha), ma), value(place_e2m1<0>(hb), mb), value(place_e2m1<1>(ha), ma),
                            value(place_e2m1<1>(hb), mb)};
    mma_bf16(acc, a1, b[4 * i + 2], b[4 * i + 3]);
  }
}

// Several matrices of a stack in one launch. Routed experts (native_expert_gemv): pair p < pairs is
// (activation row p / k, expert experts[p], output row p); per pair, blockIdx.y is a pair, whose expert
// the block reads; by expert, blockIdx.y is an expert, whose pairs the block takes up to 8 at a time
// as the B columns (the expert's bytes read once per 8 pairs instead of once per pair). Groups
// (native_grouped_gemv): blockIdx.y is group y, matrix y of the stack for activations and outputs
// group_x and group_out floats on.
constexpr int kMaxExpertPairs = 512;  // by expert: the most pairs (so the most of one expert)

struct ExpertPick {
  enum Mode { kOne, kPerPair, kByExpert, kGroups } mode = kOne;
  const int32_t* experts = nullptr;
  int k = 1;
  int64_t n_exp = 0;
  int pairs = 0;
  int64_t group_x = 0, group_out = 0;
};

// Expert e's matrix of a stack of n_exp matrices of w.rows x w.cols stored one after the other (values,
// then scales likewise); false for an id outside [0, n_exp).
template <StoredFormat F, ScaleType S>
__device__ __forceinline__ bool pick_expert(QuantizedWeight& w, int64_t e, int64_t n_exp) {
  if (e < 0 || e >= n_exp) return false;
  if constexpr (F == StoredFormat::kMxfp4) {
    w.values += e * w.rows * (w.cols / 2);
    w.scale = static_cast<const uint8_t*>(w.scale) + e * w.rows * (w.cols / 32);
  } else {
    w.values += e * w.rows * w.cols;
    w.scale = static_cast<const uint8_t*>(w.scale) + e * ((w.rows + w.block_rows - 1) / w.block_rows) * w.scale_cols * scale_bytes(S);
  }
  return true;
}

// grid.x: one block per kTiles x 16 outputs (grid.y: native_expert_gemv's pairs). Lane (g, t) of warp v reads chunks 4 s + t of rows
// o0 + 16 m + g and o0 + 16 m + g + 8 (m < kTiles) for the steps s of the warp's share of the columns;
// B column g is activation row g (< rows, else zero; by expert: the round's pair g), shared by the
// warp's tiles. S: the FP8 block scales' type (MXFP4: E8M0).
// kMinBlocks: blocks a multiprocessor must hold (registers capped to fit), 0: the compiler's choice.
template <StoredFormat F, ScaleType S, int kTiles, int kWarps, bool kNanTest, int kMinBlocks = 0>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks)
    native_gemv_kernel(const float* __restrict__ x, int rows, int64_t ldx, QuantizedWeight w, float* __restrict__ out, int64_t ldo,
                       ExpertPick pick) {
  constexpr int V = kChunkValues<F>, kRows = 2 * kTiles, kUnroll = 2 / kTiles;  // a lane's weight rows; steps a round
  constexpr bool kFp8 = F == StoredFormat::kFp8Block;
  __shared__ float red[kWarps][16 * kTiles][8];
  __shared__ int group[kMaxExpertPairs], window[kWarps];  // by expert: the pairs that chose it; a scan window's counts
  pdl_begin();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int64_t o0 = static_cast<int64_t>(blockIdx.x) * 16 * kTiles;
  if (pick.mode == ExpertPick::kByExpert) {
    if (!pick_expert<F, S>(w, blockIdx.y, pick.n_exp)) {  // the last row of blocks: zeros for the pairs of no expert
      for (int i = threadIdx.x; i < pick.pairs * 16 * kTiles; i += kWarps * 32) {
        const int p = i / (16 * kTiles), o = i % (16 * kTiles);
        const int32_t e = __ldg(pick.experts + p);
        if ((e < 0 || e >= pick.n_exp) && o0 + o < w.rows) out[p * ldo + o0 + o] = 0.0f;
      }
      return;
    }
  } else if (pick.mode == ExpertPick::kGroups) {
    x += blockIdx.y * pick.group_x;
    out += blockIdx.y * pick.group_out;
    pick_expert<F, S>(w, blockIdx.y, gridDim.y);
  } else if (pick.mode == ExpertPick::kPerPair) {
    const int64_t p = blockIdx.y;
    x += p / pick.k * ldx;
    out += p * ldo;
    if (!pick_expert<F, S>(w, __ldg(pick.experts + p), pick.n_exp)) {  // no such expert: zeros
      for (int i = threadIdx.x; i < 16 * kTiles; i += kWarps * 32)
        if (o0 + i < w.rows) out[o0 + i] = 0.0f;
      return;
    }
  }
  const int chunks = static_cast<int>(w.cols / V), steps = (chunks + 3) / 4, per_warp = (steps + kWarps - 1) / kWarps;
  const int s_begin = warp * per_warp, s_end = min(steps, s_begin + per_warp);
  // FP8: a step's scale column is its first chunk / (chunks per block column), a shift when that is a power of two.
  const int per_block = kFp8 ? w.block_cols / 16 : 1;
  const int shift = (per_block & (per_block - 1)) == 0 ? __ffs(per_block) - 1 : -1;
  const uint4* row[kRows];  // this lane's chunks of its rows, from the warp's first step
  const uint8_t* fp4_scale[kRows];
  int64_t fp8_scale[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int64_t o = min(o0 + 8 * j + g, w.rows - 1);  // rows past the end: read, not written
    row[j] = reinterpret_cast<const uint4*>(w.values) + o * chunks + 4 * s_begin + t;
    fp4_scale[j] = static_cast<const uint8_t*>(w.scale) + o * chunks + 4 * s_begin + t;
    fp8_scale[j] = kFp8 ? (o / w.block_rows) * w.scale_cols : 0;
  }
  // By expert: all threads find the pairs that chose this expert (in pair order, a window of one
  // pair per thread at a time), then the rounds take them 8 at a time.
  int round = 0, picked = 0;
  const bool by_expert = pick.mode == ExpertPick::kByExpert;
  if (by_expert) {
    for (int base = 0; base < pick.pairs; base += kWarps * 32) {
      const int p = base + static_cast<int>(threadIdx.x);
      const bool mine = p < pick.pairs && __ldg(pick.experts + p) == static_cast<int32_t>(blockIdx.y);
      const uint32_t mask = __ballot_sync(kFull, mine);
      if (lane == 0) window[warp] = __popc(mask);
      __syncthreads();
      int at = picked;
      for (int v = 0; v < warp; ++v) at += window[v];
      if (mine) group[at + __popc(mask & ((1u << lane) - 1u))] = p;
      for (int v = 0; v < kWarps; ++v) picked += window[v];
      __syncthreads();
    }
  }
  for (;;) {  // (one round, but by expert: a round per 8 of the expert's pairs)
    if (by_expert) {
      rows = min(8, picked - 8 * round);
      if (rows <= 0) return;
    }
    const int64_t x_row = g < rows ? (by_expert ? group[8 * round + g] / pick.k : g) : 0;
    const float* xr = x + x_row * ldx + static_cast<int64_t>(4 * s_begin + t) * V;
    const bool x_in = g < rows;
    float acc[kTiles][4] = {};
    // A round: kUnroll steps' bytes and scales (FP8: values; MXFP4: E8M0 codes), loaded one round ahead.
    struct Round {
      uint4 q[kUnroll][kRows];
      float f[kUnroll][kRows];
    };
    const auto load_round = [&](Round& r, int s0) {
      const int d = 4 * (s0 - s_begin);  // chunks past the pointers
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const bool step_in = s0 + u < s_end, in = step_in && 4 * (s0 + u) + t < chunks;
        const int sc = kFp8 ? (shift >= 0 ? (4 * (s0 + u)) >> shift : 4 * (s0 + u) / per_block) : 0;
#pragma unroll
        for (int j = 0; j < kRows; ++j) {
          r.q[u][j] = in ? load_stream(row[j] + d + 4 * u) : make_uint4(0, 0, 0, 0);
          if constexpr (kFp8)
            r.f[u][j] = step_in ? block_scale<S>(w.scale, fp8_scale[j] + sc) : 0.0f;  // (scales the whole step's sums of row j)
          else
            r.f[u][j] = in ? __uint_as_float(fp4_scale[j][d + 4 * u]) : 0.0f;
        }
      }
    };
    const auto add_round = [&](const Round& r, int s0) {
      const int d = 4 * (s0 - s_begin);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (s0 + u >= s_end) break;  // warp-uniform
        uint32_t b[V / 2];
        load_x<F>(xr + (d + 4 * u) * V, x_in && 4 * (s0 + u) + t < chunks, b);
        if constexpr (kFp8) {
#pragma unroll
          for (int m = 0; m < kTiles; ++m)
            add_fp8_chunk<kNanTest>(r.q[u][2 * m], r.q[u][2 * m + 1], r.f[u][2 * m], r.f[u][2 * m + 1], b, acc[m]);
        } else {
          bool large = false;  // a scale code above 128 in the warp's chunks of this step: two multiplies
#pragma unroll
          for (int j = 0; j < kRows; ++j) large |= __float_as_uint(r.f[u][j]) > 128u;
          if (__any_sync(kFull, large)) {
#pragma unroll
            for (int m = 0; m < kTiles; ++m)
              add_fp4_chunk<false>(r.q[u][2 * m], r.q[u][2 * m + 1], __float_as_uint(r.f[u][2 * m]), __float_as_uint(r.f[u][2 * m + 1]), b,
                                   acc[m]);
          } else {
#pragma unroll
            for (int m = 0; m < kTiles; ++m)
              add_fp4_chunk<true>(r.q[u][2 * m], r.q[u][2 * m + 1], __float_as_uint(r.f[u][2 * m]), __float_as_uint(r.f[u][2 * m + 1]), b,
                                  acc[m]);
          }
        }
      }
    };
    Round ra, rb;  // ping-pong: one round decodes while the next one's loads are in flight
    load_round(ra, s_begin);
    for (int s0 = s_begin; s0 < s_end; s0 += 2 * kUnroll) {
      load_round(rb, s0 + kUnroll);
      add_round(ra, s0);
      load_round(ra, s0 + 2 * kUnroll);
      add_round(rb, s0 + kUnroll);
    }
#pragma unroll
    for (int m = 0; m < kTiles; ++m) {
      red[warp][16 * m + g][2 * t] = acc[m][0];
      red[warp][16 * m + g][2 * t + 1] = acc[m][1];
      red[warp][16 * m + g + 8][2 * t] = acc[m][2];
      red[warp][16 * m + g + 8][2 * t + 1] = acc[m][3];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * kTiles * 8; i += kWarps * 32) {
      const int o = i % (16 * kTiles), r = i / (16 * kTiles);
      if (r < rows && o0 + o < w.rows) {
        float v = red[0][o][r];
#pragma unroll
        for (int k = 1; k < kWarps; ++k) v += red[k][o][r];
        out[(by_expert ? group[8 * round + r] : r) * ldo + o0 + o] = v;
      }
    }
    if (!by_expert) return;
    ++round;
    __syncthreads();  // (red is rewritten by the next round)
  }
}

// Block shapes (measured on an H200, tools/bench/native_gemv_bench). Routed experts: one tile, 4
// warps and at most 128 registers (4 blocks a multiprocessor), each warp a longer run of columns to
// pipeline: against 8 warps and 2 blocks, MXFP4 [2048 x 4096] stacks 61 -> 54 us at 4 rows, 706 -> 545
// us at 64, 18 -> 19 us at 1; [4096 x 2048] 22 -> 16 us at 1 row, 996 -> 656 us at 64 (3 or 6 blocks
// of 4 warps, 8 blocks of 2: no better). Other products by the number of outputs: two tiles a warp and
// 8 warps a block where there are outputs enough for ~2 blocks a multiprocessor; one tile and 8 warps
// down to ~1.5 blocks a multiprocessor; below that one tile and 16 warps (more column shares, so that
// fewer outputs still fill the GPU). (Splitting a tile's columns over a cluster of blocks instead,
// summed through distributed shared memory, measured 1.5-2.5x slower below 4096 outputs.)
constexpr int64_t kManyOutputs = 2 * 132 * 32, kSomeOutputs = 3 * 132 * 16 / 2;

template <StoredFormat F, ScaleType S, bool kNanTest>
cudaError_t launch_for(const float* x, int rows, int64_t ldx, const QuantizedWeight& w, float* out, int64_t ldo, Stream s,
                       const ExpertPick& pick, int64_t pairs) {
  const auto grid = [&](int64_t outputs_per_block) {
    return dim3(static_cast<unsigned>((w.rows + outputs_per_block - 1) / outputs_per_block), static_cast<unsigned>(pairs));
  };
  const bool experts = pick.mode == ExpertPick::kPerPair || pick.mode == ExpertPick::kByExpert;
  if (experts) return launch(native_gemv_kernel<F, S, 1, 4, kNanTest, 4>, grid(16), dim3(128), 0, s)(x, rows, ldx, w, out, ldo, pick);
  if (w.rows * pairs >= kManyOutputs)
    return launch(native_gemv_kernel<F, S, 2, 8, kNanTest>, grid(32), dim3(256), 0, s)(x, rows, ldx, w, out, ldo, pick);
  if (w.rows * pairs >= kSomeOutputs)
    return launch(native_gemv_kernel<F, S, 1, 8, kNanTest>, grid(16), dim3(256), 0, s)(x, rows, ldx, w, out, ldo, pick);
  return launch(native_gemv_kernel<F, S, 1, 16, kNanTest>, grid(16), dim3(512), 0, s)(x, rows, ldx, w, out, ldo, pick);
}

template <ScaleType S>
cudaError_t launch_fp8(const float* x, int rows, int64_t ldx, const QuantizedWeight& w, float* out, int64_t ldo, Stream s,
                       const ExpertPick& pick, int64_t pairs) {
  return w.nan_free ? launch_for<StoredFormat::kFp8Block, S, false>(x, rows, ldx, w, out, ldo, s, pick, pairs)
                    : launch_for<StoredFormat::kFp8Block, S, true>(x, rows, ldx, w, out, ldo, s, pick, pairs);
}

cudaError_t launch_any(const float* x, int rows, int64_t ldx, const QuantizedWeight& w, StoredFormat format, float* out, int64_t ldo,
                       Stream s, const ExpertPick& pick, int64_t pairs) {
  cudaError_t e;
  if (format == StoredFormat::kMxfp4)
    e = launch_for<StoredFormat::kMxfp4, ScaleType::kE8M0, false>(x, rows, ldx, w, out, ldo, s, pick, pairs);
  else if (w.scale_type == ScaleType::kE8M0)
    e = launch_fp8<ScaleType::kE8M0>(x, rows, ldx, w, out, ldo, s, pick, pairs);
  else if (w.scale_type == ScaleType::kF32)
    e = launch_fp8<ScaleType::kF32>(x, rows, ldx, w, out, ldo, s, pick, pairs);
  else
    e = launch_fp8<ScaleType::kBF16>(x, rows, ldx, w, out, ldo, s, pick, pairs);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

}  // namespace

bool native_gemv_supported(const QuantizedWeight& w, StoredFormat format, const float* x, int64_t ldx) {
  if (w.rows <= 0 || w.cols <= 0 || !w.values || !w.scale || !x || ldx < w.cols || ldx % 4 != 0) return false;
  if (!aligned16(w.values) || !aligned16(x)) return false;
  if (format == StoredFormat::kMxfp4) return w.cols % 32 == 0 && w.scale_type == ScaleType::kE8M0;
  return w.cols % 16 == 0 && w.block_rows > 0 && w.block_cols > 0 && w.block_cols % 64 == 0 &&
         w.scale_cols >= (w.cols + w.block_cols - 1) / w.block_cols;
}

cudaError_t native_gemv(const float* x, int64_t rows, int64_t ldx, const QuantizedWeight& w, StoredFormat format, float* out, int64_t ldo,
                        Stream s) {
  if (rows <= 0 || w.rows <= 0) return cudaSuccess;
  if (rows > kNativeGemvMaxRows || !out || ldo < w.rows || (w.rows + 15) / 16 > 2147483647LL || w.cols / 16 > 2147483647LL ||
      !native_gemv_supported(w, format, x, ldx))
    return cudaErrorInvalidValue;
  return launch_any(x, static_cast<int>(rows), ldx, w, format, out, ldo, s, ExpertPick{}, 1);
}

cudaError_t native_expert_gemv(const float* x, int64_t ldx, const int32_t* experts, int64_t pairs, int k, const QuantizedWeight& stack,
                               int64_t n_exp, StoredFormat format, float* out, int64_t ldo, Stream s) {
  if (pairs <= 0 || stack.rows <= 0) return cudaSuccess;
  if (!experts || k <= 0 || n_exp <= 0 || pairs > 65535 || n_exp > 65535 || !out || ldo < stack.rows ||
      !native_gemv_supported(stack, format, x, ldx))
    return cudaErrorInvalidValue;
  // By expert once the pairs are many against the experts (then some expert is picked by several);
  // below that per pair: no block spent on an expert nobody picked.
  const bool by_expert = 2 * pairs > n_exp && pairs <= kMaxExpertPairs;
  ExpertPick pick;
  pick.mode = by_expert ? ExpertPick::kByExpert : ExpertPick::kPerPair;
  pick.experts = experts;
  pick.k = k;
  pick.n_exp = n_exp;
  pick.pairs = static_cast<int>(pairs);
  return launch_any(x, 1, ldx, stack, format, out, ldo, s, pick, by_expert ? n_exp + 1 : pairs);
}

cudaError_t native_grouped_gemv(const float* x, int64_t rows, int64_t ldx, int groups, const QuantizedWeight& stack, StoredFormat format,
                                float* out, int64_t ldo, Stream s) {
  if (rows <= 0 || groups <= 0 || stack.rows <= 0) return cudaSuccess;
  if (rows > kNativeGemvMaxRows || groups > 65535 || !out || (rows > 1 && (ldx < groups * stack.cols || ldo < groups * stack.rows)) ||
      (format == StoredFormat::kFp8Block && stack.rows % stack.block_rows != 0) || !native_gemv_supported(stack, format, x, ldx))
    return cudaErrorInvalidValue;
  ExpertPick pick;
  pick.mode = ExpertPick::kGroups;
  pick.group_x = stack.cols;
  pick.group_out = stack.rows;
  return launch_any(x, static_cast<int>(rows), ldx, stack, format, out, ldo, s, pick, groups);
}

}  // namespace deepinfer::kernels
