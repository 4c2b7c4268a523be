#include "sample/sampling_rng.h"

#include "sample/philox.h"

#include <exception>
#include <random>

namespace deepinfer {
namespace {

// Counter word 2 separates the uses of one key so their streams never overlap.
enum class Domain : uint32_t { kTokenDraw = 0, kSeedDerivation = 1 };

PhiloxKey key_of(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

}  // namespace

double sample_uniform(const SampleKey& key) {
  const PhiloxCounter out = philox4x32_10(
      {key.position, key.completion_index, static_cast<uint32_t>(Domain::kTokenDraw), 0},
      key_of(key.seed));
  const uint64_t bits53 = (static_cast<uint64_t>(out[0]) << 21) | (out[1] >> 11);
  return static_cast<double>(bits53) * 0x1.0p-53;
}

uint64_t derive_seed(uint64_t parent_seed, uint64_t stream) {
  const PhiloxCounter out = philox4x32_10(
      {static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32),
       static_cast<uint32_t>(Domain::kSeedDerivation), 0},
      key_of(parent_seed));
  return (static_cast<uint64_t>(out[1]) << 32) | out[0];
}

Result<uint64_t> fresh_seed() {
  try {
    // A local device per call: std::random_device is not guaranteed safe to share across threads.
    std::random_device device;
    const uint64_t hi = device();
    return (hi << 32) | device();
  } catch (const std::exception& e) {
    return make_error(Code::kInternal, "no entropy source for a fresh seed: {}", e.what());
  }
}

}  // namespace deepinfer
