#include "model/config.h"

#include "util/file_reading.h"
#include "util/json_excerpt.h"
#include "util/json_int.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <numeric>

namespace deepinfer {
using json = nlohmann::json;

const char* attention_type_name(AttentionType t) {
  switch (t) {
    case AttentionType::kSliding: return "sliding_attention";
    case AttentionType::kCsa: return "compressed_sparse_attention";
    case AttentionType::kHca: return "heavily_compressed_attention";
  }
  return "?";
}

std::vector<float> RopeConfig::inv_freq() const {
  const int half = dim / 2;
  std::vector<float> out(half);
  const float base = static_cast<float>(theta);
  for (int i = 0; i < half; ++i) {
    float pos_freq = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
    out[i] = 1.0f / pos_freq;
  }
  if (type == Type::kDefault) return out;
  // YaRN: interpolate the low frequencies by `factor`, keep the high ones, ramp in between.
  auto correction_dim = [&](double rotations) {
    return (dim * std::log(original_max_position / (rotations * 2 * M_PI))) / (2 * std::log(theta));
  };
  double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  float lo = static_cast<float>(low), hi = static_cast<float>(high);
  if (lo == hi) hi += 0.001f;
  for (int i = 0; i < half; ++i) {
    float ramp = std::clamp((static_cast<float>(i) - lo) / (hi - lo), 0.0f, 1.0f);
    float extrapolation = 1.0f - ramp;
    float interpolated = 1.0f / (static_cast<float>(factor) * (1.0f / out[i]));
    out[i] = interpolated * (1.0f - extrapolation) + out[i] * extrapolation;
  }
  return out;
}

namespace {

// config.json is small (a few KB); anything near this is not a config.
constexpr uint64_t kMaxConfigBytes = 64ull << 20;
// Far above any model of the family (V4-Flash has 43).
constexpr int kMaxLayers = 4096;

// Typed access to config.json with errors that name the key.
class Reader {
 public:
  Reader(const json& j, const std::string& source) : j_(j), source_(source) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  Result<int> integer(const char* key, int def) const {
    if (!has(key)) return def;
    const json& v = j_[key];
    if (v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())) {
      double d = v.get<double>();
      if (d >= -2147483648.0 && d <= 2147483647.0) return static_cast<int>(d);
    }
    return make_error(Code::kModelFormat, "{}: \"{}\" must be an integer, got {}", source_, key, json_excerpt(v));
  }

  Result<double> number(const char* key, double def) const {
    if (!has(key)) return def;
    const json& v = j_[key];
    // A number too large for a double (1e999) parses as infinity.
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      return make_error(Code::kModelFormat, "{}: \"{}\" must be a finite number, got {}", source_, key, json_excerpt(v));
    return v.get<double>();
  }

  Result<bool> boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    if (!j_[key].is_boolean()) return make_error(Code::kModelFormat, "{}: \"{}\" must be true or false", source_, key);
    return j_[key].get<bool>();
  }

  Result<std::string> string(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    if (!j_[key].is_string()) return make_error(Code::kModelFormat, "{}: \"{}\" must be a string", source_, key);
    return j_[key].get<std::string>();
  }

  const json& raw(const char* key) const { return j_[key]; }
  const std::string& source() const { return source_; }

 private:
  const json& j_;
  const std::string& source_;
};

Result<AttentionType> parse_attention_type(const std::string& s, const std::string& source) {
  if (s == "sliding_attention") return AttentionType::kSliding;
  if (s == "compressed_sparse_attention") return AttentionType::kCsa;
  if (s == "heavily_compressed_attention") return AttentionType::kHca;
  return make_error(Code::kModelFormat, "{}: unknown layer type \"{}\"", source, text_excerpt(s));
}

