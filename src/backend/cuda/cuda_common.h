// Small pieces every file of the CUDA backend uses: the device weight, error texts, device
// allocation and upload helpers.
#pragma once

#include "backend/backend.h"
#include "dequantize.h"
#include "launch.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace deepinfer {

namespace kn = kernels;

// Matrices of at most this many elements keep an fp32 copy next to the bf16 one: the ops that want
// fp32 weights (hyper-connection mixes, router gate, compressor position bias) use it.
inline constexpr int64_t kSmallMatrix = int64_t(1) << 20;

// A weight on the device: bf16 (matrices), fp32 (vectors, small matrices, everything in fp32 mode)
// or int32 (tables), as the backend chose at upload. With the native_weights option an FP8
// block-scaled matrix keeps its stored bytes instead of the bf16 copy: `stored` describes them
// (its pointers are stored_values and stored_scale).
struct CudaWeight final : DeviceWeight {
  float* f32 = nullptr;
  uint16_t* b16 = nullptr;
  int32_t* i32 = nullptr;
  uint8_t* stored_values = nullptr;
  void* stored_scale = nullptr;
  kn::QuantizedWeight stored;  // (a stack: one expert's matrix; the others follow it, values and scales alike)
  kn::StoredFormat stored_format = kn::StoredFormat::kFp8Block;
  // Whether bf16 products can take it: its bf16 copy, or stored bytes (dequantized per call).
  bool has_matrix() const { return b16 || stored_values; }
  ~CudaWeight() override {
    if (f32) cudaFree(f32);
    if (b16) cudaFree(b16);
    if (i32) cudaFree(i32);
    if (stored_values) cudaFree(stored_values);
    if (stored_scale) cudaFree(stored_scale);
  }
};

inline const CudaWeight& cw(const DeviceWeight& w) { return static_cast<const CudaWeight&>(w); }

Error cuda_error(cudaError_t e, const char* what);
const char* blas_name(cublasStatus_t s);
Error blas_error(cublasStatus_t s, const char* what);

// `count` elements of T on the device (at least one); kOutOfMemory naming `what` when there is no room.
Result<void*> device_alloc_bytes(size_t bytes, const std::string& what);
template <class T>
Result<T*> device_alloc(size_t count, const std::string& what) {
  DI_TRY(p, device_alloc_bytes(std::max<size_t>(count, 1) * sizeof(T), what));
  return static_cast<T*>(p);
}

// Synchronous host-to-device copy (uploads of weights and tables).
Result<void> copy_to_device(void* dst, const void* src, size_t bytes, const std::string& what);

std::vector<uint16_t> to_bf16(const float* f, size_t n);

}  // namespace deepinfer
