#include "backend/cuda/graphs.h"

#include "backend/cuda/cuda_common.h"

namespace deepinfer {

void GraphCache::begin(const GraphKey& key, uint64_t generation, cudaStream_t stream) {
  mode_ = LaunchMode::kEager;
  capture_failed_ = false;
  if (generation != generation_) {  // an address a graph holds may have changed
    clear();
    generation_ = generation;
  }
  Entry& g = graphs_[key];
  g.last_used = ++clock_;
  if (graphs_.size() > kMaxGraphs) evict_oldest();
  if (g.exec) {
    mode_ = LaunchMode::kReplay;
    current_ = &g;
  } else if (g.seen && !g.broken) {  // the eager run sized the arenas: capture this one
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) != cudaSuccess) {
      cudaGetLastError();
      g.broken = true;
    } else {
      mode_ = LaunchMode::kCapture;
      current_ = &g;
    }
  }
  g.seen = true;
}

Result<void> GraphCache::finish(cudaStream_t stream, bool op_failed) {
  const LaunchMode m = mode_;
  if (m == LaunchMode::kEager) return ok();
  mode_ = LaunchMode::kEager;
  Entry* g = current_;
  current_ = nullptr;
  if (m == LaunchMode::kCapture) {
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(stream, &graph);
    if (e == cudaSuccess && graph && !op_failed) e = cudaGraphInstantiate(&g->exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (e != cudaSuccess || op_failed || !g->exec) {
      cudaGetLastError();
      g->broken = true;
      if (g->exec) cudaGraphExecDestroy(g->exec);
      g->exec = nullptr;
      // The captured work never ran: this forward is lost.
      capture_failed_ = true;
      return e != cudaSuccess ? cuda_error(e, "capturing a decode step as a CUDA graph")
                              : make_error(Code::kBackend, "capturing a decode step as a CUDA graph failed");
    }
  }
  const cudaError_t e = cudaGraphLaunch(g->exec, stream);
  if (e != cudaSuccess) return cuda_error(e, "launching a decode graph");
  return ok();
}

void GraphCache::abandon(cudaStream_t stream) {
  if (mode_ == LaunchMode::kCapture) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(stream, &g);
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
  }
  mode_ = LaunchMode::kEager;
  current_ = nullptr;
}

// Batch sizes and context buckets come and go over a long run: the graph used longest ago goes
// (never the current one, which was just used).
void GraphCache::evict_oldest() {
  auto oldest = graphs_.begin();
  for (auto it = graphs_.begin(); it != graphs_.end(); ++it)
    if (it->second.last_used < oldest->second.last_used) oldest = it;
  if (oldest->second.exec) cudaGraphExecDestroy(oldest->second.exec);
  graphs_.erase(oldest);
}

void GraphCache::clear() {
  for (auto& [k, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  graphs_.clear();
  current_ = nullptr;
}

}  // namespace deepinfer
