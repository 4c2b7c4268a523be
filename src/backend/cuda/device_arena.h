// A bump allocator over device memory, reset as a whole. Allocations never move while in use: when
// the current chunk is full a new one is added, and the next reset merges the chunks into one big
// enough for the last round, so steady-state forwards never call cudaMalloc.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
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
    if (chunks_.empty() || chunks_.back().used + bytes > chunks_.back().cap) {
      const size_t cap = std::max({bytes, kMinChunk, capacity_});  // at least doubles the capacity
      void* p = nullptr;
      if (cudaMalloc(&p, cap) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
      }
      chunks_.push_back(Chunk{static_cast<char*>(p), cap, 0});
      capacity_ += cap;
    }
    Chunk& c = chunks_.back();
    void* p = c.base + c.used;
    c.used += bytes;
    return p;
  }

  // Forgets every allocation. The caller guarantees that no device work still uses them when the
  // chunks must be merged (`stream` is synchronized first).
  void reset(cudaStream_t stream) {
    if (chunks_.size() > 1) {
      size_t need = 0;
      for (const Chunk& c : chunks_) need += c.used;
      need = need + need / 4;
      cudaStreamSynchronize(stream);
      release();
      void* p = nullptr;
      if (cudaMalloc(&p, need) == cudaSuccess) {
        chunks_.push_back(Chunk{static_cast<char*>(p), need, 0});
        capacity_ = need;
      } else {
        cudaGetLastError();
      }
    }
    for (Chunk& c : chunks_) c.used = 0;
  }

  size_t capacity() const { return capacity_; }

 private:
  static constexpr size_t kMinChunk = size_t(16) << 20;
  struct Chunk {
    char* base;
    size_t cap, used;
  };

  void release() {
    for (const Chunk& c : chunks_) cudaFree(c.base);
    chunks_.clear();
    capacity_ = 0;
  }

  std::vector<Chunk> chunks_;
  size_t capacity_ = 0;
};

}  // namespace deepinfer
