// The exported entry of libdeepinfer-cuda.so.0 (see cuda_module.h).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_module.h"
#include "util/log.h"

namespace deepinfer {
namespace {

void connect_log(CudaModuleLogSink sink) {
  // Every message goes to the core, which filters by its own level (it may change later).
  set_log_level(LogLevel::kDebug);
  set_log_sink([sink](LogLevel level, std::string_view m) { sink(static_cast<int>(level), m.data(), m.size()); });
}

Result<std::unique_ptr<Backend>> create(const BackendOptions& options) { return create_cuda_backend(options); }

const CudaModuleTable kTable{sizeof(CudaModuleTable), DI_VERSION_STRING, connect_log, create};

}  // namespace
}  // namespace deepinfer

extern "C" __attribute__((visibility("default"))) const deepinfer::CudaModuleTable* deepinfer_cuda_module() {
  return &deepinfer::kTable;
}
