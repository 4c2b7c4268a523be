// The counter-based values of Backend::random_weight and randomize_state: element i of a fill with
// `seed` is a pure function of (seed, i), so backends fill in any order (or in parallel) and agree.
// kernels/elementwise.cu holds the device copy of these two functions; they must stay identical.
#pragma once

#include <cstdint>

namespace deepinfer {

// splitmix64's finaliser over a Weyl sequence.
inline uint64_t random_bits(uint64_t seed, uint64_t i) {
  uint64_t x = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// mean + stddev * u, u uniform on [-sqrt(3), sqrt(3)) (unit variance), 24 random bits.
inline float random_value(uint64_t seed, uint64_t i, float mean, float stddev) {
  const float u = static_cast<float>(random_bits(seed, i) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
  const float centred = 2.0f * u - 1.0f;                                                    // exact
  const float spread = stddev * 1.7320508f;
  return mean + spread * centred;
}

}  // namespace deepinfer
