// Per-op device timing of eager forwards (Backend::set_op_profiling / take_op_profile), and the two
// ceilings a benchmark compares against (Backend::measure_ceilings).
#pragma once

#include "backend/backend.h"
#include "launch.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <vector>

namespace deepinfer {

// Event pairs around each outermost op of the forwards run while profiling; summed per op name and
// weight shape when taken. The backend times behind a head-start kernel (kHeadStartNs on one
// multiprocessor) so that the host queues ahead of the device and event gaps are not host time.
class OpProfiler {
 public:
  static constexpr int64_t kHeadStartNs = 30'000'000;

  OpProfiler() = default;
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;
  ~OpProfiler();

  // Records the start of op `name` (n x k: the weight's shape for products, 0 otherwise) on
  // `stream`; the record's index, or -1 when no event could be made.
  int begin(const char* name, int64_t n, int64_t k, cudaStream_t stream);
  void end(int record, cudaStream_t stream);
  // The times recorded since the last take (the stream must have finished them), largest first.
  Result<std::vector<OpTime>> take();
  void clear();

 private:
  struct Record {
    const char* name;
    int64_t n, k;
    size_t start, end;
  };
  cudaEvent_t next_event();

  std::vector<Record> records_;
  std::vector<cudaEvent_t> events_;
  size_t used_ = 0;
};

// Device-to-device copy bandwidth and the bf16 matrix rate of `device`, timed on `stream` (idle)
// with `blas` (bound to it).
Result<DeviceCeilings> measure_device_ceilings(int device, kernels::Stream stream, cublasHandle_t blas);

}  // namespace deepinfer
