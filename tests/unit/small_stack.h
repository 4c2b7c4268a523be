// Runs a function on a thread with a small stack: recursion over untrusted input must stay within
// its depth limits there (an embedding application may call the library from such a thread).
#pragma once

#include <pthread.h>

#include <cstddef>
#include <functional>
#include <stdexcept>

namespace deepinfer::testing {

inline constexpr std::size_t kSmallStack = 256 * 1024;

inline void run_on_small_stack(const std::function<void()>& fn, std::size_t stack_bytes = kSmallStack) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack_bytes);
  pthread_t thread;
  auto body = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  const int rc = pthread_create(&thread, &attr, body, const_cast<std::function<void()>*>(&fn));
  pthread_attr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("cannot start a small-stack thread");
  pthread_join(thread, nullptr);
}

}  // namespace deepinfer::testing
