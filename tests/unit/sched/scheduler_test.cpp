// The scheduler's decisions on hand-made situations.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace deepinfer {
namespace {

// Decisions name sequences by their index in the list scheduled.
SchedSequence decoding(int32_t length, int32_t blocks, uint64_t order) { return {1, length, blocks, true, true, order}; }
SchedSequence waiting(int32_t prompt, uint64_t order) { return {prompt, 0, 0, false, false, order}; }
SchedSequence idle(int32_t length, int32_t blocks, uint64_t last_used) { return {0, length, blocks, true, false, last_used}; }

int32_t fed(const SchedDecision& d, size_t index) {
  for (const auto& f : d.feeds)
    if (f.index == index) return f.n;
  return 0;
}
bool has(const std::vector<size_t>& v, size_t index) { return std::find(v.begin(), v.end(), index) != v.end(); }

TEST(Scheduler, DecodesRunAndPrefillsShareTheRestOfTheBudget) {
  SchedLimits lim{100, 16, 100, 10, 100};
  auto d = schedule_step({decoding(20, 2, 0), waiting(250, 1), waiting(50, 2)}, lim);
  EXPECT_EQ(fed(d, 0), 1);
  EXPECT_EQ(fed(d, 1), 99);  // a chunk of what is left of the budget
  EXPECT_EQ(fed(d, 2), 0);   // budget used up
}

TEST(Scheduler, DecodesRunEvenBeyondTheBudget) {
  SchedLimits lim{2, 16, 100, 10, 100};
  auto d = schedule_step({decoding(5, 1, 0), decoding(5, 1, 1), decoding(5, 1, 2)}, lim);
  EXPECT_EQ(d.feeds.size(), 3u);
}

TEST(Scheduler, PrefillShrinksToTheFreeBlocksAndLaterArrivalsWait) {
  SchedLimits lim{1000, 16, 3, 10, 100};
  auto d = schedule_step({waiting(100, 0), waiting(10, 1)}, lim);
  EXPECT_EQ(fed(d, 0), 48);  // 3 free blocks of 16 tokens
  EXPECT_EQ(fed(d, 1), 0);   // no block left: waits behind the first
}

TEST(Scheduler, PrefillWaitsForASlot) {
  SchedLimits lim{1000, 16, 50, 0, 100};
  auto d = schedule_step({waiting(10, 0)}, lim);
  EXPECT_TRUE(d.feeds.empty());
}

TEST(Scheduler, IdleStateIsEvictedBeforeRunningSequencesArePreempted) {
  // No free block; the decoder crosses into a new block; an idle session and a newer prefill hold blocks.
  SchedLimits lim{1000, 16, 0, 0, 10};
  auto d = schedule_step({decoding(32, 2, 0), idle(40, 3, 5), {10, 16, 1, true, false, 1}}, lim);
  EXPECT_EQ(fed(d, 0), 1);
  EXPECT_TRUE(has(d.evict, 1));
  EXPECT_TRUE(d.preempt.empty());
}

TEST(Scheduler, TheNewestRunningSequenceIsPreemptedFirst) {
  SchedLimits lim{1000, 16, 0, 0, 6};
  auto d = schedule_step({decoding(32, 2, 0), decoding(31, 2, 1), decoding(20, 2, 2)}, lim);
  EXPECT_EQ(fed(d, 0), 1);        // needs a third block: takes the newest one's
  EXPECT_TRUE(has(d.preempt, 2));
  EXPECT_EQ(fed(d, 1), 1);
  EXPECT_FALSE(has(d.preempt, 0));
}

TEST(Scheduler, AnElderTakesTheBlocksOfANewerSequence) {
  SchedLimits lim{1000, 16, 0, 0, 4};
  auto d = schedule_step({decoding(16, 1, 0), decoding(48, 3, 1)}, lim);
  EXPECT_EQ(fed(d, 0), 1);
  EXPECT_TRUE(has(d.preempt, 1));  // the newer one gives its blocks up for its elder...
  EXPECT_EQ(fed(d, 1), 0);         // ...and is recomputed later
}

TEST(Scheduler, ASequenceWithNothingNewerToTakeFromPreemptsItself) {
  SchedLimits lim{1000, 16, 0, 0, 3};
  auto d = schedule_step({decoding(10, 1, 0), decoding(32, 2, 1)}, lim);
  EXPECT_EQ(fed(d, 0), 1);
  EXPECT_TRUE(has(d.preempt, 1));
  EXPECT_EQ(fed(d, 1), 0);
}

TEST(Scheduler, LeastRecentlyUsedIdleGoesFirst) {
  SchedLimits lim{1000, 16, 0, 0, 10};
  auto d = schedule_step({waiting(16, 0), idle(16, 1, 7), idle(16, 1, 3)}, lim);
  EXPECT_EQ(fed(d, 0), 16);
  ASSERT_EQ(d.evict.size(), 1u);
  EXPECT_EQ(d.evict[0], 2u);
}

TEST(Scheduler, TooLongForTheWholePoolIsOverCapacity) {
  SchedLimits lim{1000, 16, 0, 0, 2};
  auto d = schedule_step({decoding(32, 2, 0)}, lim);
  EXPECT_TRUE(has(d.over_capacity, 0));
  EXPECT_TRUE(d.feeds.empty());
}

}  // namespace
}  // namespace deepinfer
