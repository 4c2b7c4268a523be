// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. Each (counter, key) pair maps to four independent 32-bit words with no
// state in between, so any draw can be computed directly from its coordinates.
#pragma once

#include <array>
#include <cstdint>

namespace deepinfer {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// The Random123 reference function philox4x32 with 10 rounds.
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

}  // namespace deepinfer
