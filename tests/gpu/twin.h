// Test helpers: the CPU reference and the CUDA backend side by side, fed the same inputs.
#pragma once

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace deepinfer::testing {

// The CUDA backend linked into the test (not the run-time module): kUnsupported without a GPU or
// in a build without CUDA. `features` off run the kernels an older device takes.
inline Result<std::unique_ptr<Backend>> gpu_backend(bool fp32_weights = false, const CudaFeatures& features = {},
                                                   BackendOptions options = {}) {
#ifdef DEEPINFER_HAS_CUDA
  options.fp32_weights = fp32_weights;
  return create_cuda_backend(options, features);
#else
  (void)fp32_weights, (void)features, (void)options;
  return make_error(Code::kUnsupported, "this build has no CUDA backend");
#endif
}

// The configurations whose kernels differ: the default (bf16 weights, every feature of the device),
// bf16 without Hopper's wgmma kernels (what a GPU other than sm_90a runs), and the fp32 reference mode.
struct GpuVariant {
  const char* name;
  bool fp32_weights;
  CudaFeatures features;
  bool native_weights = false;  // the native_weights option (MXFP4 / FP8 sources kept as stored)
};
inline void PrintTo(const GpuVariant& v, std::ostream* os) { *os << v.name; }
inline std::vector<GpuVariant> gpu_variants() {
  return {{"bf16", false, {}}, {"bf16 without wgmma", false, CudaFeatures{false}}, {"fp32", true, {}}};
}

// Skips the test (GTEST_SKIP) when no GPU / no CUDA build; fails it when the device fails to start.
#define DI_REQUIRE_GPU(var)                                                                        \
  auto var##_result = ::deepinfer::testing::gpu_backend();                                                            \
  if (!var##_result) {                                                                             \
    if (var##_result.error().code == Code::kUnsupported) GTEST_SKIP() << var##_result.error().message; \
    FAIL() << var##_result.error().message;                                                        \
  }                                                                                                \
  std::unique_ptr<Backend> var = std::move(var##_result.value())

struct Dev {
  double relative = 0;  // ||a - ref|| / ||ref||
  double max_abs = 0;
  double ref_max = 0;
  bool finite = true;
};

inline Dev deviation_of(const std::vector<float>& a, const std::vector<float>& ref) {
  Dev d;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size() && i < a.size(); ++i) {
    if (!std::isfinite(a[i])) d.finite = false;
    const double e = static_cast<double>(a[i]) - ref[i];
    num += e * e;
    den += static_cast<double>(ref[i]) * ref[i];
    d.max_abs = std::max(d.max_abs, std::abs(e));
    d.ref_max = std::max(d.ref_max, std::abs(static_cast<double>(ref[i])));
  }
  d.relative = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return d;
}

inline void print_deviation(const std::string& what, const Dev& d) {
  std::printf("[ op ] %-52s max_abs %.3g  rel %.3g  (|ref| max %.3g)%s\n", what.c_str(), d.max_abs, d.relative, d.ref_max,
              d.finite ? "" : "  NON-FINITE");
}

inline std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

inline WeightSource f32_source(const std::vector<float>& v, int64_t rows, int64_t cols, const std::string& name = "w") {
  WeightSource w;
  w.name = name;
  w.rows = rows;
  w.cols = cols;
  w.values.dtype = DType::kF32;
  w.values.shape = {rows, cols};
  w.values.data = reinterpret_cast<const uint8_t*>(v.data());
  w.values.nbytes = v.size() * sizeof(float);
  return w;
}

// The same tensors and weights on both backends.
struct Twin {
  std::unique_ptr<Backend> cpu, gpu;

  struct T2 {
    Tensor c, g;
  };
  struct I2 {
    IntTensor c, g;
  };
  struct W2 {
    std::unique_ptr<DeviceWeight> c, g;
  };

  T2 tensor(const std::vector<float>& v, int64_t rows, int64_t cols) {
    T2 t{cpu->scratch(rows, cols), gpu->scratch(rows, cols)};
    EXPECT_EQ(v.size(), static_cast<size_t>(rows * cols));
    EXPECT_TRUE(cpu->write(t.c, v.data()));
    auto r = gpu->write(t.g, v.data());
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return t;
  }
  T2 zeros(int64_t rows, int64_t cols) { return T2{cpu->scratch(rows, cols), gpu->scratch(rows, cols)}; }
  I2 ints(const std::vector<int32_t>& v, int64_t rows, int64_t cols) {
    I2 t{cpu->scratch_int(rows, cols), gpu->scratch_int(rows, cols)};
    EXPECT_TRUE(cpu->write_ints(t.c, v.data()));
    auto r = gpu->write_ints(t.g, v.data());
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return t;
  }
  I2 int_zeros(int64_t rows, int64_t cols) { return I2{cpu->scratch_int(rows, cols), gpu->scratch_int(rows, cols)}; }

  W2 weight(const WeightSource& w) {
    auto c = cpu->upload(w);
    auto g = gpu->upload(w);
    EXPECT_TRUE(c && g) << (g ? "" : g.error().message);
    return W2{c ? std::move(c.value()) : nullptr, g ? std::move(g.value()) : nullptr};
  }
  W2 floats(const std::vector<float>& v, int64_t rows, int64_t cols) { return weight(f32_source(v, rows, cols)); }
  W2 stacked(const std::vector<WeightSource>& ws) {
    auto c = cpu->upload_stacked(ws);
    auto g = gpu->upload_stacked(ws);
    EXPECT_TRUE(c && g) << (g ? "" : g.error().message);
    return W2{c ? std::move(c.value()) : nullptr, g ? std::move(g.value()) : nullptr};
  }
  W2 int_table(const std::vector<int32_t>& v, int64_t rows, int64_t cols) {
    auto c = cpu->upload_ints(v, rows, cols);
    auto g = gpu->upload_ints(v, rows, cols);
    EXPECT_TRUE(c && g);
    return W2{c ? std::move(c.value()) : nullptr, g ? std::move(g.value()) : nullptr};
  }

  void allocate(const StateLayout& layout, int slots, int blocks) {
    ASSERT_TRUE(cpu->allocate_state(layout, slots, blocks));
    auto r = gpu->allocate_state(layout, slots, blocks);
    ASSERT_TRUE(r) << r.error().message;
  }
  void begin(const ForwardBatch& b) {
    ASSERT_TRUE(cpu->begin_forward(b));
    auto r = gpu->begin_forward(b);
    ASSERT_TRUE(r) << r.error().message;
  }

  std::vector<float> read_cpu(Tensor t) {
    std::vector<float> v(static_cast<size_t>(t.rows * t.cols));
    EXPECT_TRUE(cpu->read(t, v.data()));
    return v;
  }
  std::vector<float> read_gpu(Tensor t) {
    std::vector<float> v(static_cast<size_t>(t.rows * t.cols), NAN);
    auto r = gpu->read(t, v.data());
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return v;
  }
  std::vector<int32_t> read_ints_cpu(IntTensor t) {
    std::vector<int32_t> v(static_cast<size_t>(t.rows * t.cols));
    EXPECT_TRUE(cpu->read_ints(t, v.data()));
    return v;
  }
  std::vector<int32_t> read_ints_gpu(IntTensor t) {
    std::vector<int32_t> v(static_cast<size_t>(t.rows * t.cols), -7);
    auto r = gpu->read_ints(t, v.data());
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return v;
  }

  // Prints and checks GPU vs CPU for one tensor.
  Dev compare(const std::string& what, T2 t, double rel_tol) {
    Dev d = deviation_of(read_gpu(t.g), read_cpu(t.c));
    print_deviation(what, d);
    EXPECT_TRUE(d.finite) << what;
    EXPECT_LE(d.relative, rel_tol) << what;
    return d;
  }
};

// The CPU backend and a GPU backend of variant v, each with state storage for `layout` (slots,
// blocks). kUnsupported where no GPU is present.
inline Result<Twin> make_twin(const GpuVariant& v, const StateLayout& layout, int slots, int blocks) {
  BackendOptions options;
  options.native_weights = v.native_weights;
  DI_TRY(gpu, gpu_backend(v.fp32_weights, v.features, options));
  Twin t;
  t.gpu = std::move(gpu);
  t.cpu = make_cpu_backend(2).value();
  DI_TRYV(t.cpu->allocate_state(layout, slots, blocks));
  DI_TRYV(t.gpu->allocate_state(layout, slots, blocks));
  return t;
}

// A batch of sequences (slot, n_past, n) with block tables; tokens are i % vocab.
struct SeqSpec {
  int32_t slot, n_past, n;
  std::vector<int32_t> blocks;
  ForwardBatch::Logits logits = ForwardBatch::Logits::kAll;
};

inline ForwardBatch make_batch(const std::vector<SeqSpec>& specs, int32_t vocab = 1000) {
  ForwardBatch b;
  for (const SeqSpec& s : specs) {
    std::vector<int32_t> ids(static_cast<size_t>(s.n));
    for (int32_t i = 0; i < s.n; ++i) ids[i] = (s.n_past + i * 7 + s.slot * 13) % vocab;
    b.add_sequence(s.slot, s.n_past, ids.data(), s.n, s.blocks, s.logits);
  }
  return b;
}

}  // namespace deepinfer::testing
