#include "engine/mask_worker.h"

namespace deepinfer {

MaskWorker::MaskWorker(size_t threads) : pool_(threads), thread_([this] { run(); }) {}

MaskWorker::~MaskWorker() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
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
    pool_.parallel_for(jobs.size(), 1, [&](size_t b, size_t e) {
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
