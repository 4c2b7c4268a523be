#include "model/native_formats.h"

#include <cstdlib>
#include <string>

namespace deepinfer {
namespace {

const char* const kFp8[] = {".attn.wq_a.weight",
                            ".attn.wq_b.weight",
                            ".attn.wkv.weight",
                            ".attn.wo_a.weight",
                            ".attn.wo_b.weight",
                            ".attn.indexer.wq_b.weight",
                            ".ffn.shared_experts.w1.weight",
                            ".ffn.shared_experts.w2.weight",
                            ".ffn.shared_experts.w3.weight"};
const char* const kBf16[] = {
    "embed.weight",     "head.weight", ".compressor.wkv.weight", ".compressor.wgate.weight", ".indexer.weights_proj.weight",
    ".ffn.gate.weight", "norm.weight"};

}  // namespace

NativeFormat native_format(const DeepseekV4::WeightSpec& w) {
  using Kind = DeepseekV4::WeightSpec::Kind;
  if (w.kind == Kind::kIntTable) return NativeFormat::kI32;
  if (w.kind == Kind::kExpert) return NativeFormat::kMxfp4;
  for (const char* t : kFp8)
    if (w.name.ends_with(t)) return NativeFormat::kFp8Block;
  for (const char* t : kBf16)
    if (w.name.ends_with(t)) return NativeFormat::kBf16;
  return NativeFormat::kF32;
}

uint64_t native_bytes(const DeepseekV4::WeightSpec& w) {
  const auto n = static_cast<uint64_t>(w.rows * w.cols);
  switch (native_format(w)) {
    case NativeFormat::kFp8Block: return n + static_cast<uint64_t>(((w.rows + 127) / 128) * ((w.cols + 127) / 128));
    case NativeFormat::kMxfp4: return n / 2 + n / 32;
    case NativeFormat::kBf16: return 2 * n;
    case NativeFormat::kF32:
    case NativeFormat::kI32: return 4 * n;
  }
  return 0;
}

int layer_of(const DeepseekV4::WeightSpec& w) {
  if (w.name.rfind("layers.", 0) != 0) return -1;
  return std::atoi(w.name.c_str() + 7);
}

}  // namespace deepinfer
