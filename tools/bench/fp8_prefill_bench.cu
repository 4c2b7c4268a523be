// Prefill products with weights in their checkpoint formats, each measured two ways on V4-Flash's
// shapes (the choices issue 32 asks to measure; the faster is what the CUDA backend runs):
//  1. FP8 block-scaled linears: the stored matrix dequantized to bf16 per call + cuBLAS's bf16 GEMM,
//     against the activations quantized to E4M3 per row and 128 columns + cuBLASLt's block-scaled
//     E4M3 GEMM (kernels/fp8_operands.h; the weight's E8M0 scales as fp32 per call).
//  2. MXFP4 routed experts (256 experts, gate / up [2048 x 4096], down [4096 x 2048], top-6 of 4096
//     tokens): the stored bytes decoded into bf16 wgmma tiles (moe_*_wgmma_fp4), against the stacks
//     re-encoded to E4M3 with an fp32 scale per 128 x 128 block (exact where the block's E8M0 scales
//     lie within 8 binades of their largest) + cuBLASLt's E4M3 GEMM per expert.
// First, which operand scalings and row counts cuBLASLt's block-scaled E4M3 product takes.
// Each FP8 result is checked against the dequantized product (relative Frobenius error printed).
// Weights are random (E4M3 bytes without NaN codes, E2M1 nibbles, scales 2^-10..2^-3).
//   fp8_prefill_bench [--rows R] [--iters I] [--tokens T]
#include "backend/cuda/fp8_gemm.h"
#include "di_kernels.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace deepinfer;
namespace kn = deepinfer::kernels;

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "fp8_prefill_bench: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "fp8_prefill_bench: %s: %s\n", what, cublasGetStatusString(s));
  std::exit(1);
}

