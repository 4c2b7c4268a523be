#include "util/process.h"

#include <pthread.h>

#include <atomic>

namespace deepinfer {
namespace {

// Constant-initialised atomics: no constructor or destructor runs, so they are valid at any point of
// start-up and exit.
std::atomic<uint64_t> g_fork_generation{0};  // process-wide: a fact of the process, not a setting
std::atomic<bool> g_exiting{false};           // process-wide: a fact of the process, not a setting

void count_fork() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

[[maybe_unused]] const int g_registered = pthread_atfork(nullptr, nullptr, count_fork);

}  // namespace

uint64_t fork_generation() { return g_fork_generation.load(std::memory_order_relaxed); }
void set_process_exiting() { g_exiting.store(true); }
bool process_exiting() { return g_exiting.load(); }

}  // namespace deepinfer
