// make_cuda_backend: finds and opens the CUDA backend module (cuda_module.h) once per process, so
// that the core library itself links no CUDA library and runs on machines without one.
#include "backend/backend.h"
#include "backend/cuda_module.h"
#include "util/log.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

void forward_log(int level, const char* message, size_t len) {
  log_message(static_cast<LogLevel>(level), std::string_view(message, len));
}

// Where the module is looked for when no path is given: beside the object holding this code (the
// library, or a program linking the engine statically), and in ../lib from there (a program in bin/).
std::vector<fs::path> default_candidates() {
  std::vector<fs::path> dirs;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&forward_log), &info) && info.dli_fname && info.dli_fname[0]) {
    std::error_code ec;
    fs::path self = fs::weakly_canonical(fs::path(info.dli_fname), ec);
    if (!ec) {
      dirs.push_back(self.parent_path() / kCudaModuleFile);
      dirs.push_back(self.parent_path().parent_path() / "lib" / kCudaModuleFile);
    }
  }
  return dirs;
}

struct LoadedModule {
  const CudaModuleTable* table = nullptr;
  std::string path;
};

Result<LoadedModule> open_module(const std::string& path, bool search) {
  // Modules stay loaded for the life of the process: backends made by them may live until exit.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    if (search)
      return make_error(Code::kUnsupported, "the CUDA backend module {} was not found ({})", path, why ? why : "dlopen failed");
    return make_error(Code::kUnsupported,
                      "the CUDA backend module {} cannot be loaded: {} (it needs the CUDA 13 runtime and cuBLAS libraries)", path,
                      why ? why : "dlopen failed");
  }
  auto entry = reinterpret_cast<deepinfer_cuda_module_fn>(dlsym(handle, kCudaModuleSymbol));
  if (!entry) return make_error(Code::kUnsupported, "{} is not a DeepInfer CUDA backend module (no {})", path, kCudaModuleSymbol);
  const CudaModuleTable* table = entry();
  if (!table || table->table_size != sizeof(CudaModuleTable) || std::strcmp(table->version, DI_VERSION_STRING) != 0)
    return make_error(Code::kUnsupported, "the CUDA backend module {} is of version {}, this library of {}", path,
                      table ? table->version : "?", DI_VERSION_STRING);
  table->connect_log(forward_log);
  return LoadedModule{table, path};
}

Result<LoadedModule> find_module(const std::string& module_path) {
  if (!module_path.empty()) return open_module(module_path, false);
  for (const fs::path& p : default_candidates()) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return open_module(p.string(), false);
  }
  // The dynamic loader's search path (LD_LIBRARY_PATH, the system's library folders).
  auto found = open_module(kCudaModuleFile, true);
  if (!found) {
    std::string where;
    for (const fs::path& p : default_candidates()) where += p.parent_path().string() + ", ";
    return make_error(Code::kUnsupported, "{} (looked in {}and the dynamic loader's search path)", found.error().message, where);
  }
  return found;
}

}  // namespace

Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& options, const std::string& module_path) {
  // A module opened with dlopen belongs to the process: opened once per path, kept until exit.
  static std::mutex mu;  // process-wide: guards `loaded`
  static auto& loaded = *new std::map<std::string, Result<LoadedModule>>();  // process-wide: by requested path; never destroyed
  const LoadedModule* module = nullptr;
  {
    std::lock_guard lock(mu);
    auto it = loaded.find(module_path);
    if (it == loaded.end()) it = loaded.emplace(module_path, find_module(module_path)).first;
    if (!it->second) return it->second.error();
    module = &it->second.value();
  }
  log(LogLevel::kDebug, "CUDA backend module: {}", module->path);
  return module->table->create(options);
}

}  // namespace deepinfer
