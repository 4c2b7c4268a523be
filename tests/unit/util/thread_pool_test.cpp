#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace deepinfer {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  auto created = ThreadPool::create(4);
  ASSERT_TRUE(created);
  ThreadPool& pool = *created.value();
  for (size_t n : {0u, 1u, 7u, 1000u, 12345u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, 3, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

}  // namespace
}  // namespace deepinfer
