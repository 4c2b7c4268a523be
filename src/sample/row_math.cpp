#include "sample/row_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace deepinfer {
namespace {

// The passes are compiled twice on x86-64, for AVX2 and for the baseline, and the loader picks one
// (GCC function multiversioning). AVX2 without FMA: the same operations in wider vectors, so both
// give the same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DI_ROW_PASS __attribute__((target_clones("avx2", "default")))
#else
#define DI_ROW_PASS
#endif

constexpr size_t kLanes = 8;
constexpr size_t kScanBlock = 64;  // searches check a block at once, then look inside

}  // namespace

DI_ROW_PASS int64_t first_invalid_logit(std::span<const float> logits) {
  // One branch-free pass (NaN fails every comparison), then a scalar search only for a bad row.
  int bad = 0;  // int, not bool: the OR reduction vectorizes
  for (float x : logits) bad |= !(x < std::numeric_limits<float>::infinity());
  if (!bad) return -1;
  for (size_t i = 0; i < logits.size(); ++i)
    if (std::isnan(logits[i]) || logits[i] == std::numeric_limits<float>::infinity()) return static_cast<int64_t>(i);
  return -1;
}

DI_ROW_PASS int64_t first_non_finite(std::span<const float> values) {
  int bad = 0;
  for (float x : values) bad |= !(std::fabs(x) < std::numeric_limits<float>::infinity());
  if (!bad) return -1;
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i])) return static_cast<int64_t>(i);
  return -1;
}

DI_ROW_PASS float max_logit(std::span<const float> logits) {
  float lanes[kLanes];
  for (float& l : lanes) l = -std::numeric_limits<float>::infinity();
  const size_t full = logits.size() / kLanes * kLanes;
  for (size_t i = 0; i < full; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lanes[j] = logits[i + j] > lanes[j] ? logits[i + j] : lanes[j];
  float m = -std::numeric_limits<float>::infinity();
  for (float l : lanes) m = l > m ? l : m;
  for (size_t i = full; i < logits.size(); ++i) m = logits[i] > m ? logits[i] : m;
  return m;
}

DI_ROW_PASS size_t count_finite(std::span<const float> logits) {
  size_t n = 0;
  for (float x : logits) n += x > -std::numeric_limits<float>::infinity();
  return n;
}

int64_t first_index_of(std::span<const float> values, float value) {
  for (size_t b = 0; b < values.size(); b += kScanBlock) {
    const size_t e = std::min(values.size(), b + kScanBlock);
    int any = 0;
    for (size_t i = b; i < e; ++i) any |= values[i] == value;
    if (!any) continue;
    for (size_t i = b; i < e; ++i)
      if (values[i] == value) return static_cast<int64_t>(i);
  }
  return -1;
}

void indices_above(std::span<const float> values, float threshold, std::vector<uint32_t>& out) {
  for (size_t b = 0; b < values.size(); b += kScanBlock) {
    const size_t e = std::min(values.size(), b + kScanBlock);
    int any = 0;
    for (size_t i = b; i < e; ++i) any |= values[i] > threshold;
    if (!any) continue;
    for (size_t i = b; i < e; ++i)
      if (values[i] > threshold) out.push_back(static_cast<uint32_t>(i));
  }
}

DI_ROW_PASS bool any_above(const float* values, size_t n, float threshold) {
  int any = 0;
  for (size_t i = 0; i < n; ++i) any |= values[i] > threshold;
  return any != 0;
}

DI_ROW_PASS void exp_weights(std::span<const float> logits, float max, float temperature, float* weights) {
  const float inverse = 1.0f / temperature;
  if (std::isfinite(inverse)) {
    for (size_t i = 0; i < logits.size(); ++i) weights[i] = exp_nonpositive((logits[i] - max) * inverse);
  } else {  // a temperature so small that 1 / t overflows: 0 / t still gives the best token 1
    for (size_t i = 0; i < logits.size(); ++i) weights[i] = exp_nonpositive((logits[i] - max) / temperature);
  }
}

DI_ROW_PASS void store_scaled(std::span<const float> logits, float max, float temperature, std::span<float> out) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] > kMinusInf ? (logits[i] - max) / temperature : kMinusInf;
}

DI_ROW_PASS double exp_sum(std::span<const float> logits, float max) {
  double lanes[kLanes] = {};
  const size_t n = logits.size();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lanes[j] += exp_nonpositive(logits[i + j] - max);
  for (size_t j = 0; i < n; ++i, ++j) lanes[j] += exp_nonpositive(logits[i] - max);
  double total = 0.0;
  for (double l : lanes) total += l;
  return total;
}

DI_ROW_PASS double lane_sum(const float* weights, size_t begin, size_t end) {
  double lanes[kLanes] = {};
  size_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lanes[j] += weights[i + j];
  for (size_t j = 0; i < end; ++i, ++j) lanes[j] += weights[i];
  double total = 0.0;
  for (double l : lanes) total += l;
  return total;
}

DI_ROW_PASS MassAbove mass_above(std::span<const float> weights, float threshold) {
  double lanes[kLanes] = {};
  size_t counts[kLanes] = {};
  const size_t n = weights.size();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) {
      const bool above = weights[i + j] > threshold;
      lanes[j] += above ? weights[i + j] : 0.0f;
      counts[j] += above;
    }
  for (size_t j = 0; i < n; ++i, ++j) {
    const bool above = weights[i] > threshold;
    lanes[j] += above ? weights[i] : 0.0f;
    counts[j] += above;
  }
  MassAbove out;
  for (size_t j = 0; j < kLanes; ++j) {
    out.mass += lanes[j];
    out.count += counts[j];
  }
  return out;
}

}  // namespace deepinfer