// HF's rope parameter dict for one rope kind -> RopeConfig (rope_type default or yarn).
Result<RopeConfig> parse_rope(const json& p, double theta, int dim, double max_pos, const std::string& source,
                              const char* which) {
  RopeConfig r;
  r.theta = theta;
  r.dim = dim;
  std::string type = "default";
  if (p.contains("rope_type") && p["rope_type"].is_string()) type = p["rope_type"].get<std::string>();
  else if (p.contains("type") && p["type"].is_string()) type = p["type"].get<std::string>();
  auto num = [&](const char* key, double def) -> Result<double> {
    if (!p.contains(key) || p[key].is_null()) return def;
    if (!p[key].is_number() || !std::isfinite(p[key].get<double>()))
      return make_error(Code::kModelFormat, "{}: rope \"{}\" parameter \"{}\" must be a finite number", source, which, key);
    return p[key].get<double>();
  };
  if (type == "default") {
    DI_TRY(af, num("attention_factor", 1.0));
    r.attention_factor = af;
    return r;
  }
  if (type != "yarn")
    return make_error(Code::kUnsupported, "{}: rope type \"{}\" for the {} rope is not supported (default and yarn are)", source,
                      text_excerpt(type), which);
  r.type = RopeConfig::Type::kYarn;
  if (!p.contains("factor")) return make_error(Code::kModelFormat, "{}: yarn rope needs \"factor\"", source);
  DI_TRY(factor, num("factor", 1.0));
  DI_TRY(orig, num("original_max_position_embeddings", max_pos));
  DI_TRY(fast, num("beta_fast", 32.0));
  DI_TRY(slow, num("beta_slow", 1.0));
  DI_TRY(af, num("attention_factor", 1.0));  // V4 forces 1.0 unless the config names one
  r.factor = factor;
  r.original_max_position = orig > 0 ? orig : max_pos;
  r.beta_fast = fast ? fast : 32.0;
  r.beta_slow = slow ? slow : 1.0;
  r.attention_factor = af;
  if (p.contains("truncate") && p["truncate"].is_boolean()) r.truncate = p["truncate"].get<bool>();
  if (!(r.factor >= 1.0 && r.factor <= 1e6) || !(r.original_max_position > 0))
    return make_error(Code::kModelFormat, "{}: yarn factor {} / original_max_position_embeddings {} invalid", source, r.factor,
                      r.original_max_position);
  // Negative betas take the logarithm of a negative number in the frequency ramp: NaN.
  if (!(r.beta_fast > 0) || !(r.beta_slow > 0))
    return make_error(Code::kModelFormat, "{}: yarn beta_fast {} / beta_slow {} must be positive", source, r.beta_fast, r.beta_slow);
  return r;
}

// A rope's numbers: theta <= 1 gives infinite or constant frequencies (rope_theta 0 made every
// logit NaN); a huge attention factor overflows the rotated channels.
Result<void> validate_rope(const RopeConfig& r, const char* which, const std::string& source) {
  if (!(r.theta > 1.0 && r.theta <= 1e12))
    return make_error(Code::kModelFormat, "{}: the {} rope's rope_theta = {} is outside (1, 1e12]", source, which, r.theta);
  if (!(r.attention_factor > 0.0 && r.attention_factor <= 100.0))
    return make_error(Code::kModelFormat, "{}: the {} rope's attention_factor = {} is outside (0, 100]", source, which,
                      r.attention_factor);
  // A denormal yarn beta puts the ramp's bounds at infinity, and the ramp then divides infinity by
  // infinity: NaN frequencies from finite, positive parameters.
  for (const float f : r.inv_freq())
    if (!std::isfinite(f))
      return make_error(Code::kModelFormat,
                        "{}: the {} rope's yarn parameters (factor {}, beta_fast {}, beta_slow {}) give non-finite frequencies", source,
                        which, r.factor, r.beta_fast, r.beta_slow);
  return ok();
}

