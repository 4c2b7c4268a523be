#include "engine/mask_worker.h"

#include <exception>

namespace deepinfer {

Result<std::unique_ptr<MaskWorker>> MaskWorker::create(size_t threads) {
  DI_TRY(pool, ThreadPool::create(threads));
  std::unique_ptr<MaskWorker> worker(new MaskWorker(std::move(pool)));
  try {
    worker->thread_ = std::thread([w = worker.get()] { w->run(); });
  } catch (const std::exception& e) {
    return make_error(Code::kOutOfMemory, "cannot start the grammar mask thread: {}", e.what());
  }
  return worker;
}

MaskWorker::~MaskWorker() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MaskWorker::start(std::vector<Job> jobs) {
  wait();
  if (jobs.empty()) return;
  {
    std::lock_guard lock(mu_);
    jobs_ = std::move(jobs);
    busy_ = true;
  }
  cv_.notify_all();
}

void MaskWorker::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !busy_; });
}

void MaskWorker::run() {
  for (;;) {
    std::vector<Job> jobs;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || busy_; });
      if (stop_) return;
      jobs = jobs_;
    }
    pool_->parallel_for(jobs.size(), 1, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        Job& j = jobs[i];
        j.mask->resize(j.matcher->compiled().vocabulary().mask_words());
        j.matcher->fill_mask(j.mask->data());
      }
    });
    {
      std::lock_guard lock(mu_);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

}  // namespace deepinfer
