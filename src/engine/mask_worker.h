// Computes the next step's grammar masks on worker threads while the model runs: the step loop
// hands over the matchers after sampling and collects the masks before it samples again.
#pragma once

#include "grammar/matcher.h"
#include "util/thread_pool.h"

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer {

class MaskWorker {
 public:
  struct Job {
    grammar::Matcher* matcher;
    std::vector<uint32_t>* mask;  // resized to the vocabulary's mask words
  };

  // `threads` computing masks (0: one per hardware thread), plus the thread that hands them out. A
  // thread the system cannot start is an error (ThreadPool::create).
  static Result<std::unique_ptr<MaskWorker>> create(size_t threads);
  ~MaskWorker();
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  // Starts filling the masks of `jobs` (waits for any earlier batch first). The matchers and masks
  // must not be touched until wait() returns.
  void start(std::vector<Job> jobs);
  void wait();

 private:
  explicit MaskWorker(std::unique_ptr<ThreadPool> pool) : pool_(std::move(pool)) {}
  void run();

  std::unique_ptr<ThreadPool> pool_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Job> jobs_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace deepinfer
