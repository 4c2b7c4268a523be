#include "engine/grammar_masks.h"

namespace deepinfer {

void GrammarMasks::start() {
  collect();
  if (queued_.empty()) return;
  std::vector<MaskWorker::Job> jobs;
  for (auto& [c, job] : queued_) jobs.push_back(job);
  worker_->start(std::move(jobs));
  in_flight_.swap(queued_);
  queued_.clear();
}

void GrammarMasks::collect() {
  worker_->wait();
  for (auto& [c, job] : in_flight_) c->mask_ready = true;
  in_flight_.clear();
}

void GrammarMasks::abandon() {
  worker_->wait();
  in_flight_.clear();
  queued_.clear();
}

}  // namespace deepinfer