Result<void> validate(const ModelConfig& c, const std::string& source) {
  auto bad = [&](const char* key, long long v, const char* why) {
    return make_error(Code::kModelFormat, "{}: \"{}\" = {} {}", source, key, v, why);
  };
  struct Bounded {
    const char* key;
    int value;
    int max;  // far above any model of the family: only absurd values (which size work) are refused
  };
  for (const Bounded& b : {Bounded{"vocab_size", c.vocab_size, 1 << 24}, {"hidden_size", c.hidden_size, 1 << 16},
                           {"num_attention_heads", c.num_heads, 4096},
                           {"head_dim", c.head_dim, 1 << 14}, {"q_lora_rank", c.q_lora_rank, 1 << 18},
                           {"o_groups", c.o_groups, 4096}, {"o_lora_rank", c.o_lora_rank, 1 << 18},
                           {"sliding_window", c.sliding_window, 1 << 24},
                           {"compress_rates.compressed_sparse_attention", c.csa_rate, 1 << 16},
                           {"compress_rates.heavily_compressed_attention", c.hca_rate, 1 << 16},
                           {"index_n_heads", c.index_heads, 4096}, {"index_head_dim", c.index_head_dim, 1 << 14},
                           {"index_topk", c.index_topk, 1 << 16}, {"n_routed_experts", c.num_experts, 1 << 16},
                           {"num_experts_per_tok", c.experts_per_token, 1 << 16},
                           {"moe_intermediate_size", c.moe_intermediate_size, 1 << 18}, {"hc_mult", c.hc_mult, 64},
                           {"hc_sinkhorn_iters", c.hc_sinkhorn_iters, 1000},
                           {"max_position_embeddings", c.max_position_embeddings, 1 << 24},
                           {"quantization_config.weight_block_size", c.weight_block_rows, 1 << 16},
                           {"quantization_config.weight_block_size", c.weight_block_cols, 1 << 16}}) {
    if (b.value <= 0) return bad(b.key, b.value, "must be positive");
    if (b.value > b.max)
      return make_error(Code::kModelFormat, "{}: \"{}\" = {} is larger than {}, implausible for this model", source, b.key,
                        b.value, b.max);
  }
  // Values that size per-sequence state or per-token work, against the longest context.
  const int64_t context = c.max_position_embeddings;
  if (c.sliding_window > context) return bad("sliding_window", c.sliding_window, "exceeds max_position_embeddings");
  int64_t block_multiple = 1;  // a state block covers a multiple of every compress rate in use
  for (AttentionType t : c.attention_types) {
    const int rate = c.compress_rate(t);
    if (rate == 0) continue;
    if (rate > context) return bad(t == AttentionType::kCsa ? "compress_rates.compressed_sparse_attention"
                                                            : "compress_rates.heavily_compressed_attention",
                                   rate, "exceeds max_position_embeddings");
    block_multiple = std::lcm(block_multiple, static_cast<int64_t>(rate));
    if (block_multiple > (1 << 16))
      return make_error(Code::kModelFormat, "{}: compress rates {} and {} have a least common multiple above {}", source,
                        c.csa_rate, c.hca_rate, 1 << 16);
  }
  const int64_t entries = (context + c.csa_rate - 1) / c.csa_rate;  // a CSA layer's entries at the longest context
  if (c.index_topk > entries)
    return make_error(Code::kModelFormat,
                      "{}: \"index_topk\" = {} exceeds the {} compressed entries of the longest context "
                      "(max_position_embeddings / the compressed_sparse_attention rate)",
                      source, c.index_topk, entries);
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1))
    return make_error(Code::kModelFormat, "{}: rms_norm_eps = {} is outside (0, 1)", source, c.rms_norm_eps);
  if (!(c.hc_eps >= 0 && c.hc_eps < 1))
    return make_error(Code::kModelFormat, "{}: hc_eps = {} is outside [0, 1)", source, c.hc_eps);
  if (!(c.swiglu_limit > 0 && c.swiglu_limit <= 1e6))
    return make_error(Code::kModelFormat, "{}: swiglu_limit = {} is outside (0, 1e6]", source, c.swiglu_limit);
  // Expert outputs are scaled by it: 1e308 overflowed them to inf, then NaN.
  if (!(c.routed_scaling_factor > 0 && c.routed_scaling_factor <= 1e3))
    return make_error(Code::kModelFormat, "{}: routed_scaling_factor = {} is outside (0, 1000]", source, c.routed_scaling_factor);
  if (c.experts_per_token > c.num_experts) return bad("num_experts_per_tok", c.experts_per_token, "exceeds n_routed_experts");
  int rd = c.rope_main.dim;
  if (rd % 2 || rd <= 0 || rd > c.head_dim) return bad("qk_rope_head_dim", rd, "must be even, positive and at most head_dim");
  if (rd > c.index_head_dim) return bad("qk_rope_head_dim", rd, "exceeds index_head_dim (the indexer rotates it too)");
  DI_TRYV(validate_rope(c.rope_main, "main", source));  // after the dimension: it computes the frequencies
  DI_TRYV(validate_rope(c.rope_compress, "compress", source));
  if ((c.num_heads * c.head_dim) % c.o_groups) return bad("o_groups", c.o_groups, "must divide num_attention_heads * head_dim");
  if (c.num_heads % c.o_groups) return bad("o_groups", c.o_groups, "must divide num_attention_heads");
  if (static_cast<int>(c.attention_types.size()) != c.num_layers)
    return make_error(Code::kModelFormat, "{}: {} layer types for {} layers", source, c.attention_types.size(), c.num_layers);
  if (static_cast<int>(c.moe_routing.size()) != c.num_layers)
    return make_error(Code::kModelFormat, "{}: {} mlp layer types for {} layers", source, c.moe_routing.size(), c.num_layers);
  if (c.bos_token_id < 0 || c.bos_token_id >= c.vocab_size) return bad("bos_token_id", c.bos_token_id, "is outside the vocabulary");
  for (int e : c.eos_token_ids)
    if (e < 0 || e >= c.vocab_size) return bad("eos_token_id", e, "is outside the vocabulary");
  return ok();
}

