// Analytic costs of the DeepSeek-V4 forward for benchmark ceilings: the bytes a decode step must move
// and the floating-point operations a token needs, counted in the formats the CUDA backend keeps:
// bf16 matrices, or (WeightStorage::kNative, its native_weights option with a checkpoint in DeepSeek's
// released formats) FP8 E4M3 linears with 128x128 block scales and MXFP4 routed experts, the other
// matrices bf16; fp32 hyper-connection mixes and router gate, which it multiplies in fp32; fp32 model
// state.
#pragma once

#include "model/config.h"

#include <cstdint>

namespace deepinfer {

enum class WeightStorage { kBf16, kNative };

class ModelCost {
 public:
  explicit ModelCost(const ModelConfig& c, WeightStorage storage = WeightStorage::kBf16) : c_(c), storage_(storage) {}

  // Every weight as the CUDA backend stores it (the matrices as above; fp32 vectors and the fp32
  // copies of matrices of at most 2^20 elements).
  double stored_weight_bytes() const;

  // Expected distinct experts that `tokens` routings of top-k among E touch, routing uniform:
  // E (1 - (1 - k/E)^tokens).
  double expected_distinct_experts(int64_t tokens) const;

  // What one decode step of `batch` sequences, each holding `context` tokens, must read from memory:
  // the weights it uses (attention, compressors, indexer, router, mixes, the shared expert, the
  // routed experts the batch activates, the LM head and the embedding rows) and the model state
  // read by attention (window, selected or all compressed entries) and by the indexer (its keys).
  struct DecodeBytes {
    double dense = 0, experts = 0, state = 0;
    double distinct_experts = 0;  // per layer
    double total() const { return dense + experts + state; }
  };
  DecodeBytes decode_bytes(int64_t batch, int64_t context) const;

  // FLOPs (2 per multiply-add) of one token at `position` through every layer: the projections,
  // mixes, router, shared and k routed experts, attention over its visible keys and the indexer's
  // scores. The LM head is separate: head_flops() per row whose logits are computed.
  double token_flops(int64_t position) const;
  double head_flops() const;

 private:
  // The layer's attention projections: those the released checkpoints store in FP8 (wq_a, wq_b, wkv,
  // wo_a, wo_b, the indexer's wq_b) and the bf16 rest (compressors, the indexer's weights_proj).
  struct AttentionParams {
    double fp8 = 0, bf16 = 0;
    double total() const { return fp8 + bf16; }
  };
  AttentionParams attention_params(AttentionType t) const;
  double attention_bytes(AttentionType t) const;
  double linear_bytes_per_param() const;  // the FP8 linears' and the shared expert's
  double expert_bytes_per_param() const;  // the routed experts'
  double expert_params() const;           // one expert (= the shared expert)
  double mix_params() const;              // one hyper-connection site's fn
  int64_t visible_entries(AttentionType t, int64_t position) const;

  const ModelConfig& c_;
  const WeightStorage storage_;
};

}  // namespace deepinfer
