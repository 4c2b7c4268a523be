// FP8 tensor-core products (kernels/fp8_operands.h, src/backend/cuda/fp8_gemm.h) against the host: the
// activations' E4M3 quantization (scale amax / 448, each value the nearest E4M3 of x / scale), the
// weight scales' fp32 table (its padding untouched), cuBLASLt's block-scaled product against a
// double-precision sum of the same E4M3 operands, and the backend's product with a stored FP8 weight
// (native_weights) against the CPU backend's.
#include "ops_fixture.h"

#ifdef DEEPINFER_HAS_CUDA
#include "backend/cuda/fp8_gemm.h"
#include "fp8_operands.h"
#endif
#include "util/dtype.h"

#include <cmath>
#include <cstring>

namespace deepinfer::testing {
namespace {

#ifdef DEEPINFER_HAS_CUDA
constexpr kernels::Stream kSync{nullptr, false};

template <class T>
T* to_device(const std::vector<T>& v) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> to_host(const T* p, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

// Half the gap between E4M3 values around |v| (subnormals: 2^-9 apart).
double e4m3_half_gap(double v) {
  const double a = std::fabs(v);
  return a < 0x1p-6 ? 0x1p-10 : std::ldexp(1.0, static_cast<int>(std::floor(std::log2(a))) - 4);
}

// Activations quantized on the device: rows x k bf16 values (row stride ldx) with a zero block and a
// block with one outlier; the E4M3 bytes and the scales ([k / 128][rows]) back on the host.
struct Quantized {
  std::vector<uint16_t> x;
  std::vector<uint8_t> q;
  std::vector<float> scales;
};

Quantized quantize(int64_t rows, int64_t k, int64_t ldx, std::mt19937& rng) {
  Quantized r;
  std::normal_distribution<float> g(0.0f, 1.0f);
  r.x.resize(static_cast<size_t>(rows * ldx));
  for (size_t i = 0; i < r.x.size(); ++i) r.x[i] = f32_to_bf16(g(rng) * (i % 3 == 0 ? 0.01f : 1.0f));
  for (int64_t c = 128; c < 256 && c < k; ++c) r.x[static_cast<size_t>(c)] = 0;  // row 0, block 1: zero
  if (rows > 1) r.x[static_cast<size_t>(ldx + 5)] = f32_to_bf16(300.0f);         // row 1, block 0: an outlier
  const uint16_t* dx = to_device(r.x);
  uint8_t* dq = nullptr;
  float* ds = nullptr;
  EXPECT_EQ(cudaMalloc(&dq, static_cast<size_t>(rows * k)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&ds, static_cast<size_t>(rows * k / 128) * 4), cudaSuccess);
  EXPECT_EQ(kernels::quantize_activations_e4m3(dx, rows, k, ldx, dq, ds, kSync), cudaSuccess);
  r.q = to_host(dq, static_cast<size_t>(rows * k));
  r.scales = to_host(ds, static_cast<size_t>(rows * k / 128));
  cudaFree(const_cast<uint16_t*>(dx));
  cudaFree(dq);
  cudaFree(ds);
  return r;
}

#endif

}  // namespace

TEST_F(CudaOps, Fp8OperandsMatchTheHost) {
#ifdef DEEPINFER_HAS_CUDA
  for (auto [rows, k, ldx] : {std::tuple<int64_t, int64_t, int64_t>{37, 384, 388}, {1, 128, 128}, {300, 1024, 1024}}) {
    const Quantized a = quantize(rows, k, ldx, rng);
    int bad = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t b = 0; b < k / 128; ++b) {
        float amax = 0.0f;
        for (int64_t c = b * 128; c < (b + 1) * 128; ++c)
          amax = std::max(amax, std::fabs(bf16_to_f32(a.x[static_cast<size_t>(r * ldx + c)])));
        const float scale = amax > 0.0f ? amax / 448.0f : 1.0f, inv = 1.0f / scale;
        EXPECT_EQ(a.scales[static_cast<size_t>(b * rows + r)], scale) << "row " << r << " block " << b;
        for (int64_t c = b * 128; c < (b + 1) * 128; ++c) {
          const double v = static_cast<double>(bf16_to_f32(a.x[static_cast<size_t>(r * ldx + c)]) * inv);
          const double got = fp8_e4m3_to_f32(a.q[static_cast<size_t>(r * k + c)]);
          if (!(std::fabs(got - v) <= e4m3_half_gap(v) && std::fabs(got) <= 448.0) && ++bad <= 3)
            ADD_FAILURE() << "rows " << rows << " k " << k << ": (" << r << ", " << c << ") " << got << " for " << v;
        }
      }
    EXPECT_EQ(bad, 0);
  }
  // Weight scales: E8M0 and f32 block scales as fp32, a block row's padding (to 4) left as it was.
  const int64_t rows = 300, cols = 640, br = 3, bc = 5, ld = 8;
  std::vector<uint8_t> e8m0(static_cast<size_t>(br * bc));
  for (size_t i = 0; i < e8m0.size(); ++i) e8m0[i] = static_cast<uint8_t>(110 + i);
  std::vector<float> f32(e8m0.size());
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = 0.001f * static_cast<float>(i + 1);
  for (bool e8 : {true, false}) {
    kernels::QuantizedWeight w;
    w.values = reinterpret_cast<const uint8_t*>(16);
    w.scale = e8 ? static_cast<const void*>(to_device(e8m0)) : static_cast<const void*>(to_device(f32));
    w.scale_type = e8 ? kernels::ScaleType::kE8M0 : kernels::ScaleType::kF32;
    w.rows = rows, w.cols = cols, w.scale_cols = bc;
    float* out = to_device(std::vector<float>(static_cast<size_t>(br * ld), -7.0f));
    ASSERT_EQ(kernels::weight_scales_f32(w, out, ld, kSync), cudaSuccess);
    const std::vector<float> got = to_host(out, static_cast<size_t>(br * ld));
    for (int64_t r = 0; r < br; ++r)
      for (int64_t c = 0; c < ld; ++c) {
        const size_t i = static_cast<size_t>(r * bc + c);
        EXPECT_EQ(got[static_cast<size_t>(r * ld + c)], c >= bc ? -7.0f : e8 ? e8m0_to_f32(e8m0[i]) : f32[i]) << r << ", " << c;
      }
    cudaFree(const_cast<void*>(w.scale));
    cudaFree(out);
    w.block_rows = 64;  // not 128 x 128 blocks: refused
    EXPECT_EQ(kernels::weight_scales_f32(w, out, ld, kSync), cudaErrorInvalidValue);
  }
  EXPECT_EQ(kernels::quantize_activations_e4m3(reinterpret_cast<const uint16_t*>(16), 2, 100, 100, reinterpret_cast<uint8_t*>(16),
                                               reinterpret_cast<float*>(16), kSync),
            cudaErrorInvalidValue);  // k not whole 128-column blocks
#else
  GTEST_SKIP() << "no CUDA build";
#endif
}

// cuBLASLt's product of E4M3 operands with their scales against the double-precision sum of the same
// values: within 2^-9 of the sum of |terms|, plus bf16's rounding for a bf16 output. (Hopper's FP8
// products keep ~14 bits of their running sums within each 128-column block before the fp32
// promotion, as DeepSeek-V3's report measured: errors above 2^-12 of the sum of |terms| occur.)
TEST_F(CudaOps, Fp8GemmMatchesTheHost) {
#ifdef DEEPINFER_HAS_CUDA
  Fp8Gemm gemm;
  ASSERT_EQ(gemm.init(), CUBLAS_STATUS_SUCCESS);
  void* workspace = nullptr;
  const size_t ws_bytes = size_t(32) << 20;
  ASSERT_EQ(cudaMalloc(&workspace, ws_bytes), cudaSuccess);
  const int64_t n = 384, k = 640, kb = k / 128, ld = 8;  // (a block row's 5 scales padded to 8)
  std::vector<uint8_t> w(static_cast<size_t>(n * k));
  for (auto& v : w) {
    v = static_cast<uint8_t>(rng());
    if ((v & 0x7f) == 0x7f) v = 0x7e;
  }
  std::vector<float> ws(static_cast<size_t>(n / 128 * ld), 0.0f);
  for (int64_t r = 0; r < n / 128; ++r)
    for (int64_t c = 0; c < kb; ++c) ws[static_cast<size_t>(r * ld + c)] = std::ldexp(1.0f, static_cast<int>(-9 + (r * kb + c) % 5));
  const uint8_t* dw = to_device(w);
  const float* dws = to_device(ws);
  // (cuBLASLt may have no algorithm for row counts that are not multiples of 4: NOT_SUPPORTED, nothing launched)
  for (auto [rows, out_bf16] : {std::pair<int64_t, bool>{1, false}, {36, false}, {300, false}, {36, true}, {37, false}}) {
    const Quantized a = quantize(rows, k, k, rng);
    const uint8_t* dq = to_device(a.q);
    const float* ds = to_device(a.scales);
    const int64_t ldo = n + 8;
    void* out = nullptr;
    ASSERT_EQ(cudaMalloc(&out, static_cast<size_t>(rows * ldo) * 4), cudaSuccess);
    const cublasStatus_t status =
        gemm.run({dw, dws, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F}, {dq, ds, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F}, rows, n, k, out,
                 ldo, out_bf16, workspace, ws_bytes, nullptr);
    if (rows % 4 != 0 && status == CUBLAS_STATUS_NOT_SUPPORTED) {
      cudaFree(const_cast<uint8_t*>(dq));
      cudaFree(const_cast<float*>(ds));
      cudaFree(out);
      continue;
    }
    ASSERT_EQ(status, CUBLAS_STATUS_SUCCESS) << rows << " rows";
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> got(static_cast<size_t>(rows * ldo));
    if (out_bf16) {
      const std::vector<uint16_t> h = to_host(static_cast<const uint16_t*>(out), got.size());
      for (size_t i = 0; i < got.size(); ++i) got[i] = bf16_to_f32(h[i]);
    } else {
      got = to_host(static_cast<const float*>(out), got.size());
    }
    int bad = 0;
    double worst = 0;  // the largest error as a fraction of the sum of |terms|
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < n; ++o) {
        double ref = 0, mag = 0;
        for (int64_t c = 0; c < k; ++c) {
          const double x =
              static_cast<double>(fp8_e4m3_to_f32(a.q[static_cast<size_t>(r * k + c)])) * a.scales[static_cast<size_t>(c / 128 * rows + r)];
          const double wv =
              static_cast<double>(fp8_e4m3_to_f32(w[static_cast<size_t>(o * k + c)])) * ws[static_cast<size_t>(o / 128 * ld + c / 128)];
          ref += x * wv;
          mag += std::fabs(x * wv);
        }
        const double g = got[static_cast<size_t>(r * ldo + o)];
        const double tol = 0x1p-9 * mag + (out_bf16 ? 0x1p-8 * std::fabs(ref) : 0.0);
        if (!out_bf16 && mag > 0) worst = std::max(worst, std::fabs(g - ref) / mag);
        if (!(std::fabs(g - ref) <= tol) && ++bad <= 3)
          ADD_FAILURE() << rows << " rows" << (out_bf16 ? ", bf16" : "") << ": (" << r << ", " << o << ") " << g << " for " << ref;
      }
    EXPECT_EQ(bad, 0);
    if (!out_bf16)
      std::printf("[ op ] FP8 GEMM %lld rows: largest error %.3g of the sum of |terms|\n", static_cast<long long>(rows), worst);
    cudaFree(const_cast<uint8_t*>(dq));
    cudaFree(const_cast<float*>(ds));
    cudaFree(out);
  }
  cudaFree(const_cast<uint8_t*>(dw));
  cudaFree(const_cast<float*>(dws));
  cudaFree(workspace);
#else
  GTEST_SKIP() << "no CUDA build";
#endif
}