// The rope bases of config.json's top level (each rope's own dict may override them).
struct RopeThetas {
  double main = 10000.0, compress = 160000.0;
};

// The scalar fields: dimensions, MoE, hyper-connection and norm parameters (in the order they are
// checked), and the top-level rope bases.
Result<void> read_scalars(const Reader& r, ModelConfig& c, RopeThetas& thetas) {
  DI_TRY(vocab, r.integer("vocab_size", c.vocab_size));
  DI_TRY(hidden, r.integer("hidden_size", c.hidden_size));
  DI_TRY(layers, r.integer("num_hidden_layers", c.num_layers));
  // Bounded here, not in validate: the layer lists read next are sized by it (-4 made a resize
  // throw, 2^31 - 1 a list of that many layers).
  if (layers <= 0 || layers > kMaxLayers)
    return make_error(Code::kModelFormat, "{}: \"num_hidden_layers\" = {} is outside [1, {}]", r.source(), layers, kMaxLayers);
  DI_TRY(heads, r.integer("num_attention_heads", c.num_heads));
  DI_TRY(kv_heads, r.integer("num_key_value_heads", 1));
  DI_TRY(head_dim, r.integer("head_dim", c.head_dim));
  DI_TRY(q_lora, r.integer("q_lora_rank", c.q_lora_rank));
  DI_TRY(o_groups, r.integer("o_groups", c.o_groups));
  DI_TRY(o_lora, r.integer("o_lora_rank", c.o_lora_rank));
  DI_TRY(window, r.integer("sliding_window", c.sliding_window));
  DI_TRY(index_heads, r.integer("index_n_heads", c.index_heads));
  DI_TRY(index_head_dim, r.integer("index_head_dim", c.index_head_dim));
  DI_TRY(index_topk, r.integer("index_topk", c.index_topk));
  DI_TRY(experts, r.integer("n_routed_experts", c.num_experts));
  DI_TRY(per_tok, r.integer("num_experts_per_tok", c.experts_per_token));
  DI_TRY(moe_inter, r.integer("moe_intermediate_size", c.moe_intermediate_size));
  DI_TRY(scaling, r.number("routed_scaling_factor", c.routed_scaling_factor));
  DI_TRY(scoring, r.string("scoring_func", "sqrtsoftplus"));
  DI_TRY(limit, r.number("swiglu_limit", c.swiglu_limit));
  DI_TRY(hc_mult, r.integer("hc_mult", c.hc_mult));
  DI_TRY(iters, r.integer("hc_sinkhorn_iters", c.hc_sinkhorn_iters));
  DI_TRY(hc_eps, r.number("hc_eps", c.hc_eps));
  DI_TRY(rms_eps, r.number("rms_norm_eps", c.rms_norm_eps));
  DI_TRY(max_pos, r.integer("max_position_embeddings", c.max_position_embeddings));
  DI_TRY(tie, r.boolean("tie_word_embeddings", false));
  DI_TRY(bos, r.integer("bos_token_id", c.bos_token_id));
  DI_TRY(act, r.string("hidden_act", "silu"));
  DI_TRY(rope_theta, r.number("rope_theta", 10000.0));
  DI_TRY(compress_theta, r.number("compress_rope_theta", 160000.0));
  thetas = RopeThetas{rope_theta, compress_theta};
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.num_heads = heads;
  c.head_dim = head_dim;
  c.q_lora_rank = q_lora;
  c.o_groups = o_groups;
  c.o_lora_rank = o_lora;
  c.sliding_window = window;
  c.index_heads = index_heads;
  c.index_head_dim = index_head_dim;
  c.index_topk = index_topk;
  c.num_experts = experts;
  c.experts_per_token = per_tok;
  c.moe_intermediate_size = moe_inter;
  c.routed_scaling_factor = scaling;
  c.swiglu_limit = limit;
  c.hc_mult = hc_mult;
  c.hc_sinkhorn_iters = iters;
  c.hc_eps = hc_eps;
  c.rms_norm_eps = rms_eps;
  c.max_position_embeddings = max_pos;
  c.tie_word_embeddings = tie;
  c.bos_token_id = bos;
  if (kv_heads != 1) return make_error(Code::kUnsupported, "{}: num_key_value_heads {} (DeepSeek-V4 has one shared K=V head)", r.source(), kv_heads);
  if (act != "silu") return make_error(Code::kUnsupported, "{}: hidden_act \"{}\" is not supported (silu is)", r.source(), act);
  if (scoring == "sqrtsoftplus") c.scoring = ScoringFunc::kSqrtSoftplus;
  else if (scoring == "sigmoid") c.scoring = ScoringFunc::kSigmoid;
  else if (scoring == "softmax") c.scoring = ScoringFunc::kSoftmax;
  else return make_error(Code::kUnsupported, "{}: scoring_func \"{}\" is not supported", r.source(), scoring);
  return ok();
}