template <class T>
T* device_alloc(size_t count) {
  void* p = nullptr;
  check(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc");
  return static_cast<T*>(p);
}

template <class T>
T* upload(const std::vector<T>& host) {
  T* d = device_alloc<T>(host.size());
  check(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return d;
}

std::vector<uint8_t> random_bytes(size_t n, std::mt19937& rng, uint8_t lo, uint8_t hi) {
  std::vector<uint8_t> v(n);
  std::uniform_int_distribution<int> pick(lo, hi);
  for (auto& b : v) b = static_cast<uint8_t>(pick(rng));
  return v;
}

// E4M3 bytes that are not NaN codes (0x7f / 0xff), with either sign.
std::vector<uint8_t> random_e4m3(size_t n, std::mt19937& rng) {
  std::vector<uint8_t> v = random_bytes(n, rng, 0, 0xfe);
  for (auto& b : v)
    if ((b & 0x7f) == 0x7f) b = 0x7e;
  return v;
}

kn::bf16_t* random_activations(size_t n, std::mt19937& rng) {
  std::vector<kn::bf16_t> h(n);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto& b : h) {
    const float f = g(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    b = static_cast<kn::bf16_t>(u >> 16);
  }
  return upload(h);
}

template <class F>
double time_ms(int iters, F&& f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  f();
  check(cudaDeviceSynchronize(), "warm-up");
  check(cudaEventRecord(a), "record");
  for (int i = 0; i < iters; ++i) f();
  check(cudaEventRecord(b), "record");
  check(cudaEventSynchronize(b), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

// ||a - b|| / ||b|| over n device floats.
double rel_error(const float* a, const float* b, size_t n) {
  std::vector<float> ha(n), hb(n);
  check(cudaMemcpy(ha.data(), a, n * 4, cudaMemcpyDeviceToHost), "download");
  check(cudaMemcpy(hb.data(), b, n * 4, cudaMemcpyDeviceToHost), "download");
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(ha[i]) - hb[i]) * (double(ha[i]) - hb[i]);
    den += double(hb[i]) * hb[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// The backend's FP8 product (src/backend/cuda/fp8_gemm.h) with a workspace of its own: fp32 out,
// the activations' scales per row and 128 columns.
class Fp8Products {
 public:
  Fp8Products() {
    check(gemm_.init(), "cublasLtCreate");
    ws_ = device_alloc<char>(kWorkspace);
  }
  cublasStatus_t try_run(const uint8_t* w, const float* w_scales, cublasLtMatmulMatrixScale_t w_mode, const uint8_t* x,
                         const float* x_scales, int64_t rows, int64_t n, int64_t k, float* d) {
    return gemm_.run({w, w_scales, w_mode}, {x, x_scales, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F}, rows, n, k, d, n, false, ws_,
                     kWorkspace, nullptr);
  }
  void run(const uint8_t* w, const float* w_scales, cublasLtMatmulMatrixScale_t w_mode, const uint8_t* x, const float* x_scales,
           int64_t rows, int64_t n, int64_t k, float* d) {
    check(try_run(w, w_scales, w_mode, x, x_scales, rows, n, k, d), "FP8 matmul");
  }

 private:
  static constexpr size_t kWorkspace = size_t(32) << 20;
  Fp8Gemm gemm_;
  void* ws_ = nullptr;
};

__global__ void transpose_kernel(const float* in, int64_t r, int64_t c, float* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < r * c) out[(i % c) * r + i / c] = in[i];
}

void transpose(const float* in, int64_t r, int64_t c, float* out) {
  transpose_kernel<<<static_cast<unsigned>((r * c + 255) / 256), 256>>>(in, r, c, out);
  check(cudaGetLastError(), "transpose");
}

// MXFP4 stacks (cols / 2 bytes and cols / 32 E8M0 scales a row) as E4M3 with one fp32 scale per
// 128 x 128 block (cuBLASLt's BLK128x128_32F: the weight scaling it pairs with per-row activations):
// the block's largest E8M0 scale, found first; each value e2m1 * 2^(s - largest) rounded to E4M3
// (exact down to 2^-8 below the largest). Row blocks never straddle experts (rows a multiple of 128).
__global__ void mxfp4_block_max_kernel(const uint8_t* s, int64_t row_blocks, int64_t cols, uint8_t* top) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x, kb = cols / 128;
  if (i >= row_blocks * kb) return;
  const int64_t rb = i / kb, b = i % kb;
  int m = 0;
  for (int64_t r = rb * 128; r < rb * 128 + 128; ++r)
    for (int g = 0; g < 4; ++g) m = max(m, static_cast<int>(s[r * (cols / 32) + b * 4 + g]));
  top[i] = static_cast<uint8_t>(m);
}

// One warp per (row, 128 columns), rows along grid.x (past grid.y's limit).
__global__ void mxfp4_to_e4m3_kernel(const uint8_t* v, const uint8_t* s, const uint8_t* top, int64_t rows, int64_t cols, uint8_t* q,
                                     float* scales) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (row >= rows) return;
  const int64_t kb = blockIdx.y, col = kb * 128 + lane * 4, block = (row / 128) * (cols / 128) + kb;
  const int own = s[row * (cols / 32) + col / 32], largest = top[block];
  const uint16_t packed = *reinterpret_cast<const uint16_t*>(v + row * (cols / 2) + col / 2);
  const float rel = ldexpf(1.0f, own - largest);
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t code = (packed >> (4 * i)) & 0xfu, mag = code & 7u;
    const float m = mag < 2 ? 0.5f * mag : ldexpf(1.0f + 0.5f * (mag & 1u), static_cast<int>(mag >> 1) - 1);
    out |= static_cast<uint32_t>(__nv_cvt_float_to_fp8((code & 8u ? -m : m) * rel, __NV_SATFINITE, __NV_E4M3)) << (8 * i);
  }
  *reinterpret_cast<uint32_t*>(q + row * cols + col) = out;
  if (lane == 0 && row % 128 == 0) scales[block] = ldexpf(1.0f, largest - 127);
}

// bf16 rows (permuted by expert: expert e's rows [offsets[e], offsets[e + 1])) as E4M3 + fp32 scales per
// row and 128 columns, each expert's scales a table [block][its rows] at offsets[e] * blocks.
__global__ void quantize_grouped_kernel(const kn::bf16_t* x, const int32_t* offsets, int n_exp, int64_t rows, int64_t k, uint8_t* q,
                                        float* scales) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * 8 + threadIdx.x / 32;
  if (row >= rows) return;
  int lo = 0, hi = n_exp - 1;  // the expert whose range holds row
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= row)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int64_t first = offsets[lo], count = offsets[lo + 1] - first, kb = blockIdx.x, col = kb * 128 + lane * 4;
  const uint2 raw = *reinterpret_cast<const uint2*>(x + row * k + col);
  const float v[4] = {__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u), __uint_as_float(raw.y << 16),
                      __uint_as_float(raw.y & 0xffff0000u)};
  float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
  for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float scale = amax > 0 ? amax / 448.0f : 1.0f;
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) out |= static_cast<uint32_t>(__nv_cvt_float_to_fp8(v[i] / scale, __NV_SATFINITE, __NV_E4M3)) << (8 * i);
  *reinterpret_cast<uint32_t*>(q + row * k + col) = out;
  if (lane == 0) scales[first * (k / 128) + kb * count + (row - first)] = scale;
}

