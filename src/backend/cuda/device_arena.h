// A bump allocator over device memory with stack-order marks, reset as a whole. Allocations never
// move while in use: when the chunks are full a new one is added, and a later reset merges the
// chunks into one big enough for the largest round seen, so steady-state forwards never call
// cudaMalloc and hand out the same addresses for the same sequence of requests (what replaying a
// captured CUDA graph relies on). generation() changes whenever any address may have changed.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace deepinfer {

class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() { release(); }

  // 256-byte aligned; nullptr when the device has no memory left.
  void* take(size_t bytes) {
    bytes = std::max<size_t>(256, (bytes + 255) & ~static_cast<size_t>(255));
    while (cur_ < chunks_.size() && chunks_[cur_].used + bytes > chunks_[cur_].cap) {
      ++cur_;
      if (cur_ < chunks_.size()) chunks_[cur_].used = 0;
    }
    if (cur_ == chunks_.size()) {
      const size_t cap = std::max({bytes, kMinChunk, capacity_});  // at least doubles the capacity
      void* p = nullptr;
      if (cudaMalloc(&p, cap) != cudaSuccess) {
        cudaGetLastError();
        if (!chunks_.empty()) cur_ = chunks_.size() - 1;
        return nullptr;
      }
      chunks_.push_back(Chunk{static_cast<char*>(p), cap, 0});
      capacity_ += cap;
      ++generation_;
    }
    Chunk& c = chunks_[cur_];
    void* p = c.base + c.used;
    c.used += bytes;
    peak_ = std::max(peak_, in_use());
    return p;
  }

  // Stack marks: release(m) frees everything taken after mark() returned m.
  std::pair<size_t, size_t> mark() const {
    return {cur_, cur_ < chunks_.size() ? chunks_[cur_].used : 0};
  }
  void release(std::pair<size_t, size_t> m) {
    if (chunks_.empty() || m.first >= chunks_.size()) return;
    for (size_t i = m.first + 1; i < chunks_.size(); ++i) chunks_[i].used = 0;
    cur_ = m.first;
    chunks_[cur_].used = std::min(m.second, chunks_[cur_].cap);
  }

  // Forgets every allocation. With several chunks and `may_merge`, first waits for `stream` and
  // merges them into one chunk of 1.25 x the largest use seen (the caller guarantees that no device
  // work on other streams still uses them). Without may_merge (during graph capture) the chunks
  // stay as they are.
  void reset(cudaStream_t stream, bool may_merge = true) {
    if (chunks_.size() > 1 && may_merge) {
      const size_t need = peak_ + peak_ / 4;
      cudaStreamSynchronize(stream);
      release();
      void* p = nullptr;
      if (cudaMalloc(&p, need) == cudaSuccess) {
        chunks_.push_back(Chunk{static_cast<char*>(p), need, 0});
        capacity_ = need;
      } else {
        cudaGetLastError();
      }
      ++generation_;
    }
    for (Chunk& c : chunks_) c.used = 0;
    cur_ = 0;
  }

  size_t capacity() const { return capacity_; }
  uint64_t generation() const { return generation_; }

 private:
  static constexpr size_t kMinChunk = size_t(16) << 20;
  struct Chunk {
    char* base;
    size_t cap, used;
  };

  // Bytes from the first chunk's base to the current end, counting full earlier chunks.
  size_t in_use() const {
    size_t n = 0;
    for (size_t i = 0; i < cur_ && i < chunks_.size(); ++i) n += chunks_[i].cap;
    if (cur_ < chunks_.size()) n += chunks_[cur_].used;
    return n;
  }

  void release() {
    for (const Chunk& c : chunks_) cudaFree(c.base);
    chunks_.clear();
    capacity_ = 0;
    cur_ = 0;
  }

  std::vector<Chunk> chunks_;
  size_t cur_ = 0;
  size_t capacity_ = 0;
  size_t peak_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace deepinfer