Result<void> read_eos(const Reader& r, ModelConfig& c) {
  if (r.has("eos_token_id")) {
    const json& e = r.raw("eos_token_id");
    c.eos_token_ids.clear();
    if (e.is_number_integer()) {
      const auto id = json_int32(e);
      if (!id) return make_error(Code::kModelFormat, "{}: eos_token_id {} is not a token id", r.source(), json_excerpt(e));
      c.eos_token_ids.push_back(*id);
    }
    else if (e.is_array()) {
      for (const json& v : e) {
        const auto id = json_int32(v);
        if (!id) return make_error(Code::kModelFormat, "{}: eos_token_id entry {} is not a token id", r.source(), json_excerpt(v));
        c.eos_token_ids.push_back(*id);
      }
    } else return make_error(Code::kModelFormat, "{}: eos_token_id must be an integer or a list", r.source());
  }
  return ok();
}

Result<void> read_compress_rates(const Reader& r, ModelConfig& c) {
  // compress_rates: dict per layer type, then the legacy scalar overrides.
  if (r.has("compress_rates")) {
    const json& cr = r.raw("compress_rates");
    if (!cr.is_object()) return make_error(Code::kModelFormat, "{}: compress_rates must be an object", r.source());
    Reader rr(cr, r.source());
    DI_TRY(csa, rr.integer("compressed_sparse_attention", c.csa_rate));
    DI_TRY(hca, rr.integer("heavily_compressed_attention", c.hca_rate));
    c.csa_rate = csa;
    c.hca_rate = hca;
  }
  DI_TRY(csa_legacy, r.integer("compress_rate_csa", c.csa_rate));
  DI_TRY(hca_legacy, r.integer("compress_rate_hca", c.hca_rate));
  c.csa_rate = csa_legacy;
  c.hca_rate = hca_legacy;
  return ok();
}

