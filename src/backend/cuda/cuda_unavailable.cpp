// make_cuda_backend in builds without CUDA.
#include "backend/backend.h"

namespace deepinfer {

Result<std::unique_ptr<Backend>> make_cuda_backend(int device, bool) {
  return make_error(Code::kUnsupported, "this build of DeepInfer has no CUDA backend (device {} requested)", device);
}

}  // namespace deepinfer
