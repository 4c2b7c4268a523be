// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. Each (counter, key) pair maps to four independent 32-bit words with no
// state in between, so any draw can be computed directly from its coordinates.
#pragma once

#include <array>
#include <cstdint>

namespace deepinfer {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// The round multipliers and the key's Weyl increments (golden ratio, sqrt(3) - 1). Public so that
// a device implementation takes them from here (the CUDA sampler gets them as kernel arguments).
inline constexpr uint32_t kPhiloxMultiplier0 = 0xD2511F53;
inline constexpr uint32_t kPhiloxMultiplier1 = 0xCD9E8D57;
inline constexpr uint32_t kPhiloxWeyl0 = 0x9E3779B9;
inline constexpr uint32_t kPhiloxWeyl1 = 0xBB67AE85;

// The Random123 reference function philox4x32 with 10 rounds.
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

}  // namespace deepinfer
