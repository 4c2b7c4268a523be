// Prefill's hyper-connection mixes on the tensor cores. The mix is an fp32 product (the Sinkhorn
// after it is sensitive to it), and on the FMA units (mix_partial_kernel) it is bound by instruction
// issue at ~3x the time to read the streams once. Here each fp32 value is split exactly into three
// bf16 terms (hi + mid + lo: 8 significant bits each), and the six cross products of order below
// 2^-24 (hi·hi, hi·mid, mid·hi, hi·lo, lo·hi, mid·mid) run as bf16 mma.sync with fp32 accumulation:
// fp32-class sums from a fifth of the instructions.
#include "common.cuh"
#include "mma.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kWarps = 8;                  // a warp per 16 rows
constexpr int kTileRows = 16 * kWarps;     // rows of a block
constexpr int kNTiles = kMixMmaMaxOut / 8;  // n8 tiles of outputs
constexpr int kLdw = kMixChunk + 16;       // bf16 row stride of the weight terms: a half-warp's 8-byte reads hit distinct banks
constexpr int kUnroll = 4;                 // k16 steps whose loads are in flight together

// Two floats as the bf16 pairs hi, mid, lo with a = hi.x + mid.x + lo.x (and b likewise in .y) up to
// 2^-24 of a (each residual is exact in fp32; each term rounds it to 8 bits).
struct Terms {
  uint32_t hi, mid, lo;
};
__device__ __forceinline__ Terms split_terms(float a, float b) {
  Terms s;
  s.hi = pack_bf16(a, b);
  a -= __uint_as_float(s.hi << 16);
  b -= __uint_as_float(s.hi & 0xffff0000u);
  s.mid = pack_bf16(a, b);
  a -= __uint_as_float(s.mid << 16);
  b -= __uint_as_float(s.mid & 0xffff0000u);
  s.lo = pack_bf16(a, b);
  return s;
}

