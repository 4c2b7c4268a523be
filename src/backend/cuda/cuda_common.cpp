#include "backend/cuda/cuda_common.h"

#include "util/dtype.h"

namespace deepinfer {

Error cuda_error(cudaError_t e, const char* what) { return make_error(Code::kBackend, "CUDA: {}: {}", what, cudaGetErrorString(e)); }

const char* blas_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "error";
  }
}

Error blas_error(cublasStatus_t s, const char* what) { return make_error(Code::kBackend, "cuBLAS: {}: {}", what, blas_name(s)); }

Result<void*> device_alloc_bytes(size_t bytes, const std::string& what) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return make_error(Code::kOutOfMemory, "CUDA: cannot allocate {} bytes for {}: {}", bytes, what, cudaGetErrorString(e));
  }
  return p;
}

Result<void> copy_to_device(void* dst, const void* src, size_t bytes, const std::string& what) {
  if (bytes == 0) return ok();
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) return make_error(Code::kBackend, "CUDA: uploading {}: {}", what, cudaGetErrorString(e));
  return ok();
}

std::vector<uint16_t> to_bf16(const float* f, size_t n) {
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(f[i]);
  return out;
}

}  // namespace deepinfer
