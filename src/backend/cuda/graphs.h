// Decode steps replayed as captured CUDA graphs. A step whose every sequence feeds one token runs
// eagerly the first time its key is seen (the arenas grow to what it needs), is captured the second
// time and replayed after that: its ops then only hand out the same scratch addresses, and the graph
// is launched at the next entry point that is not an op (CudaDevice::flush_pending). Launch sizes of
// captured kernels may not depend on the batch beyond the key: the metadata regions get capacities
// fixed by it and bounds come from the block-table capacity. Any change of an address a graph holds
// (arena, metadata or state reallocation: the generation) drops every graph.
#pragma once

#include "util/result.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

namespace deepinfer {

// How the ops of the current forward run: eagerly, into a graph capture, or not at all (a captured
// graph stands in for them).
enum class LaunchMode { kEager, kCapture, kReplay };

// What a captured step's launches depend on: rows, logit rows, block-table capacity (in buckets of
// kGraphBlockBucket blocks) and whether the forward ends with argmax_rows.
struct GraphKey {
  int32_t rows, logit_rows, block_cap;
  bool greedy_tokens;
  bool operator<(const GraphKey& o) const {
    return std::tie(rows, logit_rows, block_cap, greedy_tokens) < std::tie(o.rows, o.logit_rows, o.block_cap, o.greedy_tokens);
  }
};

class GraphCache {
 public:
  static constexpr int32_t kGraphBlockBucket = 16;  // graphs are re-captured every 16 blocks of context
  static constexpr size_t kMaxGraphs = 256;          // graphs kept (each holds its kernels' parameters)

  GraphCache() = default;
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;
  ~GraphCache() { clear(); }

  LaunchMode mode() const { return mode_; }
  // Starts a decode step of `key` on `stream`: replayed, captured or eager (see above). `generation`
  // identifies the addresses graphs may hold.
  void begin(const GraphKey& key, uint64_t generation, cudaStream_t stream);
  // Ends the step's capture (instantiating the graph) and launches the graph that stands in for the
  // step; eager: nothing. `op_failed`: an op of the captured step failed (the graph is dropped). An
  // error where the capture failed (capture_failed() then tells) or the launch did.
  Result<void> finish(cudaStream_t stream, bool op_failed);
  bool capture_failed() const { return capture_failed_; }
  // Ends a capture whose work never ran (the backend is going away).
  void abandon(cudaStream_t stream);
  void clear();

 private:
  struct Entry {
    cudaGraphExec_t exec = nullptr;
    bool seen = false;    // ran eagerly once (the arenas have grown to what it needs)
    bool broken = false;  // capture failed: always eager
    uint64_t last_used = 0;
  };
  void evict_oldest();

  LaunchMode mode_ = LaunchMode::kEager;
  std::map<GraphKey, Entry> graphs_;
  Entry* current_ = nullptr;
  uint64_t clock_ = 0, generation_ = 0;
  bool capture_failed_ = false;
};

}  // namespace deepinfer
