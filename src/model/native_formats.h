// How DeepSeek's released checkpoints store each weight of the model (the formats the CUDA backend is
// to keep on the device): FP8 E4M3 with one E8M0 scale per 128x128 block for the attention and
// shared-expert linears, MXFP4 (E2M1 pairs, one E8M0 scale per 32 along a row) for the routed
// experts, bf16 for the embedding, head, compressors, indexer weights and router gate, fp32 for the
// rest (norms, mixes, sinks, biases), int32 for the hash routing tables.
#pragma once

#include "model/deepseek_v4.h"

#include <cstdint>

namespace deepinfer {

enum class NativeFormat { kFp8Block, kMxfp4, kBf16, kF32, kI32 };

NativeFormat native_format(const DeepseekV4::WeightSpec& w);
// Bytes of the stored values and their scales.
uint64_t native_bytes(const DeepseekV4::WeightSpec& w);
// The layer a weight belongs to (its "layers.L." prefix), or -1 for the model's own (embedding, head...).
int layer_of(const DeepseekV4::WeightSpec& w);

}  // namespace deepinfer
