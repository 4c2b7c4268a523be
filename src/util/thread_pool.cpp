#include "util/thread_pool.h"

#include <algorithm>
#include <exception>

namespace deepinfer {

Result<std::unique_ptr<ThreadPool>> ThreadPool::create(size_t n_threads) {
  if (n_threads == 0) n_threads = std::max<size_t>(1, std::thread::hardware_concurrency());
  if (n_threads > kMaxThreads) {
    return make_error(Code::kInvalidArgument, "a pool of {} threads is more than the {} supported", n_threads, kMaxThreads);
  }
  std::unique_ptr<ThreadPool> pool(new ThreadPool());
  pool->workers_.reserve(n_threads - 1);  // no reallocation below: a failed start adds nothing
  for (size_t i = 1; i < n_threads; ++i) {
    try {
      pool->workers_.emplace_back([p = pool.get()] { p->worker_loop(); });
    } catch (const std::exception& e) {
      // The destructor stops and joins the workers that did start.
      return make_error(Code::kOutOfMemory, "cannot start worker thread {} of {}: {}", i, n_threads - 1, e.what());
    }
  }
  return pool;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    size_t chunk;
    const std::function<void(size_t, size_t)>* job;
    {
      std::lock_guard lock(mutex_);
      if (!job_ || next_chunk_ >= n_chunks_) return;
      chunk = next_chunk_++;
      job = job_;
    }
    size_t begin = chunk * job_chunk_;
    size_t end = std::min(job_n_, begin + job_chunk_);
    (*job)(begin, end);
    {
      std::lock_guard lock(mutex_);
      if (++chunks_done_ == n_chunks_) done_.notify_all();
    }
  }
}

void ThreadPool::worker_loop() {
  size_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
  }
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(1, grain);
  size_t max_chunks = std::max<size_t>(1, n / grain);
  size_t chunks = std::min(max_chunks, size() * 4);
  if (chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = (n + chunks - 1) / chunks;
    n_chunks_ = (n + job_chunk_ - 1) / job_chunk_;
    next_chunk_ = 0;
    chunks_done_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  run_chunks();
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return chunks_done_ == n_chunks_; });
  job_ = nullptr;
}

}  // namespace deepinfer