void support(Fp8Products& fp8, std::mt19937& rng) {
  const int64_t n = 2048, k = 512, max_rows = 320;
  const uint8_t* w = upload(random_e4m3(static_cast<size_t>(n * k), rng));
  const uint8_t* x = upload(random_e4m3(static_cast<size_t>(max_rows * k), rng));
  const float* ws = upload(std::vector<float>(static_cast<size_t>(n * k / 128), 1.0f));
  const float* xs = upload(std::vector<float>(static_cast<size_t>(max_rows * k / 128), 1.0f));
  auto* out = device_alloc<float>(static_cast<size_t>(max_rows * n));
  std::printf("cuBLASLt E4M3 [rows x %lld] @ [%lld x %lld]^T, activations scaled per row and 128 columns; the weight:\n",
              static_cast<long long>(k), static_cast<long long>(n), static_cast<long long>(k));
  for (auto mode : {CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F}) {
    std::printf("  %s:", mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F ? "per row and 128 columns" : "per 128 x 128 block");
    for (int64_t rows : {1, 2, 3, 4, 8, 9, 15, 16, 17, 24, 37, 64, 96, 97, 100, 128, 300, 301, 320})
      std::printf(" %lld:%s", static_cast<long long>(rows),
                  fp8.try_run(w, ws, mode, x, xs, rows, n, k, out) == CUBLAS_STATUS_SUCCESS ? "ok" : "no");
    std::printf("\n");
  }
  check(cudaDeviceSynchronize(), "support");
}

struct Shape {
  const char* name;
  int64_t n, k;
};

