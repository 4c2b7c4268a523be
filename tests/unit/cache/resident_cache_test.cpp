// Resident state: an owner's next generation continues from it only when its ids are a strict
// prefix of the new context; whatever is not reused goes back to the pool.
#include "cache/resident_cache.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

struct Fixture {
  SequenceTable table{4, 16, 16};
  ResidentCache cache{table};

  // A sequence holding `ids` (its blocks reserved), kept for `owner`.
  int32_t keep(uint64_t owner, std::vector<int32_t> ids, uint64_t step = 0) {
    const int32_t s = table.open().value();
    EXPECT_TRUE(table.reserve(s, static_cast<int64_t>(ids.size())));
    table.set_length(s, static_cast<int32_t>(ids.size()));
    cache.keep(owner, s, std::move(ids), step);
    return s;
  }
  bool pool_full() const { return table.pool().free_blocks() == 16 && table.pool().free_slots() == 4; }
};

TEST(ResidentCache, AStrictPrefixIsReused) {
  Fixture f;
  const std::vector<int32_t> ids(20, 7);
  const int32_t s = f.keep(1, ids, 3);
  ASSERT_EQ(f.cache.size(), 1u);
  EXPECT_EQ(f.cache.residents().at(1).last_used, 3u);
  std::vector<int32_t> context = ids;
  context.push_back(9);
  auto reuse = f.cache.take(1, context, true);
  ASSERT_TRUE(reuse);
  EXPECT_EQ(reuse->seq, s);
  EXPECT_EQ(reuse->processed, ids);
  EXPECT_EQ(f.cache.size(), 0u);
  EXPECT_TRUE(f.table.is_open(s));  // the caller's now
  EXPECT_EQ(f.table.blocks_held(s), 2);
}

TEST(ResidentCache, WhatIsNotReusedIsClosed) {
  const std::vector<int32_t> ids = {1, 2, 3, 4};
  struct Case {
    std::vector<int32_t> context;
    bool may_reuse;
  };
  const Case cases[] = {
      {{1, 2, 3, 4}, true},     // equal: nothing would be left to sample from
      {{1, 2, 3}, true},        // shorter
      {{1, 2, 9, 4, 5}, true},  // diverges
      {{1, 2, 3, 4, 5}, false}, // not allowed (e.g. prompt logprobs need every row)
  };
  for (const Case& c : cases) {
    Fixture f;
    const int32_t s = f.keep(5, ids);
    EXPECT_FALSE(f.cache.take(5, c.context, c.may_reuse));
    EXPECT_FALSE(f.table.is_open(s));
    EXPECT_EQ(f.cache.size(), 0u);
    EXPECT_TRUE(f.pool_full());
  }
}

TEST(ResidentCache, OwnersAreApart) {
  Fixture f;
  f.keep(1, {1, 2});
  f.keep(2, {1, 2});
  EXPECT_FALSE(f.cache.take(3, std::vector<int32_t>{1, 2, 3}, true));  // has none
  EXPECT_EQ(f.cache.size(), 2u);
  f.cache.release(1);
  EXPECT_EQ(f.cache.size(), 1u);
  EXPECT_EQ(f.cache.residents().count(2), 1u);
  f.cache.release(1);  // nothing left: no effect
  f.cache.release(2);
  EXPECT_TRUE(f.pool_full());
}

TEST(ResidentCache, KeepingAgainReplacesAndClosesTheOlderState) {
  Fixture f;
  const int32_t old = f.keep(1, {1, 2, 3});
  const int32_t now = f.keep(1, {1, 2, 3, 4}, 9);
  EXPECT_FALSE(f.table.is_open(old));
  EXPECT_TRUE(f.table.is_open(now));
  ASSERT_EQ(f.cache.size(), 1u);
  EXPECT_EQ(f.cache.residents().at(1).seq, now);
  EXPECT_EQ(f.cache.residents().at(1).last_used, 9u);
  f.cache.release(1);
  EXPECT_TRUE(f.pool_full());
}

}  // namespace
}  // namespace deepinfer
