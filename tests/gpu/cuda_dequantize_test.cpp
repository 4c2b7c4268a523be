// Weights stored as FP8 with block scales or as MXFP4, dequantized on the device (kernels/dequantize.h,
// the backend's upload), against the CPU's dequantize_to_f32 and f32_to_bf16: value for value (a NaN
// only has to stay a NaN), on odd shapes and the formats' edge cases (every FP8 code, E8M0 scales 0,
// 1, 127, 254 and NaN, zero blocks, float and bf16 block scales). And the products that read the
// stored bytes directly (kernels/native_gemv.h) against products with the host's dequantization.
#include "ops_fixture.h"

#ifdef DEEPINFER_HAS_CUDA
#include "backend/cuda/cuda_common.h"
#include "dequantize.h"
#include "native_gemv.h"
#endif
#include "backend/random_fill.h"
#include "util/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace deepinfer::testing {
namespace {

#ifdef DEEPINFER_HAS_CUDA
// A weight's stored bytes with their shapes, as a checkpoint would hold them.
struct Stored {
  WeightSource w;
  std::vector<uint8_t> values, scale;
  void point() {
    w.values.data = values.data();
    w.values.nbytes = values.size();
    w.scale.data = scale.data();
    w.scale.nbytes = scale.size();
  }
};

// One block scale in its stored type: E8M0 code e, or value as f32 / bf16.
void append_scale(std::vector<uint8_t>& out, DType dtype, uint8_t e, float value) {
  if (dtype == DType::kF8E8M0) {
    out.push_back(e);
  } else if (dtype == DType::kF32) {
    uint8_t b[4];
    std::memcpy(b, &value, 4);
    out.insert(out.end(), b, b + 4);
  } else {
    const uint16_t h = f32_to_bf16(value);
    out.push_back(static_cast<uint8_t>(h));
    out.push_back(static_cast<uint8_t>(h >> 8));
  }
}

// The kernels' view of s's stored bytes copied to the device (values, scale): `rows` rows of it.
kernels::QuantizedWeight device_view(const Stored& s, const void* values, const void* scale, int64_t rows) {
  kernels::QuantizedWeight q;
  q.values = static_cast<const uint8_t*>(values);
  q.scale = scale;
  q.rows = rows;
  q.cols = s.w.cols;
  q.scale_type = s.w.scale.dtype == DType::kF32    ? kernels::ScaleType::kF32
                 : s.w.scale.dtype == DType::kBF16 ? kernels::ScaleType::kBF16
                                                   : kernels::ScaleType::kE8M0;
  if (s.w.format == WeightFormat::kFp8Block) {
    q.block_rows = s.w.block_rows;
    q.block_cols = s.w.block_cols;
    q.scale_cols = s.w.scale.shape[1];
  }
  return q;
}

// Every FP8 code appears (NaN 0x7f / 0xff, both zeros, subnormals, +-448); one block stays all zero.
Stored fp8_weight(int64_t rows, int64_t cols, int block_rows, int block_cols, DType scale_dtype, std::mt19937& rng) {
  Stored s;
  s.w.name = "fp8";
  s.w.format = WeightFormat::kFp8Block;
  s.w.rows = rows;
  s.w.cols = cols;
  s.w.block_rows = block_rows;
  s.w.block_cols = block_cols;
  s.w.values.dtype = DType::kF8E4M3;
  s.w.values.shape = {rows, cols};
  s.values.resize(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < s.values.size(); ++i) s.values[i] = static_cast<uint8_t>(i < 256 ? i : rng());
  for (int64_t r = 0; r < std::min<int64_t>(rows, block_rows); ++r)  // block (0, last) is zero
    for (int64_t c = (cols - 1) / block_cols * block_cols; c < cols; ++c) s.values[static_cast<size_t>(r * cols + c)] = 0;
  const int64_t sr = (rows + block_rows - 1) / block_rows, sc = (cols + block_cols - 1) / block_cols;
  s.w.scale.dtype = scale_dtype;
  s.w.scale.shape = {sr, sc};
  const uint8_t e8m0_edges[] = {127, 0, 1, 254, 255, 120, 133};
  for (int64_t i = 0; i < sr * sc; ++i) {
    const uint8_t e = e8m0_edges[i % 7];
    const float f32 = i % 5 == 4 ? 0.0f : e8m0_to_f32(e) * (1.0f + static_cast<float>(i % 3) / 3.0f);
    append_scale(s.scale, scale_dtype, e, scale_dtype == DType::kF32 ? f32 : e8m0_to_f32(e) * 1.5f);
  }
  s.point();
  return s;
}

Stored mxfp4_weight(int64_t rows, int64_t cols, std::mt19937& rng) {
  Stored s;
  s.w.name = "mxfp4";
  s.w.format = WeightFormat::kMxfp4;
  s.w.rows = rows;
  s.w.cols = cols;
  s.w.values.dtype = DType::kU8;
  s.w.values.shape = {rows, cols / 2};
  s.values.resize(static_cast<size_t>(rows * cols / 2));
  for (size_t i = 0; i < s.values.size(); ++i) s.values[i] = static_cast<uint8_t>(i < 256 ? i : rng());
  s.w.scale.dtype = DType::kF8E8M0;
  s.w.scale.shape = {rows, cols / 32};
  const uint8_t edges[] = {127, 0, 1, 254, 255, 126, 130};
  for (int64_t i = 0; i < rows * cols / 32; ++i) s.scale.push_back(edges[i % 7]);
  s.point();
  return s;
}

bool bf16_nan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

uint32_t f32_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Counts the values of b16 / f32 (either may be empty) that differ from the host's dequantization.
int differences(const WeightSource& w, const std::vector<uint16_t>& b16, const std::vector<float>& f32, const std::string& what) {
  std::vector<float> ref(static_cast<size_t>(w.numel()));
  dequantize_to_f32(w, ref.data());
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!f32.empty()) {
      const bool same = std::isnan(ref[i]) ? std::isnan(f32[i]) : f32_to_bits(ref[i]) == f32_to_bits(f32[i]);
      if (!same && ++bad <= 3) ADD_FAILURE() << what << " f32[" << i << "]: device " << f32[i] << ", host " << ref[i];
    }
    if (!b16.empty()) {
      const uint16_t h = f32_to_bf16(ref[i]);
      const bool same = bf16_nan(h) ? bf16_nan(b16[i]) : h == b16[i];
      if (!same && ++bad <= 3) ADD_FAILURE() << what << " bf16[" << i << "]: device " << b16[i] << ", host " << h;
    }
  }
  return bad;
}

