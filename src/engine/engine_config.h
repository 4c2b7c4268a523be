// What an Engine is built from (the C ABI's di_engine_config maps onto this 1:1).
#pragma once

#include "backend/backend_options.h"
#include "model/deepseek_v4.h"

#include <cstdint>
#include <optional>
#include <string>

namespace deepinfer {

enum class Device { kAuto, kCpu, kCuda };

struct EngineConfig {
  std::string model_path;
  Device device = Device::kAuto;
  int32_t threads = 0;              // CPU threads; 0 = one per core
  int32_t max_sequences = 64;       // sequences with state at once (state slots)
  int64_t max_context = 0;          // tokens per sequence; 0 = the model's max_position_embeddings
  uint64_t state_memory = 0;        // bytes of the block pool; 0 = automatic
  double state_memory_fraction = 0.9;  // automatic on a GPU: this share of its free memory
  int32_t max_batched_tokens = 2048;
  std::optional<uint64_t> seed;     // the engine's seed source for generations without a seed
  // Build the model from its config alone (model_path: a directory with config.json, or the file)
  // with random weights made on the device: benchmarks of a model shape without its checkpoint.
  bool dummy_weights = false;
  // Copy each step's logits rows out of the backend and sample them on the engine's sample pool,
  // instead of Backend::sample_rows where they are (on the GPU for the CUDA backend). A diagnostic:
  // the CPU backend draws the same bits either way; the GPU the same tokens but within rounding of a
  // boundary of the distribution.
  bool host_sampling = false;
  // The CUDA backend module to load ("": the default search, see make_cuda_backend).
  std::string cuda_module;
  BackendOptions backend;
  // Told the bytes loaded as the model loads; returning false aborts the load (kCancelled).
  LoadProgress progress;
};

}  // namespace deepinfer

namespace deepinfer {

// di_engine_config_set_option: a backend option (backend_options.h) or one of the engine's own
// (cuda_module, dummy_weights, host_sampling). kInvalidArgument names an unknown key or a malformed value.
Result<void> set_engine_option(EngineConfig& config, std::string_view key, std::string_view value);
// Every key with its type, default and help: the engine's, then the backend's.
std::vector<OptionInfo> engine_option_infos();

}  // namespace deepinfer
