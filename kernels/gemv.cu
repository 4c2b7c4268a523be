// Products of a few activation rows (decode) with bf16 weights: the weight is read once, in 16-byte
// streaming loads, while the activations (fp32, not rounded) stay in L1. One warp owns a few
// outputs (or a share of their columns), lanes sum strided chunks and the warp reduces: the result
// of a row does not depend on the other rows, and the summation order is fixed. No staging, no
// plan: a routed-expert layer at batch 1 is two launches.
#include "common.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kWarps = 8;   // per block of the expert kernels
constexpr int64_t kFewBlocks = 264;  // below ~2 blocks per multiprocessor (H100 / H200): spread thinner
// gemv / gemv_list blocks: 4 warps (4 blocks a multiprocessor; measured ahead of 8 at batch 1).
constexpr int kGemvWarps = 4;

// Asks L2 for the lines of w[j] chunks first, first + step, ... (U of each row): weights do not depend
// on earlier kernels, so a kernel can fetch them before pdl_begin(), overlapping the previous
// kernel's tail and its own launch.
template <int J, int U>
__device__ __forceinline__ void prefetch_rows(const uint4* const (&w)[J], int64_t first, int64_t step, int64_t n8) {
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int j = 0; j < J; ++j)
      if (first + u * step < n8) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(w[j] + first + u * step));
}

// Eight bf16 weights dotted with eight fp32 activations.
__device__ __forceinline__ float dot8(uint4 w, const float4 a, const float4 b, float acc) {
  acc = fmaf(__uint_as_float(w.x << 16), a.x, acc);
  acc = fmaf(__uint_as_float(w.x & 0xffff0000u), a.y, acc);
  acc = fmaf(__uint_as_float(w.y << 16), a.z, acc);
  acc = fmaf(__uint_as_float(w.y & 0xffff0000u), a.w, acc);
  acc = fmaf(__uint_as_float(w.z << 16), b.x, acc);
  acc = fmaf(__uint_as_float(w.z & 0xffff0000u), b.y, acc);
  acc = fmaf(__uint_as_float(w.w << 16), b.z, acc);
  acc = fmaf(__uint_as_float(w.w & 0xffff0000u), b.w, acc);
  return acc;
}

// The input norm of a product of normalised rows (GemvList::norm): the norm's weight, and per row
// the sum of squares of the chunks this lane read.
template <int R>
struct RowNorm {
  const float4* gamma = nullptr;
  float ss[R] = {};
};

// acc[j][r] += Σ over this lane's chunks c (c = first, first + step, ... < n8) of w[j] chunk c · x[r] chunk c,
// with U chunks of every weight row in flight (J U 16-byte loads per lane; the last round predicated,
// so that short rows keep all their loads in flight too). kPreload (one row): the round's activations
// are loaded together with the weights, not one chunk after the other (more registers). kNorm: x[r]
// chunk c times the norm's weight chunk c, and nrm.ss[r] += |x[r] chunk c|^2 (the caller scales by
// the row's inverse RMS at the end).
template <int R, int J, int U, bool kPreload = false, bool kNorm = false>
__device__ __forceinline__ void dot_rows(const uint4* const (&w)[J], const float4* const (&x)[R], int64_t first, int64_t step, int64_t n8,
                                         float (&acc)[J][R], RowNorm<R>& nrm) {
  for (int64_t c = first; c < n8; c += U * step) {
    uint4 wv[U][J];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < J; ++j) wv[u][j] = c + u * step < n8 ? load_stream(w[j] + c + u * step) : make_uint4(0, 0, 0, 0);
    constexpr bool kPre = kPreload && R == 1;
    float4 xa[kPre ? U : 1][2];
    if constexpr (kPre) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const bool in = c + u * step < n8;
        xa[u][0] = in ? __ldg(x[0] + 2 * (c + u * step)) : make_float4(0, 0, 0, 0);
        xa[u][1] = in ? __ldg(x[0] + 2 * (c + u * step) + 1) : make_float4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (c + u * step >= n8) break;
      float4 ga{}, gb{};
      if constexpr (kNorm) {
        ga = __ldg(nrm.gamma + 2 * (c + u * step));
        gb = __ldg(nrm.gamma + 2 * (c + u * step) + 1);
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float4 a = kPre ? xa[u][0] : __ldg(x[r] + 2 * (c + u * step));
        float4 b = kPre ? xa[u][1] : __ldg(x[r] + 2 * (c + u * step) + 1);
        if constexpr (kNorm) {
          float q = nrm.ss[r];
          q = fmaf(a.x, a.x, q), q = fmaf(a.y, a.y, q), q = fmaf(a.z, a.z, q), q = fmaf(a.w, a.w, q);
          q = fmaf(b.x, b.x, q), q = fmaf(b.y, b.y, q), q = fmaf(b.z, b.z, q), nrm.ss[r] = fmaf(b.w, b.w, q);
          a = make_float4(a.x * ga.x, a.y * ga.y, a.z * ga.z, a.w * ga.w);
          b = make_float4(b.x * gb.x, b.y * gb.y, b.z * gb.z, b.w * gb.w);
        }
#pragma unroll
        for (int j = 0; j < J; ++j) acc[j][r] = dot8(wv[u][j], a, b, acc[j][r]);
      }
    }
  }
}

