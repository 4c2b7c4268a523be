// Analytic costs of the DeepSeek-V4 forward for benchmark ceilings: the bytes a decode step must move
// and the floating-point operations a token needs, counted in the formats the CUDA backend keeps
// (bf16 matrices; fp32 hyper-connection mixes and router gate, which it multiplies in fp32; fp32
// model state).
#pragma once

#include "model/config.h"

#include <cstdint>

namespace deepinfer {

class ModelCost {
 public:
  explicit ModelCost(const ModelConfig& c) : c_(c) {}

  // Every weight as the CUDA backend stores it (bf16 matrices; fp32 vectors and the fp32 copies of
  // matrices of at most 2^20 elements).
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
  double attention_params(AttentionType t) const;  // the layer's bf16 projections
  double expert_params() const;                    // one expert (= the shared expert)
  double mix_params() const;                       // one hyper-connection site's fn
  int64_t visible_entries(AttentionType t, int64_t position) const;

  const ModelConfig& c_;
};

}  // namespace deepinfer