Result<void> read_layer_types(const Reader& r, ModelConfig& c) {
  // layer_types: explicit > legacy compress_ratios (0/4/128 per layer) > 2 HCA then CSA/HCA alternating.
  if (r.has("layer_types")) {
    const json& lt = r.raw("layer_types");
    if (!lt.is_array()) return make_error(Code::kModelFormat, "{}: layer_types must be a list", r.source());
    for (const json& v : lt) {
      if (!v.is_string()) return make_error(Code::kModelFormat, "{}: layer_types entries must be strings", r.source());
      DI_TRY(t, parse_attention_type(v.get<std::string>(), r.source()));
      c.attention_types.push_back(t);
    }
  } else if (r.has("compress_ratios")) {
    const json& cr = r.raw("compress_ratios");
    if (!cr.is_array()) return make_error(Code::kModelFormat, "{}: compress_ratios must be a list", r.source());
    for (const json& v : cr) {
      const int ratio = json_int32(v).value_or(-1);
      if (ratio == 0) c.attention_types.push_back(AttentionType::kSliding);
      else if (ratio == 4) c.attention_types.push_back(AttentionType::kCsa);
      else if (ratio == 128) c.attention_types.push_back(AttentionType::kHca);
      else return make_error(Code::kModelFormat, "{}: compress_ratios entry {} is not 0, 4 or 128", r.source(), json_excerpt(v));
    }
  } else {
    for (int i = 0; i < std::min(c.num_layers, 2); ++i) c.attention_types.push_back(AttentionType::kHca);
    for (int i = 0; i < c.num_layers - 2; ++i)
      c.attention_types.push_back(i % 2 ? AttentionType::kCsa : AttentionType::kHca);
  }
  if (static_cast<int>(c.attention_types.size()) > c.num_layers) c.attention_types.resize(c.num_layers);
  return ok();
}

Result<void> read_mlp_layer_types(const Reader& r, ModelConfig& c) {
  // mlp_layer_types: explicit > first num_hash_layers (default 3) hash, the rest learned.
  if (r.has("mlp_layer_types")) {
    const json& mt = r.raw("mlp_layer_types");
    if (!mt.is_array()) return make_error(Code::kModelFormat, "{}: mlp_layer_types must be a list", r.source());
    for (const json& v : mt) {
      std::string s = v.is_string() ? v.get<std::string>() : "";
      if (s == "hash_moe") c.moe_routing.push_back(MoeRouting::kHash);
      else if (s == "moe") c.moe_routing.push_back(MoeRouting::kLearned);
      else return make_error(Code::kModelFormat, "{}: unknown mlp layer type {}", r.source(), json_excerpt(v));
    }
  } else {
    DI_TRY(n_hash, r.integer("num_hash_layers", 3));
    for (int i = 0; i < c.num_layers; ++i) c.moe_routing.push_back(i < n_hash ? MoeRouting::kHash : MoeRouting::kLearned);
  }
  if (static_cast<int>(c.moe_routing.size()) > c.num_layers) c.moe_routing.resize(c.num_layers);
  return ok();
}

