// The CUDA backend's factory inside the module (and in the GPU tests, which link it directly).
#pragma once

#include "backend/backend.h"

namespace deepinfer {

// kUnsupported when no CUDA device or driver is present; kInvalidArgument for a device ordinal that
// does not exist; kBackend when the device fails to start.
Result<std::unique_ptr<Backend>> create_cuda_backend(const BackendOptions& options);

}  // namespace deepinfer
