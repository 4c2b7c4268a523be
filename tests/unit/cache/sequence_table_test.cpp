// The slot and block tables of the sequences: ids, slots, blocks for their positions, and the pool
// returned to full whatever the order of opening and closing.
#include "cache/sequence_table.h"

#include <gtest/gtest.h>

#include <random>

namespace deepinfer {
namespace {

TEST(SequenceTable, BlocksCoverThePositions) {
  SequenceTable t(2, 10, 16);
  EXPECT_EQ(t.capacity_tokens(), 160);
  EXPECT_EQ(t.blocks_for(0), 0);
  EXPECT_EQ(t.blocks_for(1), 1);
  EXPECT_EQ(t.blocks_for(16), 1);
  EXPECT_EQ(t.blocks_for(17), 2);
  const int32_t s = t.open().value();
  EXPECT_TRUE(t.is_open(s));
  EXPECT_EQ(t.length(s), 0);
  EXPECT_EQ(t.blocks_held(s), 0);
  ASSERT_TRUE(t.reserve(s, 33));
  EXPECT_EQ(t.blocks_held(s), 3);
  t.set_length(s, 33);
  ASSERT_TRUE(t.reserve(s, 20));  // never shrinks
  EXPECT_EQ(t.blocks_held(s), 3);
  EXPECT_EQ(t.pool().free_blocks(), 7);
}

TEST(SequenceTable, AReserveThatDoesNotFitChangesNothing) {
  SequenceTable t(2, 4, 16);
  const int32_t a = t.open().value(), b = t.open().value();
  ASSERT_TRUE(t.reserve(a, 48));
  auto r = t.reserve(b, 32);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kCapacity);
  EXPECT_EQ(t.blocks_held(b), 0);
  EXPECT_EQ(t.pool().free_blocks(), 1);
}

TEST(SequenceTable, IdsAndSlotsAreReusedLowestFirst) {
  SequenceTable t(3, 8, 16);
  const int32_t a = t.open().value(), b = t.open().value(), c = t.open().value();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(c, 2);
  EXPECT_NE(t.slot(a), t.slot(b));
  auto full = t.open();
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, Code::kCapacity);
  const int32_t slot_b = t.slot(b);
  t.close(b);
  EXPECT_FALSE(t.is_open(b));
  const int32_t d = t.open().value();
  EXPECT_EQ(d, 1);  // the free id
  EXPECT_EQ(t.slot(d), slot_b);
  EXPECT_FALSE(t.is_open(-1));
  EXPECT_FALSE(t.is_open(3));
}

TEST(SequenceTable, ClearKeepsTheSlotAndReturnsTheBlocks) {
  SequenceTable t(1, 4, 16);
  const int32_t s = t.open().value();
  const int32_t slot = t.slot(s);
  ASSERT_TRUE(t.reserve(s, 40));
  t.set_length(s, 40);
  t.clear(s);
  EXPECT_TRUE(t.is_open(s));
  EXPECT_EQ(t.slot(s), slot);
  EXPECT_EQ(t.length(s), 0);
  EXPECT_EQ(t.blocks_held(s), 0);
  EXPECT_EQ(t.pool().free_blocks(), 4);
  EXPECT_EQ(t.pool().free_slots(), 0);
}

TEST(SequenceTable, RandomOpensGrowthsAndClosesReturnThePoolToFull) {
  SequenceTable t(8, 64, 16);
  std::mt19937 rng(1);
  std::vector<int32_t> open;
  for (int i = 0; i < 2000; ++i) {
    const int op = static_cast<int>(rng() % 3);
    if (op == 0) {
      auto s = t.open();
      if (s) open.push_back(s.value());
      else EXPECT_EQ(static_cast<int32_t>(open.size()), 8);
    } else if (op == 1 && !open.empty()) {
      const int32_t s = open[rng() % open.size()];
      const int64_t want = t.length(s) + static_cast<int64_t>(rng() % 40);
      const int32_t free_before = t.pool().free_blocks(), held_before = t.blocks_held(s);
      if (t.reserve(s, want)) {
        t.set_length(s, static_cast<int32_t>(want));
        EXPECT_EQ(t.blocks_held(s), t.blocks_for(want));
      } else {
        EXPECT_EQ(t.blocks_held(s), held_before);
        EXPECT_EQ(t.pool().free_blocks(), free_before);
      }
    } else if (!open.empty()) {
      const size_t k = rng() % open.size();
      t.close(open[k]);
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(k));
    }
    int32_t held = 0;
    for (int32_t s : open) held += t.blocks_held(s);
    ASSERT_EQ(held + t.pool().free_blocks(), 64);
    ASSERT_EQ(static_cast<int32_t>(open.size()) + t.pool().free_slots(), 8);
  }
  for (int32_t s : open) t.close(s);
  EXPECT_EQ(t.pool().free_blocks(), 64);
  EXPECT_EQ(t.pool().free_slots(), 8);
}

}  // namespace
}  // namespace deepinfer
