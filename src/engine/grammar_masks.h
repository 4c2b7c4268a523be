// The grammar masks of the next step, computed by the MaskWorker while the next forward runs: the
// output stage queues each constrained completion after its token, the step starts the batch at its
// end, and the next step collects it before it samples. A completion whose mask is not ready (its
// first) has it computed where it is sampled.
#pragma once

#include "engine/completion.h"
#include "engine/mask_worker.h"

#include <memory>
#include <utility>
#include <vector>

namespace deepinfer {

class GrammarMasks {
 public:
  explicit GrammarMasks(std::unique_ptr<MaskWorker> worker) : worker_(std::move(worker)) {}

  void queue(Completion& c) { queued_.push_back({&c, MaskWorker::Job{&*c.matcher, &c.mask}}); }
  // Collects the batch in flight, then starts the queued one.
  void start();
  // Waits for the batch in flight: its completions' masks are ready.
  void collect();
  // Waits for the batch in flight and forgets both batches (their completions are failing).
  void abandon();

 private:
  std::unique_ptr<MaskWorker> worker_;
  std::vector<std::pair<Completion*, MaskWorker::Job>> queued_, in_flight_;
};

}  // namespace deepinfer
