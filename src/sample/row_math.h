// Whole-row passes of the sampler over a vocabulary-wide logits row, written as plain loops the
// compiler vectorizes: a 129k-token row is scanned in tens of microseconds. Every result is a pure
// function of the row (fixed summation order, no thread or batch dependence).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer {

// Index of the first logit that is NaN or +inf, or -1.
int64_t first_invalid_logit(std::span<const float> logits);

// Index of the first value that is NaN, +inf or -inf, or -1.
int64_t first_non_finite(std::span<const float> values);

// Largest logit (-inf for an empty row or one of -inf only). No NaN.
float max_logit(std::span<const float> logits);

// Number of logits above -inf. No NaN.
size_t count_finite(std::span<const float> logits);

// Index of the first element equal to `value`, or -1.
int64_t first_index_of(std::span<const float> values, float value);

// Whether any of values[0, n) is above `threshold`.
bool any_above(const float* values, size_t n, float threshold);

// Appends to `out` the indices i (ascending) with values[i] > threshold. Blocks of the row with no
// such value cost one vectorized check.
void indices_above(std::span<const float> values, float threshold, std::vector<uint32_t>& out);

// exp(x) for x <= 0 in float, within 2 ulp of the exact value; 0 below -87.3 (and for -inf).
// Inline so that loops over rows vectorize.
inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f, kLn2Lo = 1.42860682030941723e-6f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const bool underflow = !(x >= -87.3f);  // also -inf
  const float xc = underflow ? -87.3f : x;
  const float n = (xc * kLog2e + kRound) - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ln2 / 2
  // Taylor terms to r^7 / 7!: the truncation error at |r| = 0.347 is below 2^-26.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n by its exponent bits; n is in [-126, 0].
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return underflow ? 0.0f : p * scale;
}

// weights[i] = exp((logits[i] - max) / temperature), 0 for -inf logits; max >= every logit,
// temperature > 0.
void exp_weights(std::span<const float> logits, float max, float temperature, float* weights);

// out[i] = (logits[i] - max) / temperature in float, -inf stays -inf; out may be logits.
void store_scaled(std::span<const float> logits, float max, float temperature, std::span<float> out);

// Sum of exp(logits[i] - max) in double (lane order, as lane_sum), without storing the terms.
double exp_sum(std::span<const float> logits, float max);

// Sum of weights[begin, end) in double: lane j of 8 sums the elements begin + j, begin + j + 8, ...
// in order, then the lanes are added in order.
double lane_sum(const float* weights, size_t begin, size_t end);

// Sum and count of the weights above `threshold`, in the same lane order.
struct MassAbove {
  double mass = 0.0;
  size_t count = 0;
};
MassAbove mass_above(std::span<const float> weights, float threshold);

}  // namespace deepinfer