// grid: the products' blocks one after the other (list.first_block), each of W / ks output groups
// of J outputs; warp w owns group w / ks and the column share w % ks (ks in 1, 2, 4, 8: small output
// counts split the columns to fill the GPU). Output o of group g = o / n_group reads x columns
// [g k, g k + k). Shares are added in share order. W warps a block, 16 warps a multiprocessor.
// kNorm (list.norm, plain products): each warp sums the squares of the x chunks it reads, and the
// shares' sums give the row's inverse RMS, applied to the sum: out = inv_rms(x) (x * norm) · w.
// U chunks of each row in flight per lane, kBlocks blocks a multiprocessor.
template <int R, int J, int W, bool kNorm, int U = 4, int kBlocks = 16 / W>
__global__ void __launch_bounds__(W * 32, kBlocks) gemv_kernel(const float* __restrict__ x, int rows, int64_t ldx, int64_t k, int ks,
                                                           GemvList list) {
  __shared__ float red[W][J][R];
  __shared__ float red_ss[kNorm ? W : 1][R];
  int p = 0;
  while (p + 1 < list.count && static_cast<int64_t>(blockIdx.x) >= list.first_block[p + 1]) ++p;
  const GemvProduct& pr = list.p[p];
  const int64_t block = blockIdx.x - list.first_block[p];
  const int64_t n_out = pr.n_out;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int per_block = W / ks;
  const int64_t o0 = (block * per_block + warp / ks) * J;
  const int share = warp % ks;
  const int64_t n8 = k / 8;
  const uint4* wr[J];
#pragma unroll
  for (int j = 0; j < J; ++j) wr[j] = reinterpret_cast<const uint4*>(pr.w + min(o0 + j, n_out - 1) * k);  // past the end: a copy, unused
  if (o0 < n_out) prefetch_rows<J, 4>(wr, share * 32 + lane, 32 * ks, n8);
  pdl_begin();
  float acc[J][R] = {};
  RowNorm<R> nrm;
  nrm.gamma = reinterpret_cast<const float4*>(list.norm);
  if (o0 < n_out) {
    const float4* xr[R];
    const int64_t col = (o0 / pr.n_group) * k;  // J divides n_group: one group per warp
#pragma unroll
    for (int r = 0; r < R; ++r) xr[r] = reinterpret_cast<const float4*>(x + min(r, rows - 1) * ldx + col);
    dot_rows<R, J, U, true, kNorm>(wr, xr, share * 32 + lane, 32 * ks, n8, acc, nrm);
  }
#pragma unroll
  for (int j = 0; j < J; ++j)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float v = warp_sum(acc[j][r]);
      if (lane == 0) red[warp][j][r] = v;
    }
  if constexpr (kNorm) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float v = warp_sum(nrm.ss[r]);
      if (lane == 0) red_ss[warp][r] = v;
    }
  }
  __syncthreads();
  const int t = threadIdx.x;
  if (t < per_block * J * R) {
    const int g = t / (J * R), j = (t / R) % J, r = t % R;
    const int64_t o = (block * per_block + g) * J + j;
    if (o < n_out && r < rows) {
      float s = 0.0f;
      for (int i = 0; i < ks; ++i) s += red[g * ks + i][j][r];
      if constexpr (kNorm) {
        float ss = 0.0f;
        for (int i = 0; i < ks; ++i) ss += red_ss[g * ks + i][r];
        s *= 1.0f / sqrtf(ss / static_cast<float>(k) + list.norm_eps);
      }
      pr.out[r * pr.ldo + o] = s;
    }
  }
}

// Entry e of an expert launch: row e / per_row, slot i = e % per_row; the weights it reads (null if
// it reads none) and its scale.
struct Entry {
  int64_t t;
  int i;
  bool fixed;  // its weights do not depend on an earlier kernel (the shared expert, or no routing)
  int64_t expert;  // index into the stacked weights (0 for the shared expert)
  bool shared;

