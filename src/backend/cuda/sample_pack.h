// The host side of sampling on the device (CudaDevice::sample_rows, sampling.cpp): each RowSampling packed for the
// kernels of kernels/sampling.h (a row spec, the sorted edits of steps 2-5, the grammar mask) into
// one page-locked upload, and the kernels' results unpacked into what sample_row returns.
#pragma once

#include "backend/row_sampling.h"
#include "sampling.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace deepinfer {

class SamplePack {
 public:
  SamplePack() = default;
  SamplePack(const SamplePack&) = delete;
  SamplePack& operator=(const SamplePack&) = delete;
  ~SamplePack();

  // Packs `rows` of `vocab` logits. A row that sample_row rejects before it looks at the logits gets
  // its error here (and is skipped by the kernels); one it rejects after the NaN check (a bitmask of
  // the wrong size) gets it unless the device finds a NaN or +inf. Fails only where page-locked
  // memory runs out. Call only once the previous results have been read (the buffers are reused).
  Result<void> pack(std::span<const RowSampling> rows, int64_t vocab);

  // Copies the upload to the device on stream `copy`, beside the forward on stream `run` (off the
  // step's critical path), and makes `run` wait for it; *device: the copy. Call after pack.
  cudaError_t upload_beside(cudaStream_t copy, cudaStream_t run, const void** device);
  // The upload's layout (specs, then edits, then mask words, at these byte offsets) and the results'
  // buffer.
  size_t edits_offset() const { return edits_at_; }
  size_t masks_offset() const { return masks_at_; }
  kernels::SampleOut* results() { return static_cast<kernels::SampleOut*>(out_); }
  size_t results_bytes() const { return notes_.size() * sizeof(kernels::SampleOut); }
  // Whether some row's logits change before the choice (kRowProcessed: mask, allowed ids, edits), so
  // the kernels need work rows.
  bool any_processed() const { return any_processed_; }

  // out[i]: row i's result from results().
  void unpack(std::vector<Result<SampleResult>>& out) const;

 private:
  struct RowNote {
    std::optional<Error> now;       // the row was not sampled
    std::optional<Error> deferred;  // unless the row holds a NaN or +inf
    int32_t position = 0;           // tokens generated so far (messages)
    bool logprobs = false;
  };

  Result<void> reserve(void*& buffer, size_t& capacity, size_t bytes, const char* what);
  void add_edits(const RowSampling& row);

  int64_t vocab_ = 0;
  std::vector<kernels::SampleRowSpec> specs_;
  std::vector<kernels::SampleEdit> edits_;
  std::vector<RowNote> notes_;
  void* in_ = nullptr;  // page-locked
  size_t in_capacity_ = 0, in_used_ = 0, edits_at_ = 0, masks_at_ = 0;
  void* in_device_ = nullptr;  // the upload's device copy (its own: not the temporaries a forward in flight uses)
  size_t in_device_capacity_ = 0;
  cudaEvent_t uploaded_ = nullptr;
  void* out_ = nullptr;  // page-locked SampleOut
  size_t out_capacity_ = 0;
  bool any_processed_ = false;
};

}  // namespace deepinfer
