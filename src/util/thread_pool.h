// A fixed pool of worker threads for data-parallel loops (the CPU backend's kernels).
#pragma once

#include "util/result.h"

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer {

class ThreadPool {
 public:
  // More is a configuration mistake (e.g. --threads 100000), refused before any thread starts.
  static constexpr size_t kMaxThreads = 4096;

  // n_threads == 0: one per hardware thread. The calling thread also works, so n-1 workers start.
  // A worker the system cannot start (memory, process limits) is Code::kOutOfMemory; the workers
  // already started are stopped and joined first.
  static Result<std::unique_ptr<ThreadPool>> create(size_t n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // Runs fn(begin, end) over [0, n) split into contiguous ranges of at least `grain` items, and
  // returns when all are done. Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

 private:
  ThreadPool() = default;
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0, job_chunk_ = 0, next_chunk_ = 0, n_chunks_ = 0, chunks_done_ = 0;
  size_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace deepinfer
