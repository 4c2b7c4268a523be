// The CPU backend's products are batch-invariant: a row's output is bitwise the same computed alone,
// at any position of a batch of any size, and with any number of threads (a sequence's logits, hence
// seeded sampling, must not depend on the sequences sharing its step). And they are accurate.
#include "backend/backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace deepinfer {
namespace {

constexpr int64_t kRows = 40;  // distinct input rows; batches take 1..kRows of them

struct Shape {
  int64_t n, k;
};

// Shapes with k below, at and off the 8-lane width, n off every tile and column block, and both ways
// the backend splits a product over threads (columns when wide, rows when narrow and long).
const Shape kShapes[] = {{1, 3}, {5, 70}, {67, 70}, {130, 33}, {257, 128}, {4096, 256}, {24, 4096}, {131, 4096}};

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// out = x @ w^T through Backend::linear; x holds m rows.
std::vector<float> linear(Backend& be, const DeviceWeight& w, const std::vector<float>& x, int64_t m) {
  const ScratchMark mark = be.scratch_mark();
  Tensor in = be.scratch(m, w.cols), out = be.scratch(m, w.rows);
  EXPECT_TRUE(be.write(in, x.data()));
  be.linear(in, w, out);
  std::vector<float> host(static_cast<size_t>(m * w.rows));
  EXPECT_TRUE(be.read(out, host.data()));
  be.scratch_release(mark);
  return host;
}

class CpuProducts : public ::testing::TestWithParam<Shape> {};

TEST_P(CpuProducts, RowIsTheSameAloneAnywhereInABatchAndWithAnyThreads) {
  const auto [n, k] = GetParam();
  const std::vector<float> a = random_floats(static_cast<size_t>(kRows * k), 1);
  const std::vector<float> wv = random_floats(static_cast<size_t>(n * k), 2);
  auto row_of = [&](int64_t r) { return a.begin() + r * k; };

  // Each row alone, single-threaded: the reference every other run must match bit for bit.
  auto single = make_cpu_backend(1).value();
  auto w1 = single->upload_floats(wv, n, k);
  ASSERT_TRUE(w1);
  std::vector<float> alone(static_cast<size_t>(kRows * n));
  for (int64_t r = 0; r < kRows; ++r) {
    std::vector<float> out = linear(*single, *w1.value(), std::vector<float>(row_of(r), row_of(r + 1)), 1);
    std::copy(out.begin(), out.end(), alone.begin() + r * n);
  }

  for (int threads : {1, 2, 3}) {
    auto be = make_cpu_backend(threads).value();
    auto w = be->upload_floats(wv, n, k);
    ASSERT_TRUE(w);
    for (int64_t m = 1; m <= kRows; ++m) {
      // The batch takes rows first, first + 1, ... (wrapping), so each row comes at many positions.
      const int64_t first = (m * 7) % kRows;
      std::vector<float> x;
      for (int64_t i = 0; i < m; ++i) x.insert(x.end(), row_of((first + i) % kRows), row_of((first + i) % kRows + 1));
      const std::vector<float> got = linear(*be, *w.value(), x, m);
      for (int64_t i = 0; i < m; ++i) {
        const int64_t r = (first + i) % kRows;
        ASSERT_EQ(std::memcmp(got.data() + i * n, alone.data() + r * n, sizeof(float) * n), 0)
            << "n " << n << " k " << k << ": row " << r << " at position " << i << " of " << m << " with " << threads
            << " threads differs from the row alone";
      }
    }
  }
}

TEST_P(CpuProducts, MatchDoublePrecision) {
  const auto [n, k] = GetParam();
  const std::vector<float> a = random_floats(static_cast<size_t>(kRows * k), 3);
  const std::vector<float> wv = random_floats(static_cast<size_t>(n * k), 4);
  auto be = make_cpu_backend(2).value();
  auto w = be->upload_floats(wv, n, k);
  ASSERT_TRUE(w);
  const std::vector<float> got = linear(*be, *w.value(), a, kRows);
  double err2 = 0.0, ref2 = 0.0;
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0.0, magnitude = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double t = static_cast<double>(a[r * k + p]) * wv[j * k + p];
        ref += t;
        magnitude += std::fabs(t);
      }
      const double err = got[r * n + j] - ref;
      // Each element within a few roundings of its terms' magnitude (cancellation leaves no bound
      // relative to the value itself), and the whole product close in norm.
      ASSERT_LE(std::fabs(err), 1e-5 * magnitude) << "n " << n << " k " << k << ": element " << r << ", " << j;
      err2 += err * err;
      ref2 += ref * ref;
    }
  EXPECT_LE(std::sqrt(err2 / ref2), 1e-6) << "n " << n << " k " << k;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuProducts, ::testing::ValuesIn(kShapes),
                         [](const auto& info) { return "n" + std::to_string(info.param.n) + "_k" + std::to_string(info.param.k); });

}  // namespace
}  // namespace deepinfer