  __device__ Entry(const GemvExperts& ex, int64_t e) {
    const int per_row = ex.top_k + (ex.sw1 ? 1 : 0);
    t = e / per_row;
    i = static_cast<int>(e % per_row);
    shared = i == ex.top_k;
    fixed = shared || !ex.experts;
    expert = 0;
  }
  // Reads the routing (after pdl_begin); false for an invalid routed expert.
  __device__ bool resolve(const GemvExperts& ex) {
    if (shared || !ex.experts) return true;
    const int32_t id = ex.experts[t * ex.top_k + i];
    expert = id;
    return id >= 0 && id < ex.n_exp;
  }
  __device__ float scale(const GemvExperts& ex) const { return shared || !ex.weights ? 1.0f : ex.weights[t * ex.top_k + i]; }
};

// grid (output groups of kWarps x J, entries): h[e][j] = scale(e) SwiGLU(x[row] · w1[ex][j], · w3[ex][j]);
// an entry with an invalid expert gets zeros. U chunks of each row in flight per lane, kBlocks blocks
// a multiprocessor (0: unstated).
template <int J, int U = 8 / J, int kBlocks = 0>
__global__ void __launch_bounds__(kWarps * 32, kBlocks) expert_gate_up_kernel(const float* __restrict__ x, int64_t d, GemvExperts ex,
                                                                    int64_t inter, float limit, float* __restrict__ h) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t e = blockIdx.y;
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * J;
  Entry en(ex, e);
  auto rows_of = [&](const uint4* (&wr)[2 * J]) {
    const bf16_t* a = en.shared ? ex.sw1 : ex.w1;
    const bf16_t* b = en.shared ? ex.sw3 : ex.w3;
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int64_t row = en.expert * inter + min(o0 + j, inter - 1);
      wr[j] = reinterpret_cast<const uint4*>(a + row * d);
      wr[J + j] = reinterpret_cast<const uint4*>(b + row * d);
    }
  };
  if (en.fixed && o0 < inter) {  // weights that can come early
    const uint4* wr[2 * J];
    rows_of(wr);
    prefetch_rows<2 * J, 8 / J>(wr, lane, 32, d / 8);
  }
  pdl_begin();
  if (o0 >= inter) return;
  const bool valid = en.resolve(ex);
  float acc[2 * J][1] = {};
  if (valid) {
    const uint4* wr[2 * J];
    rows_of(wr);
    const float4* xr[1] = {reinterpret_cast<const float4*>(x + en.t * d)};
    RowNorm<1> none;
    dot_rows<1, 2 * J, U>(wr, xr, lane, 32, d / 8, acc, none);
  }
  const float wt = en.scale(ex);
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const float g = warp_sum(acc[j][0]), u = warp_sum(acc[J + j][0]);
    if (lane == 0 && o0 + j < inter) h[e * inter + o0 + j] = valid ? wt * swiglu_clamped(g, u, limit) : 0.0f;
  }
}

