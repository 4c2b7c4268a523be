// The pool of slots and blocks: lowest ids first, all or nothing growth, everything returned.
#include "cache/state_pool.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

TEST(StatePool, HandsOutTheLowestIdsFirstAndTakesThemBack) {
  StatePool pool(3, 4);
  EXPECT_EQ(pool.acquire_slot().value(), 0);
  EXPECT_EQ(pool.acquire_slot().value(), 1);
  pool.release_slot(0);
  EXPECT_EQ(pool.acquire_slot().value(), 0);  // the one returned last comes back first
  EXPECT_EQ(pool.acquire_slot().value(), 2);
  auto none = pool.acquire_slot();
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, Code::kCapacity);
  EXPECT_NE(none.error().message.find("3 sequence slots"), std::string::npos) << none.error().message;
}

TEST(StatePool, GrowsATableAllOrNothing) {
  StatePool pool(1, 4);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.grow(a, 3));
  EXPECT_EQ(a, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(pool.grow(a, 2));  // never shrinks
  EXPECT_EQ(a.size(), 3u);
  auto more = pool.grow(b, 2);  // one block is left
  ASSERT_FALSE(more);
  EXPECT_EQ(more.error().code, Code::kCapacity);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool.free_blocks(), 1);
  pool.release(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(pool.free_blocks(), 4);
  ASSERT_TRUE(pool.grow(b, 4));
  EXPECT_EQ(pool.free_blocks(), 0);
}

}  // namespace
}  // namespace deepinfer
