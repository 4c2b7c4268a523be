// native_gemv.h: a warp per output, its lanes over 16-byte chunks of the stored row (a few loads in
// flight each), the activations from L1, then a warp sum in a fixed order. A chunk lies in one scale
// block (16 FP8 values of a 16-aligned block, or the 32 MXFP4 values of one E8M0 scale), so its dot
// product is scaled once.
//
// Values become floats by moving their bits into an fp32 (exponent and mantissa fields where fp32's
// low bits are; subnormals included) and multiplying by the power of two that rebiases the exponent:
// exact, a few integer operations and one multiply, no table and no conversion instruction.
#include "common.cuh"
#include "native_gemv.h"
#include "stored_formats.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kWarps = 4;   // outputs per block
constexpr int kUnroll = 4;  // chunks in flight per lane

// E4M3 byte b (low 8 bits): its value, exact; "fn" NaN codes are caught per word (fp8_nan).
__device__ __forceinline__ float e4m3_bits(uint32_t b) {
  return __fmul_rn(__uint_as_float(((b & 0x7fu) << 20) | ((b & 0x80u) << 24)), 0x1p120f);
}
// Whether a word of four E4M3 bytes holds a NaN (magnitude bits all set).
__device__ __forceinline__ bool fp8_nan(uint32_t w) { return (((w & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u) != 0; }
// E2M1 nibble n (low 4 bits): its value, exact.
__device__ __forceinline__ float e2m1_bits(uint32_t n) { return __fmul_rn(__uint_as_float(((n & 7u) << 22) | ((n & 8u) << 28)), 0x1p126f); }

template <int R, int N>  // N values v dotted with x[r, c0 ..), for each row
__device__ __forceinline__ void dot_rows(const float (&v)[N], const float* x, int64_t ldx, int64_t c0, float (&part)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float4* xr = reinterpret_cast<const float4*>(x + r * ldx + c0);
    float p = 0.0f;
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 a = __ldg(xr + i);
      p = fmaf(a.x, v[4 * i], p);
      p = fmaf(a.y, v[4 * i + 1], p);
      p = fmaf(a.z, v[4 * i + 2], p);
      p = fmaf(a.w, v[4 * i + 3], p);
    }
    part[r] = p;
  }
}

template <int R, StoredFormat F>
__device__ __forceinline__ void add_chunk(uint4 q, int64_t o, int64_t ch, const float* x, int64_t ldx, const QuantizedWeight& w,
                                          float (&acc)[R]) {
  const uint32_t words[4] = {q.x, q.y, q.z, q.w};
  float part[R];
  float scale;
  if constexpr (F == StoredFormat::kFp8Block) {
    float v[16];
    bool nan = false;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      nan |= fp8_nan(words[i]);
#pragma unroll
      for (int k = 0; k < 4; ++k) v[4 * i + k] = e4m3_bits(words[i] >> (8 * k));
    }
    const int64_t c0 = ch * 16;
    dot_rows<R>(v, x, ldx, c0, part);
    if (nan)
#pragma unroll
      for (int r = 0; r < R; ++r) part[r] = __uint_as_float(0x7fc00000u);
    scale = scale_value(w, (o / w.block_rows) * w.scale_cols + c0 / w.block_cols);
  } else {
    float v[32];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int k = 0; k < 8; ++k) v[8 * i + k] = e2m1_bits(words[i] >> (4 * k));  // low nibble first
    dot_rows<R>(v, x, ldx, ch * 32, part);
    scale = e8m0_value(static_cast<const uint8_t*>(w.scale)[o * (w.cols / 32) + ch]);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = fmaf(part[r], scale, acc[r]);
}

template <int R, StoredFormat F>
__global__ void __launch_bounds__(kWarps * 32)
    native_gemv_kernel(const float* __restrict__ x, int64_t ldx, QuantizedWeight w, float* __restrict__ out, int64_t ldo) {
  pdl_begin();
  const int lane = threadIdx.x & 31;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (o >= w.rows) return;
  const int64_t chunks = F == StoredFormat::kFp8Block ? w.cols / 16 : w.cols / 32;
  const uint4* row = reinterpret_cast<const uint4*>(w.values) + o * chunks;
  float acc[R] = {};
  for (int64_t base = lane; base < chunks; base += kUnroll * 32) {
    uint4 q[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) q[u] = base + 32 * u < chunks ? load_stream(row + base + 32 * u) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + 32 * u < chunks) add_chunk<R, F>(q[u], o, base + 32 * u, x, ldx, w, acc);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float v = warp_sum(acc[r]);
    if (lane == 0) out[r * ldo + o] = v;
  }
}

template <StoredFormat F>
cudaError_t launch_rows(const float* x, int64_t rows, int64_t ldx, const QuantizedWeight& w, float* out, int64_t ldo, Stream s) {
  const dim3 grid(blocks_for(w.rows, kWarps)), block(kWarps * 32);
  switch (rows) {
    case 1: return launch(native_gemv_kernel<1, F>, grid, block, 0, s)(x, ldx, w, out, ldo);
    case 2: return launch(native_gemv_kernel<2, F>, grid, block, 0, s)(x, ldx, w, out, ldo);
    case 3: return launch(native_gemv_kernel<3, F>, grid, block, 0, s)(x, ldx, w, out, ldo);
    default: return launch(native_gemv_kernel<4, F>, grid, block, 0, s)(x, ldx, w, out, ldo);
  }
}

}  // namespace

bool native_gemv_supported(const QuantizedWeight& w, StoredFormat format, const float* x, int64_t ldx) {
  if (w.rows <= 0 || w.cols <= 0 || !w.values || !w.scale || !x || ldx < w.cols || ldx % 4 != 0) return false;
  if (reinterpret_cast<uintptr_t>(w.values) % 16 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
  if (format == StoredFormat::kMxfp4) return w.cols % 32 == 0 && w.scale_type == ScaleType::kE8M0;
  return w.cols % 16 == 0 && w.block_rows > 0 && w.block_cols > 0 && w.block_cols % 16 == 0 &&
         w.scale_cols >= (w.cols + w.block_cols - 1) / w.block_cols;
}

cudaError_t native_gemv(const float* x, int64_t rows, int64_t ldx, const QuantizedWeight& w, StoredFormat format, float* out, int64_t ldo,
                        Stream s) {
  if (rows <= 0 || w.rows <= 0) return cudaSuccess;
  if (rows > kNativeGemvMaxRows || !out || ldo < w.rows || w.rows > 2147483647LL * kWarps || !native_gemv_supported(w, format, x, ldx))
    return cudaErrorInvalidValue;
  const cudaError_t e = format == StoredFormat::kFp8Block ? launch_rows<StoredFormat::kFp8Block>(x, rows, ldx, w, out, ldo, s)
                                                          : launch_rows<StoredFormat::kMxfp4>(x, rows, ldx, w, out, ldo, s);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
