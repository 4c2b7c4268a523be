// Threads the system will not start (memory or process limits): every place that starts threads
// fails with an error and leaves nothing behind; none aborts the process or waits for ever.
// pthread_create is interposed below (this binary only), so the failures are deterministic.
#include "engine/engine.h"
#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>

namespace {

std::atomic<int> g_starts_left{-1};  // threads that may still start; -1: any number
std::atomic<int> g_started{0};

}  // namespace

// The executable's definition comes first in symbol lookup, so std::thread reaches it too.
extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const auto real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  int left = g_starts_left.load();
  while (left > 0 && !g_starts_left.compare_exchange_weak(left, left - 1)) {
  }
  if (left == 0) return EAGAIN;
  ++g_started;
  return real(thread, attr, fn, arg);
}

namespace deepinfer {
namespace {

// Allows `n` more thread starts for the scope.
struct ThreadBudget {
  explicit ThreadBudget(int n) { g_starts_left = n; }
  ~ThreadBudget() { g_starts_left = -1; }
};

TEST(ThreadFailure, TheInterposerWorks) {
  ThreadBudget none(0);
  EXPECT_THROW(std::thread([] {}), std::system_error);
}

TEST(ThreadFailure, APoolThatCannotStartAllItsWorkersFailsAndJoinsTheOthers) {
  for (int allowed = 0; allowed < 7; ++allowed) {
    ThreadBudget budget(allowed);
    auto pool = ThreadPool::create(8);  // 7 workers
    ASSERT_FALSE(pool) << "allowed " << allowed;
    EXPECT_EQ(pool.error().code, Code::kOutOfMemory);
    EXPECT_NE(pool.error().message.find(fmt::format("worker thread {} of 7", allowed + 1)), std::string::npos)
        << pool.error().message;
  }
  auto pool = ThreadPool::create(8);
  ASSERT_TRUE(pool);
  EXPECT_EQ(pool.value()->size(), 8u);
}

TEST(ThreadFailure, AbsurdThreadCountsAreRefusedBeforeStartingAny) {
  const int before = g_started;
  auto pool = ThreadPool::create(100000);
  ASSERT_FALSE(pool);
  EXPECT_EQ(pool.error().code, Code::kInvalidArgument);
  EXPECT_NE(pool.error().message.find("100000 threads"), std::string::npos) << pool.error().message;
  EXPECT_EQ(g_started, before);
}

TEST(ThreadFailure, EngineCreationFailsCleanlyWhereverAThreadIsRefused) {
  EngineConfig config;
  config.model_path = DI_DEMO_MODEL;
  config.threads = 2;
  config.device = Device::kCpu;
  int failures = 0;
  for (int allowed = 0; allowed < 16; ++allowed) {
    ThreadBudget budget(allowed);
    auto engine = Engine::create(config);
    if (engine) {
      EXPECT_GT(allowed, 0);
      break;  // every thread the engine needs has started
    }
    ++failures;
    EXPECT_EQ(engine.error().code, Code::kOutOfMemory) << engine.error().message;
    EXPECT_NE(engine.error().message.find("cannot start"), std::string::npos) << engine.error().message;
  }
  EXPECT_GE(failures, 3) << "each of the engine's thread starts should have been refused once";
  config.threads = 100000;
  auto engine = Engine::create(config);
  ASSERT_FALSE(engine);
  EXPECT_EQ(engine.error().code, Code::kInvalidArgument) << engine.error().message;
}

}  // namespace
}  // namespace deepinfer
