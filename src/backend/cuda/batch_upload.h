// A forward's batch metadata on the device (what begin_forward uploads): tokens, positions, each
// row's sequence, the sequences, their block tables, the logit rows and the compressor windows that
// close in this step, per compression rate. One host-to-device copy a forward and no host wait: two
// pinned host buffers take turns, each reused only after the event of its last upload.
#pragma once

#include "backend/forward_batch.h"
#include "backend/state_layout.h"
#include "launch.h"
#include "util/result.h"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace deepinfer {

// The compressor windows that close in a step for one compression rate.
struct CompressJobs {
  const kernels::CompressJob* jobs = nullptr;
  const int32_t* count = nullptr;  // device: jobs in this step
  int capacity = 0;                // launch size (>= count)
};

// What the ops of a forward read about its batch.
struct BatchOnDevice {
  kernels::BatchDev dev;
  const int32_t* logit_rows = nullptr;  // device copy of ForwardBatch::logit_rows
  int64_t pos_bound = 1;  // every row's position is below this (graph steps: from the block-table capacity)
  std::vector<std::pair<int32_t, int32_t>> seq_steps;  // the sequences: (n_past, n_tokens)
  std::map<int, CompressJobs> jobs_by_rate;
};

// kInternal naming what breaks the batch contract of backend.h against the state it runs on
// (n_slots slot records, n_blocks blocks of `layout`).
Result<void> validate_batch(const ForwardBatch& batch, const StateLayout& layout, int n_slots, int n_blocks);

class BatchUpload {
 public:
  BatchUpload() = default;
  BatchUpload(const BatchUpload&) = delete;
  BatchUpload& operator=(const BatchUpload&) = delete;
  ~BatchUpload();

  Result<void> init();
  // Uploads `batch` (validated) on `stream`. graph_block_cap > 0: a decode step that may be captured
  // as a graph, whose regions get capacities fixed by the graph key and whose position bound comes
  // from that block-table capacity; 0: regions and bounds of this batch.
  Result<void> upload(const ForwardBatch& batch, const StateLayout& layout, int32_t graph_block_cap, cudaStream_t stream,
                      BatchOnDevice& out);
  // Changes whenever the device buffer moves (graphs hold its addresses).
  uint64_t generation() const { return generation_; }

 private:
  Result<void> reserve(size_t ints, cudaStream_t stream);

  int32_t* dev_ = nullptr;  // one buffer: forwards run in stream order
  int32_t* host_[2] = {nullptr, nullptr};
  cudaEvent_t event_[2] = {nullptr, nullptr};
  int turn_ = 0;
  size_t cap_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace deepinfer
