#include "sample/philox.h"

namespace deepinfer {
namespace {

struct HiLo {
  uint32_t hi, lo;
};

HiLo mul_hi_lo(uint32_t a, uint32_t b) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  return {static_cast<uint32_t>(product >> 32), static_cast<uint32_t>(product)};
}

PhiloxCounter round(const PhiloxCounter& c, const PhiloxKey& k) {
  const HiLo p0 = mul_hi_lo(kPhiloxMultiplier0, c[0]);
  const HiLo p1 = mul_hi_lo(kPhiloxMultiplier1, c[2]);
  return {p1.hi ^ c[1] ^ k[0], p1.lo, p0.hi ^ c[3] ^ k[1], p0.lo};
}

}  // namespace

PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) key = {key[0] + kPhiloxWeyl0, key[1] + kPhiloxWeyl1};
    counter = round(counter, key);
  }
  return counter;
}

}  // namespace deepinfer