// grid (output groups of kWarps x J, entries): block (g, e) computes its outputs of entry e,
// h[e] · w2[ex_e][j] (h holds the scale), as gate_up does: a block per (group, entry) keeps as many
// loads in flight as there are entries. With one entry per row it writes out directly. Else it
// leaves them in part[e] and counts itself in counters[t][g]; the row's last block of the group
// adds the row's parts in slot order (a fixed order whoever comes last) and resets the counter.
// U chunks of each row in flight per lane, kBlocks blocks a multiprocessor (0: unstated).
template <int J, int U = 4, int kBlocks = 0>
__global__ void __launch_bounds__(kWarps * 32, kBlocks) expert_down_kernel(const float* __restrict__ h, int64_t inter, GemvExperts ex, int64_t d,
                                                                 bool accumulate, float* __restrict__ out, float* part, unsigned* counters) {
  __shared__ bool last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t e = blockIdx.y;
  const int per_row = ex.top_k + (ex.sw1 ? 1 : 0);
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * J;
  Entry en(ex, e);
  auto rows_of = [&](const uint4* (&wr)[J]) {
    const bf16_t* w = en.shared ? ex.sw2 : ex.w2;
#pragma unroll
    for (int j = 0; j < J; ++j) wr[j] = reinterpret_cast<const uint4*>(w + (en.expert * d + min(o0 + j, d - 1)) * inter);
  };
  if (en.fixed && o0 < d) {
    const uint4* wr[J];
    rows_of(wr);
    prefetch_rows<J, 4>(wr, lane, 32, inter / 8);
  }
  pdl_begin();
  const bool valid = en.resolve(ex);
  float acc[J][1] = {};
  if (o0 < d && valid) {
    const uint4* wr[J];
    rows_of(wr);
    const float4* xr[1] = {reinterpret_cast<const float4*>(h + e * inter)};
    RowNorm<1> none;
    dot_rows<1, J, U>(wr, xr, lane, 32, inter / 8, acc, none);
  }
  float v[J];
#pragma unroll
  for (int j = 0; j < J; ++j) v[j] = warp_sum(acc[j][0]);
  const int64_t t = en.t;
  if (per_row == 1) {
    if (lane == 0)
#pragma unroll
      for (int j = 0; j < J; ++j)
        if (o0 + j < d) out[t * d + o0 + j] = (accumulate ? out[t * d + o0 + j] : 0.0f) + v[j];
    return;
  }
  if (lane == 0)
#pragma unroll
    for (int j = 0; j < J; ++j)
      if (o0 + j < d) part[e * d + o0 + j] = v[j];
  __threadfence();  // the parts are visible before the count says so
  __syncthreads();
  unsigned* count = counters + t * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) last = atomicAdd(count, 1u) == static_cast<unsigned>(per_row - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarps * J + threadIdx.x;
  if (threadIdx.x < kWarps * J && o < d) {
    float sum = 0.0f;
    for (int i = 0; i < per_row; ++i) sum += __ldcg(part + (t * per_row + i) * d + o);  // L2: other blocks' writes
    out[t * d + o] = (accumulate ? out[t * d + o] : 0.0f) + sum;
  }
  if (threadIdx.x == 0) *count = 0;
}

template <int R, bool kNorm>
cudaError_t launch_gemv(const float* x, int rows, int64_t ldx, int64_t k, GemvList list, Stream s) {
  // Outputs per warp: 4 for one row (16 loads in flight per lane, as in the expert kernels), 2 for more
  // rows (their activations cost registers too), 1 where groups are odd.
  bool by4 = R == 1, by2 = true;
  int64_t total = 0;
  for (int p = 0; p < list.count; ++p) {
    by4 = by4 && list.p[p].n_group % 4 == 0;
    by2 = by2 && list.p[p].n_group % 2 == 0;
    total += list.p[p].n_out;
  }
  const int J = by4 ? 4 : by2 ? 2 : 1;
  constexpr int W = kGemvWarps;
  // Split the columns while fewer than ~16 warps per multiprocessor would run.
  const int64_t few_blocks = kFewBlocks * kWarps / W;
  int ks = 1;
  while (ks < W && (total + (W / ks) * J - 1) / ((W / ks) * J) < few_blocks && k / 8 >= 64 * ks) ks *= 2;
  const int64_t per_block = (W / ks) * J;
  int64_t blocks = 0;
  for (int p = 0; p < list.count; ++p) {
    list.first_block[p] = blocks;
    blocks += (list.p[p].n_out + per_block - 1) / per_block;
  }
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(blocks);
  auto go = [&](auto kernel) {
    launch(kernel, grid, W * 32, 0, s)(x, rows, ldx, k, ks, list);
    return cudaGetLastError();
  };
  // One-row products of 4 outputs a warp: 2 chunks of each row in flight per lane (64 registers, 8
  // blocks of 4 warps a multiprocessor; 4 chunks with 128 registers and 4 blocks measured slower).
  if constexpr (R == 1) {
    if (J == 4) return go(gemv_kernel<1, 4, W, kNorm, 2, kNorm ? 6 : 8>);
  }
  if (J == 2) return go(gemv_kernel<R, 2, W, kNorm>);
  return go(gemv_kernel<R, 1, W, kNorm>);
}

template <bool kNorm>
cudaError_t launch_gemv_rows(const float* x, int rows, int64_t ldx, int64_t k, const GemvList& list, Stream s) {
  if (rows == 1) return launch_gemv<1, kNorm>(x, rows, ldx, k, list, s);
  if (rows == 2) return launch_gemv<2, kNorm>(x, rows, ldx, k, list, s);
  return launch_gemv<4, kNorm>(x, rows, ldx, k, list, s);
}

}  // namespace

bool gemv_supported(const float* x, int64_t ldx, const bf16_t* w, int64_t k) {
  return k > 0 && k % 8 == 0 && ldx % 4 == 0 && aligned16(x) && aligned16(w);
}

