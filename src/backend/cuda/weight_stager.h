// Weight uploads of the CUDA backend: host bytes (a mapped checkpoint) stream to the device through
// page-locked staging buffers, the host copy of one chunk overlapping the DMA of the one before, on
// the backend's stream; FP8 / MXFP4 weights travel in their stored bytes and become bf16 / fp32 on
// the device (kernels/dequantize.h) instead of on one host thread.
#pragma once

#include "backend/cuda/cuda_common.h"
#include "backend/weight_source.h"

namespace deepinfer {

// The kernels' description of w's stored bytes (FP8 block or MXFP4) at `values` / `scale` on the device.
kn::QuantizedWeight quantized_weight(const WeightSource& w, const void* values, const void* scale);

class WeightStager {
 public:
  explicit WeightStager(kn::Stream s) : stream_(s) {}
  ~WeightStager();
  WeightStager(const WeightStager&) = delete;
  WeightStager& operator=(const WeightStager&) = delete;

  // Queues a copy of `bytes` from host `src` to device `dst`; `src` may change once it returns.
  Result<void> copy(void* dst, const void* src, size_t bytes, const std::string& what);
  // Queues w (FP8 block or MXFP4) as rows x cols values into b16 and/or f32 (either may be null).
  Result<void> dequantize(const WeightSource& w, uint16_t* b16, float* f32);
  // Waits for what was queued; frees the device staging of stored bytes.
  Result<void> finish(const std::string& what);
  // Frees the page-locked buffers too (loading is over; the next upload makes them again).
  void release();

  static constexpr size_t kChunkBytes = size_t{16} << 20;
  static constexpr int kBuffers = 3;

 private:
  Result<void> make_buffers();

  kn::Stream stream_;
  void* pinned_[kBuffers] = {};
  cudaEvent_t done_[kBuffers] = {};
  int next_ = 0;
  void* stored_ = nullptr;  // device copy of a weight's stored bytes (values, then scale)
  size_t stored_bytes_ = 0;
};

}  // namespace deepinfer