// grid (row tiles of kTileRows, column chunks of kMixChunk), kWarps warps: mix_partial's layout
// (partial[row][chunk][j] for j < n, [n] the chunk's sum of squares). The chunk of w is split into
// its three terms in shared memory; each warp streams its 16 rows of the chunk from global memory.
// Columns are taken in a permuted order inside each k16 step, the same for both operands: lane
// (g, t) reads columns 4t..4t+3 of rows g and g + 8 as one float4 each, which become the A
// fragment's k pairs (2t, 2t+1) and (2t+8, 2t+9); B's two registers for those k come from one
// 8-byte read of weight row 8j + g at the same columns.
__global__ void __launch_bounds__(kWarps * 32) mix_partial_mma_kernel(const float* __restrict__ x, int64_t rows, int64_t K,
                                                                     const float* __restrict__ w, int n, int splits,
                                                                     float* __restrict__ partial) {
  pdl_begin();
  extern __shared__ __align__(16) unsigned char mix_mma_smem[];
  auto* terms = reinterpret_cast<__nv_bfloat16*>(mix_mma_smem);  // [3][n_tiles * 8][kLdw]: hi, mid, lo
  const int n_tiles = (n + 7) / 8, plane = n_tiles * 8 * kLdw;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * kMixChunk;
  const int len = static_cast<int>(min(static_cast<int64_t>(kMixChunk), K - k0));  // a multiple of 4
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int i = threadIdx.x; i < n_tiles * 8 * (kMixChunk / 4); i += blockDim.x) {
    const int r = i / (kMixChunk / 4), c = (i % (kMixChunk / 4)) * 4;
    const float4 v = r < n && c < len ? *reinterpret_cast<const float4*>(w + r * K + k0 + c) : zero;
    const Terms p = split_terms(v.x, v.y), q = split_terms(v.z, v.w);
    *reinterpret_cast<uint2*>(terms + r * kLdw + c) = make_uint2(p.hi, q.hi);
    *reinterpret_cast<uint2*>(terms + plane + r * kLdw + c) = make_uint2(p.mid, q.mid);
    *reinterpret_cast<uint2*>(terms + 2 * plane + r * kLdw + c) = make_uint2(p.lo, q.lo);
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t ra = static_cast<int64_t>(blockIdx.x) * kTileRows + (threadIdx.x >> 5) * 16 + g, rb = ra + 8;
  const float* xa = x + (ra < rows ? ra : 0) * K + k0 + 4 * t;
  const float* xb = x + (rb < rows ? rb : 0) * K + k0 + 4 * t;
  float acc[kNTiles][4] = {};
  float ss_a = 0.0f, ss_b = 0.0f;
  for (int s0 = 0; s0 * 16 < len; s0 += kUnroll) {
    float4 va[kUnroll], vb[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const bool ok = (s0 + u) * 16 + 4 * t < len;
      va[u] = ok && ra < rows ? __ldcs(reinterpret_cast<const float4*>(xa + (s0 + u) * 16)) : zero;
      vb[u] = ok && rb < rows ? __ldcs(reinterpret_cast<const float4*>(xb + (s0 + u) * 16)) : zero;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      ss_a += va[u].x * va[u].x + va[u].y * va[u].y + va[u].z * va[u].z + va[u].w * va[u].w;
      ss_b += vb[u].x * vb[u].x + vb[u].y * vb[u].y + vb[u].z * vb[u].z + vb[u].w * vb[u].w;
      const Terms a0 = split_terms(va[u].x, va[u].y), a1 = split_terms(vb[u].x, vb[u].y);
      const Terms a2 = split_terms(va[u].z, va[u].w), a3 = split_terms(vb[u].z, vb[u].w);
      const uint32_t hi[4] = {a0.hi, a1.hi, a2.hi, a3.hi}, mid[4] = {a0.mid, a1.mid, a2.mid, a3.mid};
      const uint32_t lo[4] = {a0.lo, a1.lo, a2.lo, a3.lo};
      const int c = (s0 + u) * 16 + 4 * t;
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        if (j >= n_tiles) break;
        const __nv_bfloat16* b = terms + (8 * j + g) * kLdw + c;
        const uint2 bh = *reinterpret_cast<const uint2*>(b), bm = *reinterpret_cast<const uint2*>(b + plane);
        const uint2 bl = *reinterpret_cast<const uint2*>(b + 2 * plane);
        // the small terms first, so they are not rounded against the large ones
        mma_bf16(acc[j], lo, bh.x, bh.y);
        mma_bf16(acc[j], hi, bl.x, bl.y);
        mma_bf16(acc[j], mid, bm.x, bm.y);
        mma_bf16(acc[j], mid, bh.x, bh.y);
        mma_bf16(acc[j], hi, bm.x, bm.y);
        mma_bf16(acc[j], hi, bh.x, bh.y);
      }
    }
  }
  // C fragment: acc[j][0..1] = row g, outputs 8j + 2t, +1; acc[j][2..3] = row g + 8, the same outputs.
  ss_a += __shfl_xor_sync(kFull, ss_a, 1);
  ss_a += __shfl_xor_sync(kFull, ss_a, 2);
  ss_b += __shfl_xor_sync(kFull, ss_b, 1);
  ss_b += __shfl_xor_sync(kFull, ss_b, 2);
  float* pa = partial + (ra * splits + blockIdx.y) * (n + 1);
  float* pb = partial + (rb * splits + blockIdx.y) * (n + 1);
#pragma unroll
  for (int j = 0; j < kNTiles; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = 8 * j + 2 * t + e;
      if (col >= n) continue;
      if (ra < rows) pa[col] = acc[j][e];
      if (rb < rows) pb[col] = acc[j][2 + e];
    }
  if (t == 0 && ra < rows) pa[n] = ss_a;
  if (t == 0 && rb < rows) pb[n] = ss_b;
}

}  // namespace

cudaError_t prepare_hc_mix_mma(size_t device_max) {
  return allow_smem<mix_partial_mma_kernel>(sizeof(__nv_bfloat16) * 3 * kMixMmaMaxOut * kLdw, device_max);
}

cudaError_t mix_partial_mma(const float* x, int64_t rows, int64_t K, const float* w, int n, int splits, float* partial, Stream s) {
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  if (n <= 0 || n > kMixMmaMaxOut || K % 4 != 0 || splits > 65535 || tiles > 2147483647) return cudaErrorInvalidValue;
  const size_t smem = sizeof(__nv_bfloat16) * 3 * ((n + 7) / 8 * 8) * kLdw;
  launch(mix_partial_mma_kernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)), kWarps * 32, smem, s)(
      x, rows, K, w, n, splits, partial);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
