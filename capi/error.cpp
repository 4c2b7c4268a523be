// di_error, version and logging.
#include "capi_internal.h"
#include "util/log.h"
#include "util/process.h"

using namespace deepinfer;

// The C codes mirror deepinfer::Code one to one.
static_assert(DI_OK == static_cast<int>(Code::kOk) && DI_ERR_INVALID_ARGUMENT == static_cast<int>(Code::kInvalidArgument) &&
              DI_ERR_NOT_FOUND == static_cast<int>(Code::kNotFound) && DI_ERR_MODEL_FORMAT == static_cast<int>(Code::kModelFormat) &&
              DI_ERR_UNSUPPORTED == static_cast<int>(Code::kUnsupported) && DI_ERR_OUT_OF_MEMORY == static_cast<int>(Code::kOutOfMemory) &&
              DI_ERR_CAPACITY == static_cast<int>(Code::kCapacity) && DI_ERR_BUFFER_TOO_SMALL == static_cast<int>(Code::kBufferTooSmall) &&
              DI_ERR_CANCELLED == static_cast<int>(Code::kCancelled) && DI_ERR_GRAMMAR == static_cast<int>(Code::kGrammar) &&
              DI_ERR_IO == static_cast<int>(Code::kIo) && DI_ERR_BACKEND == static_cast<int>(Code::kBackend) &&
              DI_ERR_STATE == static_cast<int>(Code::kState) && DI_ERR_TIMEOUT == static_cast<int>(Code::kTimeout) &&
              DI_ERR_CLOSED == static_cast<int>(Code::kClosed) && DI_ERR_INVALID_HANDLE == static_cast<int>(Code::kInvalidHandle) &&
              DI_ERR_INTERNAL == static_cast<int>(Code::kInternal));

namespace deepinfer::capi {

namespace {
// Made when the library loads (memory is there then), never freed.
di_error* const g_out_of_memory = new di_error{DI_ERR_OUT_OF_MEMORY, "out of memory"};
}  // namespace

di_error* out_of_memory_error() { return g_out_of_memory; }

}  // namespace deepinfer::capi

extern "C" {

const char* di_version(void) { return DI_VERSION_STRING; }
uint32_t di_version_number(void) {
  static_assert(DI_VERSION_MAJOR < 256 && DI_VERSION_MINOR < 256 && DI_VERSION_PATCH < 256);
  return (uint32_t{DI_VERSION_MAJOR} << 16) | (uint32_t{DI_VERSION_MINOR} << 8) | uint32_t{DI_VERSION_PATCH};
}
uint32_t di_abi_version(void) { return DI_ABI_VERSION; }

di_code di_error_code(const di_error* err) { return err ? err->code : DI_OK; }
const char* di_error_message(const di_error* err) { return err ? err->message.c_str() : ""; }
void di_error_free(di_error* err) {
  if (err != capi::out_of_memory_error()) delete err;
}
const char* di_code_name(di_code code) { return code_name(static_cast<Code>(code)); }

di_error* di_set_log_level(di_log_level level) {
  if (level < DI_LOG_DEBUG || level > DI_LOG_OFF)
    return capi::to_c(Code::kInvalidArgument, "log level " + std::to_string(level) + " is not one of DI_LOG_*");
  set_log_level(static_cast<LogLevel>(level));
  return nullptr;
}

void di_set_log_callback(di_log_callback fn, void* user) {
  if (!fn) {
    set_log_sink(nullptr);
    return;
  }
  set_log_sink([fn, user](LogLevel level, std::string_view message) {
    if (process_exiting()) return;
    std::string copy(message);  // NUL-terminated for C callers
    fn(user, static_cast<int32_t>(level), copy.c_str(), copy.size());
  });
}

}  // extern "C"