// With native_weights, products of FP8 weights with many outputs and more rows than decode's run on
// the FP8 tensor cores: against the CPU's fp32 product they are off by the activations' E4M3
// rounding (half a step is 2^-4 of a value: ~2.6% in norm, where the dequantized bf16 product is at
// ~0.3%), for one product and for grouped ones (as wo_a's, through grouped_linear); row counts
// cuBLASLt takes no algorithm for run dequantized, at bf16's error.
TEST_F(CudaOps, Fp8WeightProductsOnTheTensorCores) {
#ifdef DEEPINFER_HAS_CUDA
  auto twin = make_twin(GpuVariant{"native", false, {}, true}, empty_layout(), 2, 4096);
  ASSERT_TRUE(twin) << twin.error().message;
  Twin& n = twin.value();
  // (the values and scales stay alive in these vectors while the weights upload)
  std::vector<std::vector<uint8_t>> bytes;
  auto fp8 = [&](int64_t rows, int64_t cols) {
    auto& v = bytes.emplace_back(static_cast<size_t>(rows * cols));
    for (auto& c : v) c = static_cast<uint8_t>(std::uniform_int_distribution<int>(0, 0x7e)(rng) | (rng() & 1 ? 0x80 : 0));
    auto& sc = bytes.emplace_back(static_cast<size_t>(rows / 128 * cols / 128));
    for (size_t i = 0; i < sc.size(); ++i) sc[i] = static_cast<uint8_t>(116 + i % 5);
    WeightSource w;
    w.name = "fp8";
    w.format = WeightFormat::kFp8Block;
    w.rows = rows;
    w.cols = cols;
    w.values = {DType::kF8E4M3, {rows, cols}, v.data(), v.size()};
    w.scale = {DType::kF8E8M0, {rows / 128, cols / 128}, sc.data(), sc.size()};
    return n.weight(w);
  };
  bytes.reserve(4);
  const int64_t N = 2048, K = 512;
  auto w = fp8(N, K);
  auto wg = fp8(2 * N, K);           // 2 groups of [2048 x 512]
  for (int64_t T : {64, 300, 37}) {  // (37 rows: not a multiple of 4, the dequantized bf16 product)
    const bool fp8_rows = T % 4 == 0;
    ForwardBatch b = rows_batch(static_cast<int32_t>(T));
    n.begin(b);
    auto x = n.tensor(testing::randn(static_cast<size_t>(T * K), rng), T, K);
    auto out = n.zeros(T, N);
    n.cpu->linear(x.c, *w.c, out.c);
    n.gpu->linear(x.g, *w.g, out.g);
    Dev d = n.compare(fmt::format("fp8 linear [{}, {}], {} rows", N, K, T), out, fp8_rows ? 0.04 : kBf16Tol);
    EXPECT_EQ(d.relative > 0.01, fp8_rows) << T << " rows: the activations went through E4M3 exactly when on the FP8 tensor cores";
    auto xg = n.tensor(testing::randn(static_cast<size_t>(T * K * 2), rng), T, K * 2);
    auto outg = n.zeros(T, 2 * N);
    n.cpu->grouped_linear(xg.c, *wg.c, 2, outg.c);
    n.gpu->grouped_linear(xg.g, *wg.g, 2, outg.g);
    d = n.compare(fmt::format("fp8 grouped linear 2 x [{}, {}], {} rows", N, K, T), outg, fp8_rows ? 0.04 : kBf16Tol);
    EXPECT_EQ(d.relative > 0.01, fp8_rows) << T << " rows, grouped";
  }
#else
  GTEST_SKIP() << "no CUDA build";
#endif
}

}  // namespace deepinfer::testing
