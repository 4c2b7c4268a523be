#include "backend/cuda/profiling.h"

#include "backend/cuda/cuda_common.h"
#include "elementwise.h"

#include <algorithm>
#include <map>

namespace deepinfer {

OpProfiler::~OpProfiler() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void OpProfiler::clear() {
  records_.clear();
  used_ = 0;
}

cudaEvent_t OpProfiler::next_event() {
  if (used_ == events_.size()) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    events_.push_back(e);
  }
  return events_[used_++];
}

int OpProfiler::begin(const char* name, int64_t n, int64_t k, cudaStream_t stream) {
  if (!next_event()) return -1;
  const size_t start = used_ - 1;
  if (cudaEventRecord(events_[start], stream) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  records_.push_back(Record{name, n, k, start, start});
  return static_cast<int>(records_.size()) - 1;
}

void OpProfiler::end(int i, cudaStream_t stream) {
  if (!next_event()) {
    records_.erase(records_.begin() + i);
    return;
  }
  records_[i].end = used_ - 1;
  if (cudaEventRecord(events_[records_[i].end], stream) != cudaSuccess) cudaGetLastError();
}

Result<std::vector<OpTime>> OpProfiler::take() {
  std::map<std::string, OpTime> by;
  for (const Record& r : records_) {
    float ms = 0.0f;
    cudaError_t e = cudaEventElapsedTime(&ms, events_[r.start], events_[r.end]);
    if (e != cudaSuccess) return cuda_error(e, "reading op timings");
    std::string label = r.name;
    if (r.n > 0) label += fmt::format(" {}x{}", r.n, r.k);
    OpTime& t = by[label];
    t.op = label;
    ++t.calls;
    t.ms += ms;
  }
  clear();
  std::vector<OpTime> out;
  for (auto& [k, v] : by) out.push_back(v);
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  return out;
}

Result<DeviceCeilings> measure_device_ceilings(int device, kn::Stream stream, cublasHandle_t blas) {
  DeviceCeilings c;
  cudaDeviceProp prop{};
  cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) return cuda_error(e, "reading device properties");
  c.device = prop.name;
  c.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  cudaEvent_t ev[2] = {nullptr, nullptr};
  for (auto& x : ev)
    if ((e = cudaEventCreate(&x)) != cudaSuccess) return cuda_error(e, "creating events");
  auto median_ms = [&](auto&& body, int reps) -> Result<double> {
    std::vector<float> t;
    for (int i = 0; i < reps + 3; ++i) {
      cudaEventRecord(ev[0], stream.id);
      body();
      cudaEventRecord(ev[1], stream.id);
      cudaError_t r = cudaEventSynchronize(ev[1]);
      if (r != cudaSuccess) return cuda_error(r, "timing a ceiling");
      float ms = 0;
      cudaEventElapsedTime(&ms, ev[0], ev[1]);
      if (i >= 3) t.push_back(ms);  // 3 warm-ups
    }
    std::sort(t.begin(), t.end());
    return static_cast<double>(t[t.size() / 2]);
  };
  Result<void> status = ok();
  // Copy: two 1 GiB buffers of random data (bytes read + written per second).
  {
    const size_t bytes = size_t(1) << 30;
    void *a = nullptr, *b = nullptr;
    e = cudaMalloc(&a, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&b, bytes);
    if (e == cudaSuccess) e = kn::fill_random(static_cast<float*>(a), nullptr, bytes / 4, 0.0f, 1.0f, 1, stream);
    if (e == cudaSuccess) {
      auto ms = median_ms([&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream.id); }, 20);
      if (ms) c.copy_bytes_per_s = 2.0 * static_cast<double>(bytes) / (ms.value() * 1e-3);
      else status = ms.error();
    } else {
      status = cuda_error(e, "copy ceiling buffers");
    }
    if (a) cudaFree(a);
    if (b) cudaFree(b);
    cudaGetLastError();
  }
  // Matrix rate: 8192^3 bf16 product, fp32 accumulation, bf16 out, random operands.
  if (status) {
    const int n = 8192;
    const size_t elems = static_cast<size_t>(n) * n;
    uint16_t *a = nullptr, *b = nullptr, *cm = nullptr;
    e = cudaMalloc(&a, elems * 2);
    if (e == cudaSuccess) e = cudaMalloc(&b, elems * 2);
    if (e == cudaSuccess) e = cudaMalloc(&cm, elems * 2);
    if (e == cudaSuccess) e = kn::fill_random(nullptr, a, static_cast<int64_t>(elems), 0.0f, 1.0f, 2, stream);
    if (e == cudaSuccess) e = kn::fill_random(nullptr, b, static_cast<int64_t>(elems), 0.0f, 1.0f, 3, stream);
    if (e == cudaSuccess) {
      const float one = 1.0f, zero = 0.0f;
      cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
      auto ms = median_ms(
          [&] {
            bs = cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n, &zero, cm,
                              CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
          },
          10);
      if (bs != CUBLAS_STATUS_SUCCESS) status = make_error(Code::kBackend, "cuBLAS: matrix-rate product: {}", blas_name(bs));
      else if (ms) c.bf16_flops = 2.0 * n * static_cast<double>(n) * n / (ms.value() * 1e-3);
      else status = ms.error();
    } else {
      status = cuda_error(e, "matrix ceiling buffers");
    }
    if (a) cudaFree(a);
    if (b) cudaFree(b);
    if (cm) cudaFree(cm);
    cudaGetLastError();
  }
  for (auto& x : ev) cudaEventDestroy(x);
  if (!status) return status.error();
  return c;
}

}  // namespace deepinfer
