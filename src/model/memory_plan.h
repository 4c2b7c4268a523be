// What a model needs in device memory with its weights in the released formats (native_formats.h):
// the weights by format and by layer, the model state one sequence needs at a context, and how that
// fits on devices of a given size: on one, or split by layers across several (pipeline stages).
// `deepinfer bench --memory-plan` prints it.
#pragma once

#include "backend/backend.h"
#include "model/config.h"

#include <string>
#include <vector>

namespace deepinfer {

struct MemoryPlan {
  double global_bytes = 0;                                // embedding, head, final norm, the head's mix
  std::vector<double> layer_bytes;                        // each layer's weights
  double fp8 = 0, mxfp4 = 0, bf16 = 0, f32 = 0, i32 = 0;  // by format, scales with their values
  double bf16_store = 0;                                  // the CUDA backend's store today (bf16 matrices, ModelCost)
  double slot_bytes = 0;                                  // state of one sequence whatever its length
  double block_bytes = 0;                                 // state per block of block_tokens positions
  int block_tokens = 0;

  double weight_bytes() const { return fp8 + mxfp4 + bf16 + f32 + i32; }
  double state_bytes(int64_t context) const;  // one sequence holding `context` tokens
};

// `backend` only takes the small tables the model derives while its weights are listed.
Result<MemoryPlan> plan_memory(const ModelConfig& config, Backend& backend);

// Markdown: the plan on devices of `device_bytes`, keeping `reserve_bytes` on each for activations
// and workspaces; sequences that fit at each of `contexts`.
std::vector<std::string> describe_memory_plan(const MemoryPlan& plan, double device_bytes, double reserve_bytes,
                                              const std::vector<int64_t>& contexts);

}  // namespace deepinfer