void linears(int64_t rows, int iters, std::mt19937& rng, Fp8Products& fp8, cublasHandle_t blas) {
  // V4-Flash's FP8 linears (attention, indexer query, shared expert; wo_a is 8 groups of this shape)
  const Shape shapes[] = {{"wq_a", 1024, 4096},           {"wkv", 512, 4096},   {"wq_b", 32768, 1024},          {"index wq_b", 8192, 1024},
                          {"wo_a (a group)", 1024, 4096}, {"wo_b", 4096, 8192}, {"shared w1 / w3", 2048, 4096}, {"shared w2", 4096, 2048}};
  std::printf("\nFP8 linears, %lld rows: ms a product (dequantized + bf16 cuBLAS | E4M3 cuBLASLt), rel. error of E4M3 vs dequantized\n",
              static_cast<long long>(rows));
  std::printf("%-16s %6s %6s %10s %10s %8s %10s\n", "weight", "n", "k", "dequant", "fp8", "ratio", "rel.err");
  double total_a = 0, total_b = 0;
  for (const Shape& sh : shapes) {
    const int64_t n = sh.n, k = sh.k, nb = n / 128, kb = k / 128, ld4 = (kb + 3) / 4 * 4;
    kn::QuantizedWeight w;
    w.values = upload(random_e4m3(static_cast<size_t>(n * k), rng));
    w.scale = upload(random_bytes(static_cast<size_t>(nb * kb), rng, 117, 124));
    w.scale_type = kn::ScaleType::kE8M0;
    w.rows = n, w.cols = k, w.scale_cols = kb, w.nan_free = true;
    const kn::bf16_t* xb = random_activations(static_cast<size_t>(rows * k), rng);
    auto* wb = device_alloc<kn::bf16_t>(static_cast<size_t>(n * k));
    auto* ref = device_alloc<float>(static_cast<size_t>(rows * n));
    auto* out = device_alloc<float>(static_cast<size_t>(rows * n));
    auto* xq = device_alloc<uint8_t>(static_cast<size_t>(rows * k));
    auto* xs = device_alloc<float>(static_cast<size_t>(rows * kb));
    auto* ws = device_alloc<float>(static_cast<size_t>(nb * ld4));
    const kn::Stream s{nullptr, false};
    const float one = 1.0f, zero = 0.0f;
    auto dequantized = [&] {
      check(kn::dequantize_fp8_block(w, wb, nullptr, s), "dequantize");
      check(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows), static_cast<int>(k), &one, wb,
                         CUDA_R_16BF, static_cast<int>(k), xb, CUDA_R_16BF, static_cast<int>(k), &zero, ref, CUDA_R_32F,
                         static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "bf16 GEMM");
    };
    auto e4m3 = [&] {
      check(kn::weight_scales_f32(w, ws, ld4, s), "weight scales");
      check(kn::quantize_activations_e4m3(xb, rows, k, k, xq, xs, s), "quantize");
      fp8.run(w.values, ws, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, xq, xs, rows, n, k, out);
    };
    const double a = time_ms(iters, dequantized), b = time_ms(iters, e4m3);
    const double err = rel_error(out, ref, static_cast<size_t>(rows * n));
    std::printf("%-16s %6lld %6lld %10.4f %10.4f %8.2f %10.5f\n", sh.name, static_cast<long long>(n), static_cast<long long>(k), a, b,
                a / b, err);
    const int times = std::strcmp(sh.name, "wo_a (a group)") == 0 ? 8 : std::strcmp(sh.name, "shared w1 / w3") == 0 ? 2 : 1;
    total_a += a * times, total_b += b * times;
    if (err > 0.1) {  // which scale layout cuBLASLt read, if not the one assumed
      auto* ws_t = device_alloc<float>(static_cast<size_t>(nb * ld4));
      auto* xs_t = device_alloc<float>(static_cast<size_t>(rows * kb));
      transpose(ws, nb, ld4, ws_t);
      transpose(xs, kb, rows, xs_t);
      const float* wv[2] = {ws, ws_t};
      const float* xv[2] = {xs, xs_t};
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          fp8.run(w.values, wv[i], CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, xq, xv[j], rows, n, k, out);
          std::printf("  layout: weight scales %s, activation scales %s: rel.err %.5f\n", i ? "[kb][nb]" : "[nb][kb4]",
                      j ? "[row][kb]" : "[kb][row]", rel_error(out, ref, static_cast<size_t>(rows * n)));
        }
      cudaFree(ws_t);
      cudaFree(xs_t);
    }
    for (const void* p : {static_cast<const void*>(w.values), w.scale, static_cast<const void*>(xb), static_cast<const void*>(wb),
                          static_cast<const void*>(ref), static_cast<const void*>(out), static_cast<const void*>(xq),
                          static_cast<const void*>(xs), static_cast<const void*>(ws)})
      cudaFree(const_cast<void*>(p));
  }
  std::printf("a layer's FP8 linears (wo_a x 8, shared w1 + w3): dequantized %.3f ms, E4M3 %.3f ms (%.2fx)\n", total_a, total_b,
              total_a / total_b);
}