cudaError_t gemv_list(const float* x, int64_t rows, int64_t ldx, int64_t k, const GemvList& list, Stream s) {
  if (rows <= 0) return cudaSuccess;
  if (rows > kGemvMaxRows || list.count < 1 || list.count > kGemvMaxProducts) return cudaErrorInvalidValue;
  GemvList l;
  l.norm = list.norm;
  l.norm_eps = list.norm_eps;
  if (l.norm && !aligned16(l.norm)) return cudaErrorInvalidValue;
  for (int p = 0; p < list.count; ++p) {
    const GemvProduct& pr = list.p[p];
    if (pr.n_out <= 0) continue;  // nothing to write
    if (pr.n_group <= 0 || pr.n_out % pr.n_group != 0 || !gemv_supported(x, ldx, pr.w, k)) return cudaErrorInvalidValue;
    if (l.norm && pr.n_group != pr.n_out) return cudaErrorInvalidValue;  // the norm is over the whole row
    l.p[l.count++] = pr;
  }
  if (l.count == 0) return cudaSuccess;
  const int r = static_cast<int>(rows);
  return l.norm ? launch_gemv_rows<true>(x, r, ldx, k, l, s) : launch_gemv_rows<false>(x, r, ldx, k, l, s);
}

cudaError_t gemv(const float* x, int64_t rows, int64_t ldx, const bf16_t* w, int64_t n_out, int64_t k, int64_t n_group, float* out,
                 int64_t ldo, Stream s) {
  GemvList list;
  list.count = 1;
  list.p[0] = GemvProduct{w, out, n_out, n_group, ldo};
  return gemv_list(x, rows, ldx, k, list, s);
}

cudaError_t expert_gate_up(const float* x, int64_t d, int64_t rows, const GemvExperts& ex, int64_t inter, float limit, float* h,
                           Stream s) {
  const int64_t entries = rows * ex.per_row();
  if (entries <= 0 || inter <= 0) return cudaSuccess;
  if (entries > 65535 || ex.top_k < 0 || ex.per_row() < 1 || !gemv_supported(x, d, ex.w1, d) || !aligned16(ex.w3) ||
      (ex.sw1 && (!aligned16(ex.sw1) || !aligned16(ex.sw3))))
    return cudaErrorInvalidValue;
  // Two outputs per warp where that still gives ~2 blocks per multiprocessor (2 chunks of a row in
  // flight per lane, 4 blocks a multiprocessor), else one.
  const int64_t wide = (inter + kWarps * 2 - 1) / (kWarps * 2);
  if (wide * entries >= kFewBlocks)
    launch(expert_gate_up_kernel<2, 2, 4>, dim3(static_cast<unsigned>(wide), static_cast<unsigned>(entries)), kWarps * 32, 0, s)(x, d, ex,
                                                                                                                             inter, limit, h);
  else
    launch(expert_gate_up_kernel<1>, dim3(static_cast<unsigned>((inter + kWarps - 1) / kWarps), static_cast<unsigned>(entries)), kWarps * 32,
           0, s)(x, d, ex, inter, limit, h);
  return cudaGetLastError();
}

constexpr int kDownJ = 4;  // outputs per warp of the down product with several entries a row (16 loads in flight per lane)

int64_t expert_down_counters(int64_t rows, int64_t d) { return rows * ((d + kWarps * kDownJ - 1) / (kWarps * kDownJ)); }

cudaError_t expert_down(const float* h, int64_t inter, int64_t rows, const GemvExperts& ex, int64_t d, bool accumulate, float* out,
                        float* part, unsigned* counters, Stream s) {
  const int64_t entries = rows * ex.per_row();
  if (entries <= 0 || d <= 0) return cudaSuccess;
  if (entries > 65535 || ex.per_row() < 1 || !gemv_supported(h, inter, ex.w2, inter) || (ex.sw2 && !aligned16(ex.sw2)) ||
      (ex.per_row() > 1 && (!part || !counters)))
    return cudaErrorInvalidValue;
  if (ex.per_row() == 1)  // (the shared expert alone) more, thinner blocks: there is one entry a row
    launch(expert_down_kernel<2>, dim3(static_cast<unsigned>((d + kWarps * 2 - 1) / (kWarps * 2)), static_cast<unsigned>(rows)), kWarps * 32,
           0, s)(h, inter, ex, d, accumulate, out, part, counters);
  else  // (2 chunks of a row in flight per lane, 4 blocks a multiprocessor)
    launch(expert_down_kernel<kDownJ, 2, 4>, dim3(static_cast<unsigned>((d + kWarps * kDownJ - 1) / (kWarps * kDownJ)),
                                                  static_cast<unsigned>(entries)),
           kWarps * 32, 0, s)(h, inter, ex, d, accumulate, out, part, counters);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
