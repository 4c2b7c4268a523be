#include "backend/weight_quantize.h"

#include "util/dtype.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace deepinfer {
namespace {

// ceil(log2(x)) for x > 0, exactly (frexp: x = m * 2^k, m in [0.5, 1)).
int ceil_log2(double x) {
  int k = 0;
  const double m = std::frexp(x, &k);
  return m == 0.5 ? k - 1 : k;
}

uint8_t e8m0_of_power(int e) { return static_cast<uint8_t>(std::clamp(e + 127, 0, 254)); }

}  // namespace

uint8_t f32_to_e4m3(float x) {
  static const std::array<float, 127> values = [] {  // codes 0x00-0x7e: increasing
    std::array<float, 127> v{};
    for (int c = 0; c < 127; ++c) v[static_cast<size_t>(c)] = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
    return v;
  }();
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (std::isnan(x)) return 0x7f;
  if (a >= values[126]) return sign | 126;
  const size_t hi = static_cast<size_t>(std::upper_bound(values.begin(), values.end(), a) - values.begin());  // values[hi - 1] <= a
  const size_t lo = hi - 1;
  const float below = a - values[lo], above = values[hi] - a;
  const size_t code = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint8_t>(sign | code);
}

void quantize_fp8_block(const float* w, int64_t rows, int64_t cols, int block, std::vector<uint8_t>& codes, std::vector<uint8_t>& scales) {
  const int64_t br = (rows + block - 1) / block, bc = (cols + block - 1) / block;
  codes.assign(static_cast<size_t>(rows * cols), 0);
  scales.assign(static_cast<size_t>(br * bc), 0);
  for (int64_t i = 0; i < br; ++i)
    for (int64_t j = 0; j < bc; ++j) {
      const int64_t r1 = std::min(rows, (i + 1) * block), c1 = std::min(cols, (j + 1) * block);
      float amax = 0;
      for (int64_t r = i * block; r < r1; ++r)
        for (int64_t c = j * block; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const int e = ceil_log2(std::max(static_cast<double>(amax), 1e-12) / 448.0);
      scales[static_cast<size_t>(i * bc + j)] = e8m0_of_power(e);
      const float inv = static_cast<float>(std::ldexp(1.0, -e));  // a power of two: w / scale exactly
      for (int64_t r = i * block; r < r1; ++r)
        for (int64_t c = j * block; c < c1; ++c) codes[static_cast<size_t>(r * cols + c)] = f32_to_e4m3(w[r * cols + c] * inv);
    }
}

void quantize_mxfp4(const float* w, int64_t rows, int64_t cols, std::vector<uint8_t>& packed, std::vector<uint8_t>& scales) {
  static constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  packed.assign(static_cast<size_t>(rows * cols / 2), 0);
  scales.assign(static_cast<size_t>(rows * cols / 32), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < cols / 32; ++g) {
      const float* x = w + r * cols + g * 32;
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
      const int e = ceil_log2(std::max(static_cast<double>(amax), 1e-12) / 6.0);
      scales[static_cast<size_t>(r * (cols / 32) + g)] = e8m0_of_power(e);
      const float inv = static_cast<float>(std::ldexp(1.0, -e));
      for (int i = 0; i < 32; ++i) {
        const float v = x[i] * inv;
        int best = 0;
        for (int k = 1; k < 8; ++k)
          if (std::fabs(std::fabs(v) - kValues[k]) < std::fabs(std::fabs(v) - kValues[best])) best = k;
        const uint8_t code = static_cast<uint8_t>(best | (v < 0 ? 8 : 0));
        uint8_t& byte = packed[static_cast<size_t>(r * (cols / 2) + g * 16 + i / 2)];
        byte = static_cast<uint8_t>(i % 2 ? byte | (code << 4) : code);
      }
    }
}

}  // namespace deepinfer