// The kernel alone: both outputs at once.
void check_kernel(const Stored& s, const std::string& what) {
  const size_t n = static_cast<size_t>(s.w.numel());
  uint8_t *values = nullptr, *scale = nullptr;
  uint16_t* b16 = nullptr;
  float* f32 = nullptr;
  ASSERT_EQ(cudaMalloc(&values, s.values.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&scale, s.scale.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b16, n * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&f32, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(values, s.values.data(), s.values.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(scale, s.scale.data(), s.scale.size(), cudaMemcpyHostToDevice), cudaSuccess);
  const kernels::QuantizedWeight q = device_view(s, values, scale, s.w.rows);
  const cudaError_t e = s.w.format == WeightFormat::kFp8Block ? kernels::dequantize_fp8_block(q, b16, f32, kernels::Stream{nullptr, false})
                                                              : kernels::dequantize_mxfp4(q, b16, f32, kernels::Stream{nullptr, false});
  ASSERT_EQ(e, cudaSuccess) << what;
  std::vector<uint16_t> hb(n);
  std::vector<float> hf(n);
  ASSERT_EQ(cudaMemcpy(hb.data(), b16, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(hf.data(), f32, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(values);
  cudaFree(scale);
  cudaFree(b16);
  cudaFree(f32);
  EXPECT_EQ(differences(s.w, hb, hf, what), 0) << what;
}

// For the products: FP8 values without NaN codes except one (row 1, column 3), scales cycling through
// `scales` (E8M0 codes; F32 / BF16: their values times 1.5) with NaN (0xff) only in the last block of
// a weight of three or more block rows, and one zero block. (Scale 254, 2^127, times most values
// overflows fp32 in the host's dequantization: products of such weights are not compared.)
Stored product_fp8_weight(int64_t rows, int64_t cols, int block_rows, int block_cols, DType scale_dtype, std::vector<uint8_t> scales,
                          std::mt19937& rng) {
  Stored s = fp8_weight(rows, cols, block_rows, block_cols, scale_dtype, rng);
  for (uint8_t& v : s.values)
    if ((v & 0x7f) == 0x7f) v ^= 0x01;
  if (rows > 1 && cols > 3) s.values[static_cast<size_t>(cols + 3)] = 0x7f;
  const int64_t sr = s.w.scale.shape[0], sc = s.w.scale.shape[1];
  s.scale.clear();
  for (int64_t i = 0; i < sr * sc; ++i) {
    const uint8_t e = sr >= 3 && i == sr * sc - 1 ? 0xff : scales[static_cast<size_t>(i) % scales.size()];
    append_scale(s.scale, scale_dtype, e, e8m0_to_f32(e) * 1.5f);
  }
  s.point();
  return s;
}

// MXFP4 with scales cycling through `scales`, NaN (0xff) in one group of row 2, and one zero group.
Stored product_mxfp4_weight(int64_t rows, int64_t cols, std::vector<uint8_t> scales, std::mt19937& rng) {
  Stored s = mxfp4_weight(rows, cols, rng);
  const int64_t groups = cols / 32;
  for (int64_t i = 0; i < rows * groups; ++i) s.scale[static_cast<size_t>(i)] = scales[static_cast<size_t>(i) % scales.size()];
  if (rows > 2) s.scale[static_cast<size_t>(2 * groups)] = 0xff;
  for (int64_t c = 0; c < 16; ++c) s.values[static_cast<size_t>(c)] = 0;  // row 0's first group
  s.point();
  return s;
}

// native_gemv over `rows` activation rows against double-precision products with the host's
// dequantized weight: NaN where the weight row holds a NaN, else within 1e-5 of the sum of |x w| when
// the activations are bf16 values (the kernel rounds them to bf16; the weights' values are exact),
// within 2^-9 of it more (that rounding) when they are any floats; plus 2^-126 per column (the tensor
// cores may flush partial sums below fp32's normal range: the tiny scales' products).
void check_product(const Stored& s, int rows, std::mt19937& rng, const std::string& what, bool x_in_bf16 = true) {
  const int64_t n = s.w.rows, k = s.w.cols, ldx = k + 4, ldo = n + 3;
  std::vector<float> w(static_cast<size_t>(n * k));
  dequantize_to_f32(s.w, w.data());
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * ldx), 0.0f);
  for (float& v : x) v = x_in_bf16 ? bf16_to_f32(f32_to_bf16(uni(rng))) : uni(rng);
  const double tolerance = x_in_bf16 ? 1e-5 : 1e-5 + 0x1p-9;
  uint8_t *values = nullptr, *scale = nullptr;
  float *dx = nullptr, *dout = nullptr;
  ASSERT_EQ(cudaMalloc(&values, s.values.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&scale, s.scale.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, static_cast<size_t>(rows * ldo) * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(values, s.values.data(), s.values.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(scale, s.scale.data(), s.scale.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  kernels::QuantizedWeight q = device_view(s, values, scale, n);
  const bool fp8 = s.w.format == WeightFormat::kFp8Block;
  if (fp8)
    q.nan_free = std::none_of(s.values.begin(), s.values.end(), [](uint8_t v) { return (v & 0x7f) == 0x7f; });  // (the faster kernel)
  const auto format = fp8 ? kernels::StoredFormat::kFp8Block : kernels::StoredFormat::kMxfp4;
  ASSERT_TRUE(kernels::native_gemv_supported(q, format, dx, ldx)) << what;
  ASSERT_EQ(kernels::native_gemv(dx, rows, ldx, q, format, dout, ldo, kernels::Stream{nullptr, false}), cudaSuccess) << what;
  std::vector<float> out(static_cast<size_t>(rows * ldo));
  ASSERT_EQ(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(values);
  cudaFree(scale);
  cudaFree(dx);
  cudaFree(dout);
  int bad = 0, nans = 0;
  for (int r = 0; r < rows; ++r)
    for (int64_t o = 0; o < n; ++o) {
      double ref = 0.0, mag = 0.0;
      bool nan = false;
      for (int64_t c = 0; c < k; ++c) {
        const double wv = w[static_cast<size_t>(o * k + c)], xv = x[static_cast<size_t>(r * ldx + c)];
        nan |= std::isnan(wv);
        ref += xv * wv;
        mag += std::fabs(xv * wv);
      }
      const float got = out[static_cast<size_t>(r * ldo + o)];
      nans += nan;
      const bool same = nan ? std::isnan(got) : std::fabs(got - ref) <= tolerance * mag + static_cast<double>(k) * 0x1p-126;
      if (!same && ++bad <= 3) ADD_FAILURE() << what << " row " << r << " output " << o << ": device " << got << ", host " << ref;
    }
  EXPECT_EQ(bad, 0) << what;
  if (n > 2) {
    EXPECT_GT(nans, 0) << what << ": the NaN cases are exercised";
  }
}
#endif

}  // namespace

TEST_F(CudaOps, NativeProductsMatchTheHostsDequantization) {
#ifdef DEEPINFER_HAS_CUDA
  struct Fp8Case {
    int64_t rows, cols;
    int block_rows, block_cols;
    DType scale;
    std::vector<uint8_t> scales;
  };
  const std::vector<uint8_t> spread = {127, 0, 1, 120, 133, 140}, tiny = {0, 1, 2};
  const Fp8Case fp8_cases[] = {
      {37, 272, 128, 128, DType::kF8E8M0, spread},   {300, 4096, 128, 128, DType::kF8E8M0, spread},
      {130, 160, 1, 128, DType::kF32, spread},       {17, 320, 16, 64, DType::kBF16, spread},
      {8, 256, 128, 128, DType::kF8E8M0, tiny},      {1, 16, 128, 128, DType::kF8E8M0, spread},
      {8464, 128, 128, 128, DType::kF8E8M0, spread},  // (enough outputs for the kernel's two-tile shape)
  };
  for (const Fp8Case& c : fp8_cases)
    for (int rows = 1; rows <= kernels::kNativeGemvMaxRows; ++rows)
      check_product(product_fp8_weight(c.rows, c.cols, c.block_rows, c.block_cols, c.scale, c.scales, rng), rows, rng,
                    fmt::format("fp8 [{}, {}] blocks {}x{} scale {}, {} rows", c.rows, c.cols, c.block_rows, c.block_cols,
                                dtype_name(c.scale), rows));
  const std::vector<uint8_t> fp4_spread = {127, 0, 1, 126, 130, 150};
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 32}, {5, 96}, {33, 4096}, {257, 64}, {64, 2048}, {8500, 64}})
    for (int rows = 1; rows <= kernels::kNativeGemvMaxRows; ++rows)
      check_product(product_mxfp4_weight(n, k, n == 64 ? tiny : fp4_spread, rng), rows, rng,
                    fmt::format("mxfp4 [{}, {}], {} rows", n, k, rows));
  // Without NaN codes (as checkpoints are): the kernel that does not test for them.
  Stored clean = product_fp8_weight(300, 4096, 128, 128, DType::kF8E8M0, spread, rng);
  clean.values[4096 + 3] = 0x7e;
  clean.point();
  for (int rows = 1; rows <= kernels::kNativeGemvMaxRows; ++rows)
    check_product(clean, rows, rng, fmt::format("fp8 [300, 4096] without NaN, {} rows", rows));
  // Activations that are not bf16 values: off by their rounding only.
  check_product(product_fp8_weight(64, 4096, 128, 128, DType::kF8E8M0, spread, rng), 3, rng, "fp8 [64, 4096], any floats", false);
  check_product(product_mxfp4_weight(64, 4096, fp4_spread, rng), 5, rng, "mxfp4 [64, 4096], any floats", false);

  // What the kernels refuse: more rows than they take, columns that are not whole chunks.
  kernels::QuantizedWeight q;
  q.values = reinterpret_cast<const uint8_t*>(16);
  q.scale = q.values;
  q.rows = 4;
  q.cols = 200;
  q.scale_cols = 2;
  const auto* x = reinterpret_cast<const float*>(16);
  EXPECT_FALSE(kernels::native_gemv_supported(q, kernels::StoredFormat::kFp8Block, x, 200));
  EXPECT_EQ(kernels::native_gemv(x, 1, 200, q, kernels::StoredFormat::kFp8Block, nullptr, 4, kernels::Stream{nullptr, false}),
            cudaErrorInvalidValue);
  q.cols = 48;
  EXPECT_TRUE(kernels::native_gemv_supported(q, kernels::StoredFormat::kFp8Block, x, 48));
  EXPECT_FALSE(kernels::native_gemv_supported(q, kernels::StoredFormat::kMxfp4, x, 48));
  EXPECT_EQ(kernels::native_gemv(x, kernels::kNativeGemvMaxRows + 1, 48, q, kernels::StoredFormat::kFp8Block, reinterpret_cast<float*>(16),
                                 4, kernels::Stream{nullptr, false}),
            cudaErrorInvalidValue);
#else
  GTEST_SKIP() << "no CUDA build";
#endif
}

#ifdef DEEPINFER_HAS_CUDA
namespace {

// native_expert_gemv over a stack of experts: each pair's output against the host's product with
// its expert (x rounded to bf16, as the kernel does), zeros for ids outside the stack.
void check_expert_products(const std::vector<Stored>& experts, const std::vector<int32_t>& ids, int k, std::mt19937& rng,
                           const std::string& what) {
  const Stored& first = experts[0];
  const int64_t n = first.w.rows, cols = first.w.cols, pairs = static_cast<int64_t>(ids.size()), ldx = cols + 4, ldo = n + 1;
  const int64_t x_rows = (pairs + k - 1) / k;
  std::vector<uint8_t> values, scales;
  for (const Stored& e : experts) {
    values.insert(values.end(), e.values.begin(), e.values.end());
    scales.insert(scales.end(), e.scale.begin(), e.scale.end());
  }
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(x_rows * ldx));
  for (float& v : x) v = bf16_to_f32(f32_to_bf16(uni(rng)));
  uint8_t *dv = nullptr, *ds = nullptr;
  float *dx = nullptr, *dout = nullptr;
  int32_t* dids = nullptr;
  ASSERT_EQ(cudaMalloc(&dv, values.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ds, scales.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dids, ids.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, static_cast<size_t>(pairs * ldo) * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv, values.data(), values.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ds, scales.data(), scales.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dout, 0x7f, static_cast<size_t>(pairs * ldo) * 4), cudaSuccess);  // (every output is written)
  const kernels::QuantizedWeight q = device_view(first, dv, ds, n);
  const bool fp8 = first.w.format == WeightFormat::kFp8Block;
  const auto format = fp8 ? kernels::StoredFormat::kFp8Block : kernels::StoredFormat::kMxfp4;
  ASSERT_EQ(kernels::native_expert_gemv(dx, ldx, dids, pairs, k, q, static_cast<int64_t>(experts.size()), format, dout, ldo,
                                        kernels::Stream{nullptr, false}),
            cudaSuccess)
      << what;
  std::vector<float> out(static_cast<size_t>(pairs * ldo));
  ASSERT_EQ(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (void* p :
       {static_cast<void*>(dv), static_cast<void*>(ds), static_cast<void*>(dx), static_cast<void*>(dout), static_cast<void*>(dids)})
    cudaFree(p);
  std::vector<std::vector<float>> w(experts.size());
  for (size_t e = 0; e < experts.size(); ++e) {
    w[e].resize(static_cast<size_t>(n * cols));
    dequantize_to_f32(experts[e].w, w[e].data());
  }
  int bad = 0;
  for (int64_t p = 0; p < pairs; ++p) {
    const int32_t e = ids[static_cast<size_t>(p)];
    const bool valid = e >= 0 && e < static_cast<int32_t>(experts.size());
    for (int64_t o = 0; o < n; ++o) {
      double ref = 0.0, mag = 0.0;
      bool nan = false;
      for (int64_t c = 0; valid && c < cols; ++c) {
        const double wv = w[static_cast<size_t>(e)][static_cast<size_t>(o * cols + c)], xv = x[static_cast<size_t>(p / k * ldx + c)];
        nan |= std::isnan(wv);
        ref += xv * wv;
        mag += std::fabs(xv * wv);
      }
      const float got = out[static_cast<size_t>(p * ldo + o)];
      const bool same = nan ? std::isnan(got) : std::fabs(got - ref) <= 1e-5 * mag + static_cast<double>(cols) * 0x1p-126;
      if (!same && ++bad <= 3)
        ADD_FAILURE() << what << " pair " << p << " (expert " << e << ") output " << o << ": device " << got << ", host " << ref;
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

// native_grouped_gemv: `all` holds the groups' matrices one after the other (groups x n rows); x has
// groups x cols columns per row (group i reads its own), out groups x n per row.
void check_grouped_products(const Stored& all, int groups, int rows, std::mt19937& rng, const std::string& what) {
  const int64_t n = all.w.rows / groups, cols = all.w.cols, ldx = groups * cols + 4, ldo = groups * n + 3;
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * ldx));
  for (float& v : x) v = bf16_to_f32(f32_to_bf16(uni(rng)));
  uint8_t *dv = nullptr, *ds = nullptr;
  float *dx = nullptr, *dout = nullptr;
  ASSERT_EQ(cudaMalloc(&dv, all.values.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ds, all.scale.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, static_cast<size_t>(rows * ldo) * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv, all.values.data(), all.values.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ds, all.scale.data(), all.scale.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dout, 0, static_cast<size_t>(rows * ldo) * 4), cudaSuccess);
  const kernels::QuantizedWeight q = device_view(all, dv, ds, n);  // (one group's matrix)
  const bool fp8 = all.w.format == WeightFormat::kFp8Block;
  const auto format = fp8 ? kernels::StoredFormat::kFp8Block : kernels::StoredFormat::kMxfp4;
  ASSERT_EQ(kernels::native_grouped_gemv(dx, rows, ldx, groups, q, format, dout, ldo, kernels::Stream{nullptr, false}), cudaSuccess)
      << what;
  std::vector<float> out(static_cast<size_t>(rows * ldo));
  ASSERT_EQ(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (void* p : {static_cast<void*>(dv), static_cast<void*>(ds), static_cast<void*>(dx), static_cast<void*>(dout)}) cudaFree(p);
  std::vector<float> w(static_cast<size_t>(all.w.numel()));
  dequantize_to_f32(all.w, w.data());
  int bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < groups * n; ++o) {
      const int64_t i = o / n;
      double ref = 0.0, mag = 0.0;
      bool nan = false;
      for (int64_t c = 0; c < cols; ++c) {
        const double wv = w[static_cast<size_t>(o * cols + c)];
        const double v = static_cast<double>(x[static_cast<size_t>(r * ldx + i * cols + c)]) * wv;
        nan |= std::isnan(wv);
        ref += v;
        mag += std::fabs(v);
      }
      const float got = out[static_cast<size_t>(r * ldo + o)];
      const bool same = nan ? std::isnan(got) : std::fabs(got - ref) <= 1e-5 * mag + static_cast<double>(cols) * 0x1p-126;
      if (!same && ++bad <= 3) ADD_FAILURE() << what << " row " << r << " output " << o << ": device " << got << ", host " << ref;
    }
  EXPECT_EQ(bad, 0) << what;
}

}  // namespace
#endif

TEST_F(CudaOps, NativeExpertProductsMatchTheHost) {
#ifdef DEEPINFER_HAS_CUDA
  const std::vector<uint8_t> fp4_spread = {127, 0, 1, 126, 130, 150}, spread = {127, 0, 1, 120, 133, 140};
  std::vector<Stored> fp4;
  for (int e = 0; e < 5; ++e) fp4.push_back(product_mxfp4_weight(96, 128, fp4_spread, rng));
  // 3 rows x top-2 (a repeated expert, ids outside the stack); then the down products' form (k = 1).
  check_expert_products(fp4, {4, 0, 2, 2, -1, 5}, 2, rng, "mxfp4 5 x [96, 128], k 2");
  check_expert_products(fp4, {1, 3, 0, 4, 2, 1, 0}, 1, rng, "mxfp4 5 x [96, 128], k 1");
  std::vector<Stored> big;
  for (int e = 0; e < 3; ++e) big.push_back(product_mxfp4_weight(2048, 256, fp4_spread, rng));
  check_expert_products(big, {2, 0, 1, 1, 0, 2, 2, 1}, 4, rng, "mxfp4 3 x [2048, 256], k 4");
  // Few pairs for the experts: a block per pair (the cases above: a block per expert).
  check_expert_products(fp4, {3, -1}, 2, rng, "mxfp4 5 x [96, 128], k 2, per pair");
  // By expert with more than 8 pairs of one expert (several rounds) and more than 32 pairs (the scan
  // crosses its 32-pair windows).
  std::vector<int32_t> many;
  for (int i = 0; i < 70; ++i) many.push_back(i % 3 == 0 ? 1 : i % 7 == 0 ? -2 : i % 5 == 0 ? 0 : 2);
  check_expert_products(big, many, 5, rng, "mxfp4 3 x [2048, 256], k 5, 70 pairs");
  std::vector<Stored> fp8;
  for (int e = 0; e < 3; ++e) fp8.push_back(product_fp8_weight(200, 256, 128, 128, DType::kF8E8M0, spread, rng));
  check_expert_products(fp8, {2, 1, 0, 7}, 2, rng, "fp8 3 x [200, 256] (blocks 128 x 128), k 2");
  // Groups (wo_a's form): 8 x [128, 256] FP8 with 128 x 128 blocks, 1 and 3 rows; 3 x [40, 64] MXFP4.
  const Stored groups_fp8 = product_fp8_weight(8 * 128, 256, 128, 128, DType::kF8E8M0, spread, rng);
  check_grouped_products(groups_fp8, 8, 1, rng, "fp8 8 groups of [128, 256], 1 row");
  check_grouped_products(groups_fp8, 8, 3, rng, "fp8 8 groups of [128, 256], 3 rows");
  check_grouped_products(product_mxfp4_weight(3 * 40, 64, fp4_spread, rng), 3, 2, rng, "mxfp4 3 groups of [40, 64], 2 rows");
#else
  GTEST_SKIP() << "no CUDA build";
#endif
}

// native_weights with random weights (deepinfer bench --dummy-weights): FP8 matrices and MXFP4 stacks
// made on the device in the released formats hold the random values quantized (E4M3: 3 mantissa bits
// below the one power-of-two scale; E2M1: at most one scale step off, half of the widest gap).
TEST_F(CudaOps, RandomWeightsInTheReleasedFormats) {
#ifdef DEEPINFER_HAS_CUDA
  BackendOptions options;
  options.native_weights = true;
  auto be = testing::gpu_backend(false, {}, options);
  ASSERT_TRUE(be) << be.error().message;
  struct Case {
    int64_t count, rows, cols;
    WeightFormat format;
    float stddev;
  };
  for (const Case& c : {Case{1, 300, 256, WeightFormat::kFp8Block, 0.05f}, Case{3, 64, 128, WeightFormat::kMxfp4, 0.1f},
                        Case{1, 40, 64, WeightFormat::kPlain, 0.1f}}) {
    auto w = be.value()->random_weight(c.count, c.rows, c.cols, 0.0f, c.stddev, 99, c.format);
    ASSERT_TRUE(w) << w.error().message;
    const CudaWeight& d = cw(*w.value());
    const int64_t n = c.count * c.rows * c.cols;
    std::vector<float> got(static_cast<size_t>(n));
    if (c.format == WeightFormat::kPlain) {  // (as before: bf16)
      ASSERT_NE(d.b16, nullptr);
      ASSERT_EQ(d.stored_values, nullptr);
      std::vector<uint16_t> hb(static_cast<size_t>(n));
      ASSERT_EQ(cudaMemcpy(hb.data(), d.b16, hb.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t i = 0; i < hb.size(); ++i) got[i] = bf16_to_f32(hb[i]);
    } else {
      ASSERT_NE(d.stored_values, nullptr);
      ASSERT_EQ(d.b16, nullptr);
      float* f = nullptr;
      ASSERT_EQ(cudaMalloc(&f, got.size() * 4), cudaSuccess);
      kernels::QuantizedWeight all = d.stored;
      all.rows *= c.count;
      const cudaError_t e = c.format == WeightFormat::kMxfp4
                                ? kernels::dequantize_mxfp4(all, nullptr, f, kernels::Stream{nullptr, false})
                                : kernels::dequantize_fp8_block(all, nullptr, f, kernels::Stream{nullptr, false});
      ASSERT_EQ(e, cudaSuccess);
      ASSERT_EQ(cudaMemcpy(got.data(), f, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      cudaFree(f);
    }
    const float amax = 1.7320508f * c.stddev;
    const float scale =
        c.format == WeightFormat::kMxfp4 ? std::exp2(std::ceil(std::log2(amax / 6.0f))) : std::exp2(std::ceil(std::log2(amax / 448.0f)));
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = random_value(99, static_cast<uint64_t>(i), 0.0f, c.stddev), g = got[static_cast<size_t>(i)];
      const float tol = c.format == WeightFormat::kMxfp4      ? scale
                        : c.format == WeightFormat::kFp8Block ? std::fabs(v) * 0x1p-4f + scale * 0x1p-9f
                                                              : std::fabs(v) * 0x1p-8f;
      if (!(std::fabs(g - v) <= tol) && ++bad <= 3)
        ADD_FAILURE() << "format " << static_cast<int>(c.format) << " element " << i << ": " << g << " for " << v;
    }
    EXPECT_EQ(bad, 0);
  }
#else
  GTEST_SKIP() << "no CUDA build";
#endif
}

TEST_F(CudaOps, DequantizeKernelsMatchTheHost) {
#ifdef DEEPINFER_HAS_CUDA
  struct Fp8Case {
    int64_t rows, cols;
    int block_rows, block_cols;
    DType scale;
  };
  const Fp8Case fp8_cases[] = {
      {1, 1, 128, 128, DType::kF8E8M0},     {3, 200, 128, 128, DType::kF8E8M0}, {130, 257, 128, 128, DType::kF8E8M0},
      {300, 130, 128, 128, DType::kF32},    {129, 64, 1, 128, DType::kF32},     {17, 300, 16, 64, DType::kBF16},
      {256, 512, 128, 128, DType::kF8E8M0},
  };
  for (const Fp8Case& c : fp8_cases) {
    check_kernel(fp8_weight(c.rows, c.cols, c.block_rows, c.block_cols, c.scale, rng),
                 fmt::format("fp8 [{}, {}] blocks {}x{} scale {}", c.rows, c.cols, c.block_rows, c.block_cols, dtype_name(c.scale)));
  }
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 32}, {5, 96}, {33, 4096}, {257, 64}}) {
    check_kernel(mxfp4_weight(rows, cols, rng), fmt::format("mxfp4 [{}, {}]", rows, cols));
  }
#else
  GTEST_SKIP() << "no CUDA build";
#endif
}

TEST_F(CudaOps, UploadsOfStoredFormatsMatchTheHost) {
#ifdef DEEPINFER_HAS_CUDA
  // Through the backend: a large matrix keeps bf16 only, a small one fp32 too; a stack of experts
  // crosses the staging buffers' chunks.
  Stored big = fp8_weight(1100, 1000, 128, 128, DType::kF8E8M0, rng);  // > kSmallMatrix: bf16 only
  Stored small = fp8_weight(130, 257, 128, 128, DType::kF32, rng);
  for (Stored* s : {&big, &small}) {
    auto up = t.gpu->upload(s->w);
    ASSERT_TRUE(up) << up.error().message;
    const CudaWeight& d = cw(*up.value());
    const size_t n = static_cast<size_t>(s->w.numel());
    std::vector<uint16_t> hb(n);
    std::vector<float> hf;
    ASSERT_NE(d.b16, nullptr);
    ASSERT_EQ(cudaMemcpy(hb.data(), d.b16, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    if (d.f32) {
      hf.resize(n);
      ASSERT_EQ(cudaMemcpy(hf.data(), d.f32, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    }
    EXPECT_EQ(s == &small, d.f32 != nullptr);
    EXPECT_EQ(differences(s->w, hb, hf, s->w.name), 0);
  }
  std::vector<Stored> experts;
  for (int e = 0; e < 9; ++e) experts.push_back(mxfp4_weight(1024, 4096, rng));  // 2 MB stored, 8 MB bf16 each
  std::vector<WeightSource> ws;
  for (Stored& s : experts) {
    s.point();
    ws.push_back(s.w);
  }
  auto up = t.gpu->upload_stacked(ws);
  ASSERT_TRUE(up) << up.error().message;
  const CudaWeight& d = cw(*up.value());
  const size_t each = static_cast<size_t>(ws[0].numel());
  std::vector<uint16_t> hb(each * ws.size());
  ASSERT_EQ(cudaMemcpy(hb.data(), d.b16, hb.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t e = 0; e < ws.size(); ++e) {
    std::vector<uint16_t> one(hb.begin() + static_cast<ptrdiff_t>(e * each), hb.begin() + static_cast<ptrdiff_t>((e + 1) * each));
    EXPECT_EQ(differences(ws[e], one, {}, fmt::format("expert {}", e)), 0);
  }
#else
  GTEST_SKIP() << "no CUDA build";
#endif
}

}  // namespace deepinfer::testing