void experts(int64_t tokens, int iters, std::mt19937& rng, Fp8Products& fp8) {
  const int n_exp = 256, top_k = 6;
  const int64_t d = 4096, inter = 2048, entries = tokens * top_k;
  // stacks: w1, w3 [n_exp x inter x d], w2 [n_exp x d x inter]
  auto stack = [&](int64_t rows, int64_t cols) {
    kn::QuantizedWeight w;
    w.values = upload(random_bytes(static_cast<size_t>(n_exp * rows * cols / 2), rng, 0, 255));
    w.scale = upload(random_bytes(static_cast<size_t>(n_exp * rows * cols / 32), rng, 118, 124));
    w.rows = rows, w.cols = cols, w.scale_type = kn::ScaleType::kE8M0;
    return w;
  };
  const kn::QuantizedWeight w1 = stack(inter, d), w3 = stack(inter, d), w2 = stack(d, inter);
  std::vector<int32_t> ids(static_cast<size_t>(entries));
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int32_t> all(n_exp);
    for (int i = 0; i < n_exp; ++i) all[i] = i;
    std::shuffle(all.begin(), all.end(), rng);
    for (int i = 0; i < top_k; ++i) ids[t * top_k + i] = all[i];
  }
  const int32_t* experts = upload(ids);
  const kn::bf16_t* xb = random_activations(static_cast<size_t>(tokens * d), rng);
  const kn::Stream s{nullptr, false};
  kn::MoePlan plan;
  plan.tile_rows = kn::kMoeBigTileRows;
  plan.max_tiles = static_cast<int32_t>((entries + plan.tile_rows - 1) / plan.tile_rows + std::min<int64_t>(n_exp, entries));
  plan.counts = device_alloc<int32_t>(n_exp);
  plan.local = device_alloc<int32_t>(entries);
  plan.offsets = device_alloc<int32_t>(n_exp + 1);
  plan.pos = device_alloc<int32_t>(entries);
  plan.tiles = device_alloc<int4>(plan.max_tiles);
  plan.n_tiles = device_alloc<int32_t>(1);
  plan.sources = device_alloc<int32_t>(entries);
  plan.top_k = top_k;
  check(kn::moe_plan(experts, entries, n_exp, plan, s), "moe plan");
  std::vector<int32_t> offsets(n_exp + 1);
  check(cudaMemcpy(offsets.data(), plan.offsets, offsets.size() * 4, cudaMemcpyDeviceToHost), "offsets");
  auto* h = device_alloc<kn::bf16_t>(static_cast<size_t>(entries * inter));
  auto* y = device_alloc<kn::bf16_t>(static_cast<size_t>(entries * d));
  auto decoded = [&] {
    check(kn::moe_gate_up_wgmma_fp4(xb, plan.sources, w1, w3, d, inter, 10.0f, plan.tiles, plan.n_tiles, plan.max_tiles, h, s), "gate/up");
    check(kn::moe_down_wgmma_fp4(h, w2, inter, d, plan.tiles, plan.n_tiles, plan.max_tiles, y, s), "down");
  };
  const double t_decoded = time_ms(iters, decoded);

  // Re-encoded to E4M3: the stacks (a per-call pass, or once at load for twice the memory), the
  // permuted activations and the SwiGLU output quantized per row and 128 columns, three products an expert.
  auto* q1 = device_alloc<uint8_t>(static_cast<size_t>(n_exp * inter * d));
  auto* q3 = device_alloc<uint8_t>(static_cast<size_t>(n_exp * inter * d));
  auto* q2 = device_alloc<uint8_t>(static_cast<size_t>(n_exp * d * inter));
  auto* s1 = device_alloc<float>(static_cast<size_t>(n_exp * inter * d / 16384));
  auto* s3 = device_alloc<float>(static_cast<size_t>(n_exp * inter * d / 16384));
  auto* s2 = device_alloc<float>(static_cast<size_t>(n_exp * d * inter / 16384));
  auto* top = device_alloc<uint8_t>(static_cast<size_t>(n_exp * d * inter / 16384));
  auto reencode = [&] {
    auto one = [&](const kn::QuantizedWeight& w, uint8_t* q, float* sc) {
      const int64_t rows = n_exp * w.rows, blocks = rows / 128 * (w.cols / 128);
      const auto* scale = static_cast<const uint8_t*>(w.scale);
      mxfp4_block_max_kernel<<<static_cast<unsigned>((blocks + 255) / 256), 256>>>(scale, rows / 128, w.cols, top);
      mxfp4_to_e4m3_kernel<<<dim3(static_cast<unsigned>((rows + 7) / 8), static_cast<unsigned>(w.cols / 128)), 256>>>(w.values, scale, top,
                                                                                                                      rows, w.cols, q, sc);
    };
    one(w1, q1, s1);
    one(w3, q3, s3);
    one(w2, q2, s2);
    check(cudaGetLastError(), "re-encode");
  };
  const double t_reencode = time_ms(std::max(1, iters / 4), reencode);
  std::vector<float> host_x(static_cast<size_t>(tokens * d));
  auto* xf = device_alloc<float>(static_cast<size_t>(tokens * d));  // moe_gather reads fp32 rows
  for (auto& v : host_x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  check(cudaMemcpy(xf, host_x.data(), host_x.size() * 4, cudaMemcpyHostToDevice), "x");
  auto* xperm = device_alloc<kn::bf16_t>(static_cast<size_t>(entries * d));
  auto* xq = device_alloc<uint8_t>(static_cast<size_t>((entries + 16) * d));
  auto* xs = device_alloc<float>(static_cast<size_t>((entries + 16) * d / 128));
  auto* g = device_alloc<float>(static_cast<size_t>((entries + 16) * inter));
  auto* u = device_alloc<float>(static_cast<size_t>((entries + 16) * inter));
  auto* hq = device_alloc<uint8_t>(static_cast<size_t>((entries + 16) * inter));
  auto* hs = device_alloc<float>(static_cast<size_t>((entries + 16) * inter / 128));
  auto* yf = device_alloc<float>(static_cast<size_t>((entries + 16) * d));
  const dim3 block(256);
  // A row count cuBLASLt has no algorithm for (not a multiple of 4) runs rounded up to 4 rows (the
  // extra rows are the next expert's, overwritten after; the buffers have spare rows): counted in
  // padded_products.
  int padded_products = 0;
  auto expert_product = [&](const uint8_t* w, const float* ws, const uint8_t* x, const float* xsc, int64_t rows, int64_t n, int64_t k,
                            float* out) {
    if (fp8.try_run(w, ws, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, x, xsc, rows, n, k, out) == CUBLAS_STATUS_SUCCESS) return;
    ++padded_products;
    fp8.run(w, ws, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, x, xsc, (rows + 3) / 4 * 4, n, k, out);
  };
  auto quantize = [&](const kn::bf16_t* rows, int64_t width, uint8_t* q, float* sc) {
    quantize_grouped_kernel<<<dim3(static_cast<unsigned>(width / 128), static_cast<unsigned>((entries + 7) / 8)), block>>>(
        rows, plan.offsets, n_exp, entries, width, q, sc);
  };
  auto each_expert = [&](auto&& f) {  // f(expert, its first permuted row, its rows) for experts with rows
    for (int e = 0; e < n_exp; ++e)
      if (offsets[e + 1] > offsets[e]) f(e, int64_t{offsets[e]}, int64_t{offsets[e + 1] - offsets[e]});
  };
  auto e4m3 = [&] {
    check(kn::moe_gather(xf, d, entries, top_k, plan.pos, xperm, s), "gather");
    quantize(xperm, d, xq, xs);
    each_expert([&](int e, int64_t first, int64_t count) {
      expert_product(q1 + e * inter * d, s1 + e * inter * d / 16384, xq + first * d, xs + first * d / 128, count, inter, d,
                     g + first * inter);
      expert_product(q3 + e * inter * d, s3 + e * inter * d / 16384, xq + first * d, xs + first * d / 128, count, inter, d,
                     u + first * inter);
    });
    check(kn::swiglu_bf16(g, u, entries * inter, 10.0f, h, s), "swiglu");
    quantize(h, inter, hq, hs);
    each_expert([&](int e, int64_t first, int64_t count) {
      expert_product(q2 + e * d * inter, s2 + e * d * inter / 16384, hq + first * inter, hs + first * inter / 128, count, d, inter,
                     yf + first * d);
    });
  };
  reencode();
  const double t_fp8 = time_ms(iters, e4m3);
  // the re-encoded gate product of expert 0 against its dequantized one (a check of the layouts)
  {
    const int64_t count = offsets[1] - offsets[0];
    auto* wb = device_alloc<kn::bf16_t>(static_cast<size_t>(inter * d));
    auto* ref = device_alloc<float>(static_cast<size_t>(count * inter));
    check(kn::dequantize_mxfp4(w1, wb, nullptr, s), "dequantize");  // (w1.rows rows: expert 0)
    cublasHandle_t blas;
    check(cublasCreate(&blas), "cublas");
    const float one = 1.0f, zero = 0.0f;
    check(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(inter), static_cast<int>(count), static_cast<int>(d), &one, wb,
                       CUDA_R_16BF, static_cast<int>(d), xperm, CUDA_R_16BF, static_cast<int>(d), &zero, ref, CUDA_R_32F,
                       static_cast<int>(inter), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "bf16 GEMM");
    std::printf("re-encoded expert 0 gate product vs dequantized: rel.err %.5f (%lld rows)\n", rel_error(g, ref, count * inter),
                static_cast<long long>(count));
    cublasDestroy(blas);
  }
  const double gb4 = 3.0 * n_exp * inter * d / 2 / 1e9;
  std::printf("\nMXFP4 experts, %lld tokens x top-%d of %d (%.2f GB stored a layer):\n", static_cast<long long>(tokens), top_k, n_exp, gb4);
  std::printf("  decoded bf16 wgmma tiles (gate/up + down):                   %8.3f ms\n", t_decoded);
  std::printf("  re-encoded E4M3, cuBLASLt per expert (gather, quantize, gate, up, SwiGLU, quantize, down): %8.3f ms\n", t_fp8);
  std::printf("    (%d of %d products padded to a multiple of 4 rows: no algorithm for their row count)\n", padded_products / (iters + 1),
              3 * n_exp);
  std::printf(
      "  + re-encoding the stacks per call:                            %8.3f ms (or once at load: %.2f GB a layer instead of %.2f)\n",
      t_reencode, 2 * gb4, gb4);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 4096, tokens = 4096;
  int iters = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--rows")
      rows = std::atoll(argv[i + 1]);
    else if (a == "--iters")
      iters = std::atoi(argv[i + 1]);
    else if (a == "--tokens")
      tokens = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: fp8_prefill_bench [--rows R] [--iters I] [--tokens T]\n");
      return 2;
    }
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "device");
  std::printf("%s\n", prop.name);
  check(kn::prepare_device(kn::wgmma_supported()), "prepare");
  std::mt19937 rng(7);
  Fp8Products fp8;
  cublasHandle_t blas;
  check(cublasCreate(&blas), "cublas");
  support(fp8, rng);
  for (int64_t r : {rows, int64_t(512), int64_t(64)}) linears(r, iters, rng, fp8, blas);
  experts(tokens, std::max(2, iters / 4), rng, fp8);
  cublasDestroy(blas);
  return 0;
}
