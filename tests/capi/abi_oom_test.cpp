// When memory runs out while an error is being made, a call returns the static out-of-memory error:
// never NULL (which would read as success). This program replaces operator new so that allocations
// fail on request; the library's allocations come here too.
#include "abi_helpers.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> g_fail{false};
}

void* operator new(size_t n) {
  if (g_fail.load(std::memory_order_relaxed)) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// GCC cannot see that these pair with the operator new above (it is malloc-based too).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace abitest {
namespace {

TEST(OutOfMemory, AFailedCallNeverReturnsNull) {
  di_engine_config* cfg = nullptr;
  ASSERT_DI_OK(di_engine_config_create(&cfg));
  g_fail = true;
  di_error* err = di_engine_config_set_threads(cfg, -5);  // an error must be made: no memory for it
  g_fail = false;
  ASSERT_NE(err, nullptr) << "a failed call returned NULL (success)";
  EXPECT_EQ(di_error_code(err), DI_ERR_OUT_OF_MEMORY);
  EXPECT_STRNE(di_error_message(err), "");
  di_error_free(err);  // ignored for the static error
  di_error_free(err);
  // The same static error again, still valid after being "freed".
  g_fail = true;
  di_error* again = di_engine_config_set_threads(cfg, -5);
  g_fail = false;
  EXPECT_EQ(again, err);
  EXPECT_EQ(di_error_code(again), DI_ERR_OUT_OF_MEMORY);
  di_error_free(again);
  // Calls that allocate a result fail the same way, and write no out-parameter.
  di_sampling* sp = reinterpret_cast<di_sampling*>(0x1);
  g_fail = true;
  di_error* made = di_sampling_create(&sp);
  g_fail = false;
  ASSERT_NE(made, nullptr);
  EXPECT_EQ(di_error_code(made), DI_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(sp, reinterpret_cast<di_sampling*>(0x1));
  di_error_free(made);
  // Memory is back: everything works.
  ASSERT_DI_OK(di_engine_config_set_threads(cfg, 1));
  di_engine_config_free(cfg);
}

}  // namespace
}  // namespace abitest