Result<void> read_rope(const Reader& r, ModelConfig& c, const RopeThetas& thetas) {
  // Rotated channels: partial_rotary_factor > legacy qk_rope_head_dim > 64/512.
  double prf = 64.0 / 512.0;
  if (r.has("partial_rotary_factor")) {
    DI_TRY(v, r.number("partial_rotary_factor", prf));
    prf = v;
  } else if (r.has("qk_rope_head_dim")) {
    DI_TRY(v, r.integer("qk_rope_head_dim", 64));
    if (c.head_dim <= 0) return make_error(Code::kModelFormat, "{}: \"head_dim\" = {} must be positive", r.source(), c.head_dim);
    prf = static_cast<double>(v) / c.head_dim;
  }
  // Checked before the conversion to int, which is undefined for values out of range.
  if (!(prf > 0 && prf <= 1))
    return make_error(Code::kModelFormat, "{}: partial_rotary_factor = {} (or qk_rope_head_dim / head_dim) is outside (0, 1]",
                      r.source(), prf);
  const int rope_dim = static_cast<int>(c.head_dim * prf);
  const int max_pos = c.max_position_embeddings;

  // Rope parameters: nested {main, compress} as HF writes them, or a flat dict (rope_parameters or
  // the legacy rope_scaling) that applies to the compressed layers only.
  const json empty = json::object();
  const json* flat = &empty;
  if (r.has("rope_parameters")) flat = &r.raw("rope_parameters");
  else if (r.has("rope_scaling")) flat = &r.raw("rope_scaling");
  if (!flat->is_object()) return make_error(Code::kModelFormat, "{}: rope_parameters must be an object", r.source());
  if (flat->contains("main") && (*flat)["main"].is_object() && flat->contains("compress") && (*flat)["compress"].is_object()) {
    auto theta_of = [&](const json& p, double def) {
      return p.contains("rope_theta") && p["rope_theta"].is_number() ? p["rope_theta"].get<double>() : def;
    };
    DI_TRY(main, parse_rope((*flat)["main"], theta_of((*flat)["main"], thetas.main), rope_dim, max_pos, r.source(), "main"));
    DI_TRY(comp,
           parse_rope((*flat)["compress"], theta_of((*flat)["compress"], thetas.compress), rope_dim, max_pos, r.source(), "compress"));
    c.rope_main = main;
    c.rope_compress = comp;
  } else {
    DI_TRY(main, parse_rope(json::object(), thetas.main, rope_dim, max_pos, r.source(), "main"));
    DI_TRY(comp, parse_rope(*flat, thetas.compress, rope_dim, max_pos, r.source(), "compress"));
    c.rope_main = main;
    c.rope_compress = comp;
  }
  return ok();
}

Result<void> read_quantization(const Reader& r, ModelConfig& c) {
  if (r.has("quantization_config") && r.raw("quantization_config").is_object()) {
    const json& q = r.raw("quantization_config");
    if (q.contains("weight_block_size")) {
      const json& b = q["weight_block_size"];
      const bool pair = b.is_array() && b.size() == 2;
      const auto rows = pair ? json_int32(b[0]) : std::nullopt, cols = pair ? json_int32(b[1]) : std::nullopt;
      if (!rows || !cols)
        return make_error(Code::kModelFormat, "{}: quantization_config.weight_block_size must be two positive integers", r.source());
      c.weight_block_rows = *rows;
      c.weight_block_cols = *cols;
    }
  }
  return ok();
}

}  // namespace

Result<ModelConfig> ModelConfig::from_json(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return make_error(Code::kModelFormat, "{}: not a JSON object", source);
  Reader r(j, source);
  DI_TRY(model_type, r.string("model_type", ""));
  if (model_type != "deepseek_v4")
    return make_error(Code::kUnsupported, "{}: model_type \"{}\" is not supported (deepseek_v4 is)", source, model_type);

  ModelConfig c;
  RopeThetas thetas;
  DI_TRYV(read_scalars(r, c, thetas));
  DI_TRYV(read_eos(r, c));
  DI_TRYV(read_compress_rates(r, c));
  DI_TRYV(read_layer_types(r, c));
  DI_TRYV(read_mlp_layer_types(r, c));
  DI_TRYV(read_rope(r, c, thetas));
  DI_TRYV(read_quantization(r, c));
  DI_TRYV(validate(c, source));
  return c;
}

Result<ModelConfig> ModelConfig::from_file(const std::string& path) {
  DI_TRY(text, read_whole_file(path, FileLimits{kMaxConfigBytes}));
  return from_json(text, path);
}

}  // namespace deepinfer
