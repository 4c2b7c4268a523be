// The CUDA backend's factory inside the module (and in the GPU tests, which link it directly).
#pragma once

#include "backend/backend.h"

namespace deepinfer {

// Device features the backend may use where the device has them. Kernels are chosen by the
// situation (the device, fp32 mode, the shapes, decode or prefill); the GPU tests turn a feature off
// to run on any device the fallbacks an older one takes.
struct CudaFeatures {
  bool wgmma = true;  // Hopper's warpgroup MMA kernels (an sm_90a device): prefill attention, indexer and experts
};

// kUnsupported when no CUDA device or driver is present; kInvalidArgument for a device ordinal that
// does not exist; kBackend when the device fails to start.
Result<std::unique_ptr<Backend>> create_cuda_backend(const BackendOptions& options, const CudaFeatures& features = {});

}  // namespace deepinfer
