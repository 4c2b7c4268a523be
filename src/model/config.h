// DeepSeek-V4 model configuration: config.json (HF `deepseek_v4`) parsed and folded exactly as HF's
// DeepseekV4Config does (legacy compress_ratios, compress_rate_csa/hca, num_hash_layers,
// qk_rope_head_dim, rope_scaling), then validated.
#pragma once

#include "util/result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer {

enum class AttentionType { kSliding, kCsa, kHca };  // sliding only; + compressed sparse; + heavily compressed
enum class MoeRouting { kHash, kLearned };
enum class ScoringFunc { kSqrtSoftplus, kSigmoid, kSoftmax };

const char* attention_type_name(AttentionType t);

// One rotary embedding: which frequencies rotate the trailing `dim` channels of a head.
struct RopeConfig {
  enum class Type { kDefault, kYarn };
  Type type = Type::kDefault;
  double theta = 10000.0;
  int dim = 64;                      // rotated channels (even)
  double factor = 1.0;               // YaRN
  double original_max_position = 0;  // YaRN
  double beta_fast = 32.0, beta_slow = 1.0;
  bool truncate = true;
  double attention_factor = 1.0;     // cos/sin are scaled by this (V4 forces 1 for YaRN unless given)

  // The dim/2 inverse frequencies, computed in fp32 the way HF computes them.
  std::vector<float> inv_freq() const;
};

struct ModelConfig {
  int vocab_size = 129280;
  int hidden_size = 4096;
  int num_layers = 43;
  int num_heads = 64;
  int head_dim = 512;
  int q_lora_rank = 1024;
  int o_groups = 8;
  int o_lora_rank = 1024;
  int sliding_window = 128;
  int csa_rate = 4;    // m: compress rate of compressed sparse attention layers
  int hca_rate = 128;  // m': compress rate of heavily compressed attention layers
  int index_heads = 64;
  int index_head_dim = 128;
  int index_topk = 512;
  int num_experts = 256;
  int experts_per_token = 6;
  int moe_intermediate_size = 2048;
  double routed_scaling_factor = 1.5;
  ScoringFunc scoring = ScoringFunc::kSqrtSoftplus;
  double swiglu_limit = 10.0;
  int hc_mult = 4;
  int hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;
  int max_position_embeddings = 1048576;
  bool tie_word_embeddings = false;
  int bos_token_id = 0;
  std::vector<int> eos_token_ids{1};
  int weight_block_rows = 128, weight_block_cols = 128;  // fp8 block-scale granularity
  std::vector<AttentionType> attention_types;
  std::vector<MoeRouting> moe_routing;
  RopeConfig rope_main;      // sliding-window layers
  RopeConfig rope_compress;  // compressed layers, their compressors and the indexer

  int rope_dim() const { return rope_main.dim; }
  int hc_mix_size() const { return (2 + hc_mult) * hc_mult; }
  int compress_rate(AttentionType t) const { return t == AttentionType::kCsa ? csa_rate : t == AttentionType::kHca ? hca_rate : 0; }

  // `source` names the file in error messages.
  static Result<ModelConfig> from_json(const std::string& text, const std::string& source);
  static Result<ModelConfig> from_file(const std::string& path);
};

}  // namespace deepinfer
