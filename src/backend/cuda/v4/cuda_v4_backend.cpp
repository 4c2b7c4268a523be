#include "backend/cuda/v4/cuda_v4_backend.h"

namespace deepinfer {

Result<std::unique_ptr<Backend>> CudaV4Backend::create(const BackendOptions& options, const CudaFeatures& features) {
  const int device = options.cuda_device;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    return make_error(Code::kUnsupported, "no CUDA device is present ({})", e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
  }
  if (device < 0 || device >= count) return make_error(Code::kInvalidArgument, "CUDA device {} does not exist ({} present)", device, count);
  std::unique_ptr<CudaV4Backend> b(new CudaV4Backend(device, options));
  DI_TRYV(b->init(features));
  DI_TRYV(b->init_v4());
  return std::unique_ptr<Backend>(std::move(b));
}

Result<void> CudaV4Backend::init_v4() {
  DI_TRY(pm, device_alloc<float>(kPostMixFloats, "hyper-connection mix partials"));
  post_mix_ = pm;
  return ok();
}

CudaV4Backend::~CudaV4Backend() {
  quiesce();  // (kernels of a dropped capture or still queued may read post_mix_)
  if (post_mix_) cudaFree(post_mix_);
}

Result<std::unique_ptr<Backend>> create_cuda_backend(const BackendOptions& options, const CudaFeatures& features) {
  return CudaV4Backend::create(options, features);
}

}  // namespace deepinfer
