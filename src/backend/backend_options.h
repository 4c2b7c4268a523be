// Settings of one backend instance. They come from the engine configuration
// (di_engine_config_set_option) and belong to the backend they were given to: no process-wide switch.
// One table below defines each setting once; the parser, `deepinfer options` and the docs list
// (docs/options.md, checked by a test) all come from it.
#pragma once

#include "util/result.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer {

// X(name, type, default, help). Types: bool, int, string.
#define DI_BACKEND_OPTIONS(X)                                                                                                     \
  X(cuda_device, int, 0, "CUDA: ordinal of the GPU to use")                                                                       \
  X(fp32_weights, bool, false, "CUDA: keep weights in fp32 and run every product in fp32 (a reference mode)")                     \
  X(graphs, bool, true, "CUDA: replay decode steps as CUDA graphs")                                                               \
  X(pdl, bool, true, "CUDA: programmatic dependent launch of kernels (each overlaps the previous one's tail)")                    \
  X(zero_scratch, bool, false, "CUDA: zero-fill every scratch tensor (a diagnostic for uninitialised reads)")                     \
  X(batch_invariant, bool, false, "CUDA: each sequence's logits bitwise the same whatever else is in the batch (slower kernels)") \
  X(native_weights, bool, false, "CUDA: keep FP8 block-scaled matrices and MXFP4 experts as stored (the checkpoint's bytes on the device)")

struct BackendOptions {
#define DI_BACKEND_OPTION_FIELD(name, type, def, help) type name = def;
  DI_BACKEND_OPTIONS(DI_BACKEND_OPTION_FIELD)
#undef DI_BACKEND_OPTION_FIELD
};

// One row of an option table, for listings and docs.
struct OptionInfo {
  std::string_view key;
  std::string_view type;           // "bool", "int" or "string"
  std::string_view default_value;  // as text
  std::string_view help;
};

// The backend's rows of the table.
std::vector<OptionInfo> backend_option_infos();

// Sets `key` from its text form. kNotFound when the key is not a backend option (the caller may
// know it), kInvalidArgument when the value has the wrong form.
Result<void> set_backend_option(BackendOptions& options, std::string_view key, std::string_view value);

// A key or value quoted for messages (callers' text: shortened).
std::string quote_option_text(std::string_view s);

// Text forms shared by every option table: booleans 1/0, true/false, on/off, yes/no.
Result<bool> parse_bool_option(std::string_view key, std::string_view value);
Result<int64_t> parse_int_option(std::string_view key, std::string_view value, int64_t lo, int64_t hi);

}  // namespace deepinfer
