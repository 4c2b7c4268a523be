// Attention in fp32 over the sliding window and the compressed entries (all visible ones, or the
// indexer's selection), with per-head sinks: any head_dim up to 512 (fp32 mode, and bf16 mode for head
// dims the tensor-core kernels do not take). Small batches share each (row, head)'s keys among blocks,
// merged by attention_combine (which the tensor-core decode kernel uses too).
#include "common.cuh"

namespace deepinfer::kernels {
namespace {

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
  if (hd % 4 == 0 && (!unrope.inv_freq || unrope.rope_dim % 4 == 0) && aligned16(part) && aligned16(out)) {
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

}  // namespace

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

}  // namespace deepinfer::kernels
