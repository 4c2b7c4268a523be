// The contract between the core library and the run-time loaded CUDA backend module
// (libdeepinfer-cuda.so.0). The module exports one C symbol, kCudaModuleSymbol, returning this table.
// Both sides come from the same build (the module checks nothing; the core compares `version` and
// `table_size` and refuses a module of another build), so C++ types may cross.
#pragma once

#include "backend/backend.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace deepinfer {

inline constexpr const char* kCudaModuleSymbol = "deepinfer_cuda_module";
inline constexpr const char* kCudaModuleFile = "libdeepinfer-cuda.so.0";

// Log messages of the module go to the core's log (one sink per process, the ABI's callback).
using CudaModuleLogSink = void (*)(int level, const char* message, size_t len);

struct CudaModuleTable {
  size_t table_size;    // sizeof(CudaModuleTable) of the module's build
  const char* version;  // the project version the module was built as
  void (*connect_log)(CudaModuleLogSink sink);
  Result<std::unique_ptr<Backend>> (*create)(const BackendOptions& options);
};

}  // namespace deepinfer

extern "C" {
using deepinfer_cuda_module_fn = const deepinfer::CudaModuleTable* (*)();
}
