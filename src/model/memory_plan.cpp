#include "model/memory_plan.h"

#include "model/deepseek_v4.h"
#include "model/model_cost.h"
#include "model/native_formats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace deepinfer {

double MemoryPlan::state_bytes(int64_t context) const {
  const double blocks = block_tokens > 0 ? std::ceil(static_cast<double>(context) / block_tokens) : 0;
  return slot_bytes + blocks * block_bytes;
}

Result<MemoryPlan> plan_memory(const ModelConfig& config, Backend& backend) {
  DI_TRY(specs, DeepseekV4::weight_specs(config, backend));
  MemoryPlan p;
  p.layer_bytes.assign(static_cast<size_t>(config.num_layers), 0.0);
  for (const auto& w : specs) {
    const double b = static_cast<double>(native_bytes(w));
    switch (native_format(w)) {
      case NativeFormat::kFp8Block: p.fp8 += b; break;
      case NativeFormat::kMxfp4: p.mxfp4 += b; break;
      case NativeFormat::kBf16: p.bf16 += b; break;
      case NativeFormat::kF32: p.f32 += b; break;
      case NativeFormat::kI32: p.i32 += b; break;
    }
    const int l = layer_of(w);
    (l >= 0 && l < config.num_layers ? p.layer_bytes[static_cast<size_t>(l)] : p.global_bytes) += b;
  }
  p.bf16_store = ModelCost(config).stored_weight_bytes();
  const StateLayout layout = DeepseekV4::state_layout_of(config);
  p.slot_bytes = static_cast<double>(layout.slot_floats) * 4;
  p.block_bytes = static_cast<double>(layout.block_floats) * 4;
  p.block_tokens = layout.block_tokens;
  return p;
}

namespace {

std::string gb(double b) { return fmt::format("{:.2f}", b / 1e9); }

}  // namespace

std::vector<std::string> describe_memory_plan(const MemoryPlan& p, double device_bytes, double reserve_bytes,
                                              const std::vector<int64_t>& contexts) {
  std::vector<std::string> out;
  const double weights = p.weight_bytes();
  out.push_back("| weights (released formats) | GB |");
  out.push_back("|---|---:|");
  out.push_back(fmt::format("| FP8 E4M3 linears with 128x128 block scales | {} |", gb(p.fp8)));
  out.push_back(fmt::format("| MXFP4 routed experts with their scales | {} |", gb(p.mxfp4)));
  out.push_back(fmt::format("| bf16 (embedding, head, compressors, indexer weights, gate) | {} |", gb(p.bf16)));
  out.push_back(fmt::format("| fp32 and int32 (norms, mixes, sinks, biases, hash tables) | {} |", gb(p.f32 + p.i32)));
  out.push_back(fmt::format("| **total** (per layer {} - {}, outside the layers {}) | **{}** |",
                            gb(*std::min_element(p.layer_bytes.begin(), p.layer_bytes.end())),
                            gb(*std::max_element(p.layer_bytes.begin(), p.layer_bytes.end())), gb(p.global_bytes), gb(weights)));
  out.push_back(fmt::format("| the same model as the CUDA backend stores it today (bf16 matrices) | {} |", gb(p.bf16_store)));
  out.push_back("");
  std::string ctx_head = "| |", ctx_rule = "|---|", ctx_row = "| model state of one sequence (GB) |";
  for (int64_t c : contexts) {
    ctx_head += fmt::format(" context {} |", c);
    ctx_rule += "---:|";
    ctx_row += fmt::format(" {:.3f} |", p.state_bytes(c) / 1e9);
  }
  // Devices: as few as hold the weights with the reserve, consecutive layers split about evenly by
  // bytes (the model's own weights counted on the first).
  const double room = device_bytes - reserve_bytes;
  const size_t layers = p.layer_bytes.size();
  int n = 1;
  std::vector<std::pair<int, int>> stages;  // first and last layer of each device
  std::vector<double> used;
  for (; n <= 64; ++n) {
    stages.assign(static_cast<size_t>(n), {0, -1});
    used.assign(static_cast<size_t>(n), 0.0);
    used[0] = p.global_bytes;
    size_t d = 0;
    for (size_t l = 0; l < layers; ++l) {
      const double b = p.layer_bytes[l];
      if (d + 1 < static_cast<size_t>(n) && stages[d].second >= stages[d].first && used[d] + b > weights / n) {
        stages[++d].first = static_cast<int>(l);
      }
      used[d] += b;
      stages[d].second = static_cast<int>(l);
    }
    if (std::all_of(used.begin(), used.end(), [&](double u) { return u <= room; })) break;
  }
  out.push_back(fmt::format("On devices of {} GB, keeping {} GB each for activations and workspaces: the weights need {} device{}.",
                            gb(device_bytes), gb(reserve_bytes), n, n == 1 ? "" : "s"));
  if (n > 1) {  // what one device alone would hold
    double one = p.global_bytes;
    size_t l = 0;
    while (l < layers && one + p.layer_bytes[l] <= room) one += p.layer_bytes[l++];
    out.push_back(fmt::format("One device holds the model's own weights and layers 0-{} ({} GB); layers {}-{} ({} GB) need another.",
                              static_cast<int64_t>(l) - 1, gb(one), l, layers - 1, gb(weights - one)));
  }
  out.push_back("");
  out.push_back(ctx_head);
  out.push_back(ctx_rule);
  out.push_back(ctx_row);
  for (int d = 0; d < n; ++d) {
    const double free_bytes = room - used[static_cast<size_t>(d)];
    std::string row = fmt::format("| device {}: layers {}-{}, weights {} GB; sequences that fit |", d, stages[static_cast<size_t>(d)].first,
                                  stages[static_cast<size_t>(d)].second, gb(used[static_cast<size_t>(d)]));
    // A sequence's state is spread over the devices with their layers (taken as even per layer).
    const int held = stages[static_cast<size_t>(d)].second - stages[static_cast<size_t>(d)].first + 1;
    for (int64_t c : contexts) {
      const double per_seq = p.state_bytes(c) * held / static_cast<double>(std::max<size_t>(layers, 1));
      row += fmt::format(" {} |", per_seq > 0 ? static_cast<int64_t>(std::max(0.0, free_bytes) / per_seq) : 0);
    }
    out.push_back(row);
  }
  return out;
}

}  // namespace deepinfer
