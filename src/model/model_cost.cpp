#include "model/model_cost.h"

#include <algorithm>
#include <cmath>

namespace deepinfer {
namespace {

constexpr double kBf16 = 2.0, kF32 = 4.0;
constexpr double kFp8 = 1.0 + 1.0 / (128 * 128), kMxfp4 = 0.5 + 1.0 / 32;  // a value and its share of the scales
constexpr double kSmallMatrix = 1048576.0;  // the CUDA backend keeps an fp32 copy of matrices up to this size

}  // namespace

ModelCost::AttentionParams ModelCost::attention_params(AttentionType t) const {
  const double d = c_.hidden_size, hd = c_.head_dim, heads = c_.num_heads;
  AttentionParams p;
  p.fp8 = c_.q_lora_rank * d                                                                      // wq_a
          + heads * hd * c_.q_lora_rank                                                           // wq_b
          + hd * d                                                                                // wkv
          + double(c_.o_groups) * c_.o_lora_rank * (heads * hd / c_.o_groups)                     // wo_a
          + d * double(c_.o_groups) * c_.o_lora_rank;                                             // wo_b
  if (t != AttentionType::kSliding) p.bf16 += 2.0 * (t == AttentionType::kCsa ? 2 : 1) * hd * d;  // compressor wkv, wgate
  if (t == AttentionType::kCsa) {
    const double ih = c_.index_heads, idim = c_.index_head_dim;
    p.fp8 += ih * idim * c_.q_lora_rank;  // indexer wq_b
    p.bf16 += ih * d                      // weights_proj
              + 2.0 * 2.0 * idim * d;     // indexer compressor wkv, wgate
  }
  return p;
}

double ModelCost::linear_bytes_per_param() const { return storage_ == WeightStorage::kNative ? kFp8 : kBf16; }

double ModelCost::expert_bytes_per_param() const { return storage_ == WeightStorage::kNative ? kMxfp4 : kBf16; }

double ModelCost::attention_bytes(AttentionType t) const {
  const AttentionParams p = attention_params(t);
  return p.fp8 * linear_bytes_per_param() + p.bf16 * kBf16;
}

double ModelCost::expert_params() const { return 3.0 * c_.moe_intermediate_size * double(c_.hidden_size); }

double ModelCost::mix_params() const { return double(c_.hc_mix_size()) * c_.hc_mult * c_.hidden_size; }

int64_t ModelCost::visible_entries(AttentionType t, int64_t position) const {
  const int rate = c_.compress_rate(t);
  return rate > 0 ? (position + 1) / rate : 0;
}

double ModelCost::stored_weight_bytes() const {
  const double d = c_.hidden_size, E = c_.num_experts;
  auto matrix = [](double n) { return n * kBf16 + (n <= kSmallMatrix ? n * kF32 : 0.0); };
  double b = 2.0 * matrix(double(c_.vocab_size) * d);  // embedding, head
  b += matrix(double(c_.hc_mult) * c_.hc_mult * d);
  for (int l = 0; l < c_.num_layers; ++l) {
    const AttentionType t = c_.attention_types[l];
    b += attention_bytes(t);
    b += 2.0 * matrix(mix_params());
    b += matrix(E * d);                                   // router gate
    b += E * expert_params() * expert_bytes_per_param();  // routed
    b += expert_params() * linear_bytes_per_param();      // shared
  }
  return b;
}

double ModelCost::expected_distinct_experts(int64_t tokens) const {
  const double E = c_.num_experts, k = std::min(c_.experts_per_token, c_.num_experts);
  return E * (1.0 - std::pow(1.0 - k / E, static_cast<double>(tokens)));
}

ModelCost::DecodeBytes ModelCost::decode_bytes(int64_t batch, int64_t context) const {
  DecodeBytes r;
  const double d = c_.hidden_size, E = c_.num_experts, hd = c_.head_dim;
  const double gate = E * d <= kSmallMatrix ? E * d * kF32 : E * d * kBf16;
  const double mix = mix_params() <= kSmallMatrix ? mix_params() * kF32 : mix_params() * kBf16;
  r.distinct_experts = expected_distinct_experts(batch);
  const int64_t p = context;  // position of the token being decoded
  for (int l = 0; l < c_.num_layers; ++l) {
    const AttentionType t = c_.attention_types[l];
    r.dense += attention_bytes(t) + gate + 2.0 * mix + expert_params() * linear_bytes_per_param();
    r.experts += r.distinct_experts * expert_params() * expert_bytes_per_param();
    double per_seq = std::min<int64_t>(p + 1, c_.sliding_window) * hd * kF32;  // window
    const int64_t vis = visible_entries(t, p);
    if (t == AttentionType::kCsa) {
      per_seq += std::min<int64_t>(vis, c_.index_topk) * hd * kF32;  // selected entries
      per_seq += double(vis) * c_.index_head_dim * kF32;              // indexer keys
    } else if (t == AttentionType::kHca) {
      per_seq += double(vis) * hd * kF32;
    }
    r.state += per_seq * static_cast<double>(batch);
  }
  r.dense += double(c_.vocab_size) * d * kBf16;            // LM head
  r.dense += double(c_.hc_mult) * c_.hc_mult * d * kF32;   // head mix
  r.dense += static_cast<double>(batch) * d * kBf16;       // embedding rows
  return r;
}

double ModelCost::token_flops(int64_t position) const {
  const double d = c_.hidden_size, E = c_.num_experts, hd = c_.head_dim;
  double f = 2.0 * double(c_.hc_mult) * c_.hc_mult * d;  // head mix
  for (int l = 0; l < c_.num_layers; ++l) {
    const AttentionType t = c_.attention_types[l];
    f += 2.0 * (attention_params(t).total() + 2.0 * mix_params() + E * d + (1.0 + c_.experts_per_token) * expert_params());
    const int64_t vis = visible_entries(t, position);
    double keys = static_cast<double>(std::min<int64_t>(position + 1, c_.sliding_window));
    if (t == AttentionType::kCsa) {
      keys += static_cast<double>(std::min<int64_t>(vis, c_.index_topk));
      f += 2.0 * double(vis) * c_.index_heads * c_.index_head_dim;  // indexer scores
    } else if (t == AttentionType::kHca) {
      keys += static_cast<double>(vis);
    }
    f += 4.0 * c_.num_heads * hd * keys;  // q.k and p.v
  }
  return f;
}

double ModelCost::head_flops() const { return 2.0 * double(c_.vocab_size) * c_.hidden_size; }

}  // namespace deepinfer
