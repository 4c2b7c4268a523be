#include "sample/philox.h"
#include "sample/sampling_rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace deepinfer {
namespace {

// Known-answer vectors of Random123's tests/kat_vectors (philox4x32, 10 rounds).
TEST(Philox, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                          {0xffffffff, 0xffffffff}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                          {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(SampleUniform, IsAPureFunctionOfItsKey) {
  const SampleKey key{0x1234'5678'9abc'def0ull, 3, 17};
  const double u = sample_uniform(key);
  EXPECT_GE(u, 0.0);
  EXPECT_LT(u, 1.0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(sample_uniform(key), u);
  // Pinned value: the stream is part of the replay contract and must not change silently.
  const PhiloxCounter out = philox4x32_10({17, 3, 0, 0}, {0x9abcdef0, 0x12345678});
  EXPECT_EQ(u, static_cast<double>((static_cast<uint64_t>(out[0]) << 21) | (out[1] >> 11)) *
                   0x1.0p-53);
}

TEST(SampleUniform, EveryCoordinateChangesTheDraw) {
  const SampleKey base{42, 0, 0};
  std::set<double> draws{sample_uniform(base)};
  draws.insert(sample_uniform({43, 0, 0}));
  draws.insert(sample_uniform({42, 1, 0}));
  draws.insert(sample_uniform({42, 0, 1}));
  draws.insert(sample_uniform({42ull | (1ull << 40), 0, 0}));  // the seed's high word counts too
  EXPECT_EQ(draws.size(), 5u);
}

TEST(SampleUniform, CompletionStreamsAreUncorrelated) {
  // Pearson correlation of two completions' draws over 20k positions: ~N(0, 1/sqrt(n)).
  constexpr int kN = 20000;
  double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
  for (uint32_t pos = 0; pos < kN; ++pos) {
    const double a = sample_uniform({7, 0, pos});
    const double b = sample_uniform({7, 1, pos});
    sa += a, sb += b, saa += a * a, sbb += b * b, sab += a * b;
  }
  const double cov = sab / kN - (sa / kN) * (sb / kN);
  const double var_a = saa / kN - (sa / kN) * (sa / kN);
  const double var_b = sbb / kN - (sb / kN) * (sb / kN);
  const double corr = cov / std::sqrt(var_a * var_b);
  EXPECT_LT(std::abs(corr), 5.0 / std::sqrt(kN));  // 5 sigma
  EXPECT_NEAR(sa / kN, 0.5, 5.0 * std::sqrt(1.0 / 12 / kN));
}

TEST(DeriveSeed, IsDeterministicAndSeparatesStreams) {
  EXPECT_EQ(derive_seed(1, 2), derive_seed(1, 2));
  std::set<uint64_t> seeds;
  for (uint64_t parent : {0ull, 1ull, ~0ull}) {
    for (uint64_t stream : {0ull, 1ull, 1ull << 32, ~0ull}) {
      seeds.insert(derive_seed(parent, stream));
    }
  }
  EXPECT_EQ(seeds.size(), 12u);
}

TEST(FreshSeed, DrawsDifferentSeeds) {
  auto a = fresh_seed();
  auto b = fresh_seed();
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_NE(a.value(), b.value());  // 2^-64 chance of a false failure
}

}  // namespace
}  // namespace deepinfer
