#include "model/config.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

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
    return make_error(Code::kModelFormat, "{}: \"{}\" must be an integer, got {}", source_, key, v.dump());
  }

  Result<double> number(const char* key, double def) const {
    if (!has(key)) return def;
    const json& v = j_[key];
    if (!v.is_number()) return make_error(Code::kModelFormat, "{}: \"{}\" must be a number, got {}", source_, key, v.dump());
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
  return make_error(Code::kModelFormat, "{}: unknown layer type \"{}\"", source, s);
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
    if (!p[key].is_number()) return make_error(Code::kModelFormat, "{}: rope \"{}\" parameter \"{}\" must be a number", source, which, key);
    return p[key].get<double>();
  };
  if (type == "default") {
    DI_TRY(af, num("attention_factor", 1.0));
    r.attention_factor = af;
    return r;
  }
  if (type != "yarn")
    return make_error(Code::kUnsupported, "{}: rope type \"{}\" for the {} rope is not supported (default and yarn are)", source, type, which);
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
  if (!(r.factor >= 1.0) || !(r.original_max_position > 0))
    return make_error(Code::kModelFormat, "{}: yarn factor {} / original_max_position_embeddings {} invalid", source, r.factor,
                      r.original_max_position);
  return r;
}

Result<void> validate(const ModelConfig& c, const std::string& source) {
  auto bad = [&](const char* key, long long v, const char* why) {
    return make_error(Code::kModelFormat, "{}: \"{}\" = {} {}", source, key, v, why);
  };
  struct Positive {
    const char* key;
    int value;
  };
  for (const Positive& p : {Positive{"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
                            {"num_hidden_layers", c.num_layers}, {"num_attention_heads", c.num_heads},
                            {"head_dim", c.head_dim}, {"q_lora_rank", c.q_lora_rank}, {"o_groups", c.o_groups},
                            {"o_lora_rank", c.o_lora_rank}, {"sliding_window", c.sliding_window},
                            {"compress_rates.compressed_sparse_attention", c.csa_rate},
                            {"compress_rates.heavily_compressed_attention", c.hca_rate},
                            {"index_n_heads", c.index_heads}, {"index_head_dim", c.index_head_dim},
                            {"index_topk", c.index_topk}, {"n_routed_experts", c.num_experts},
                            {"num_experts_per_tok", c.experts_per_token},
                            {"moe_intermediate_size", c.moe_intermediate_size}, {"hc_mult", c.hc_mult},
                            {"hc_sinkhorn_iters", c.hc_sinkhorn_iters},
                            {"max_position_embeddings", c.max_position_embeddings}}) {
    if (p.value <= 0) return bad(p.key, p.value, "must be positive");
  }
  if (c.vocab_size > (1 << 24)) return bad("vocab_size", c.vocab_size, "is larger than 16M");
  if (c.hidden_size > (1 << 16) || c.head_dim > (1 << 14) || c.num_heads > 4096 || c.num_layers > 4096)
    return make_error(Code::kModelFormat, "{}: model dimensions are implausibly large", source);
  if (c.num_experts > 65536 || c.hc_mult > 64 || c.hc_sinkhorn_iters > 1000)
    return make_error(Code::kModelFormat, "{}: expert / hyper-connection sizes are implausibly large", source);
  if (c.experts_per_token > c.num_experts) return bad("num_experts_per_tok", c.experts_per_token, "exceeds n_routed_experts");
  int rd = c.rope_main.dim;
  if (rd % 2 || rd <= 0 || rd > c.head_dim) return bad("qk_rope_head_dim", rd, "must be even, positive and at most head_dim");
  if (rd > c.index_head_dim) return bad("qk_rope_head_dim", rd, "exceeds index_head_dim (the indexer rotates it too)");
  if ((c.num_heads * c.head_dim) % c.o_groups) return bad("o_groups", c.o_groups, "must divide num_attention_heads * head_dim");
  if (c.num_heads % c.o_groups) return bad("o_groups", c.o_groups, "must divide num_attention_heads");
  if (static_cast<int>(c.attention_types.size()) != c.num_layers)
    return make_error(Code::kModelFormat, "{}: {} layer types for {} layers", source, c.attention_types.size(), c.num_layers);
  if (static_cast<int>(c.moe_routing.size()) != c.num_layers)
    return make_error(Code::kModelFormat, "{}: {} mlp layer types for {} layers", source, c.moe_routing.size(), c.num_layers);
  if (!(c.rms_norm_eps > 0) || !(c.hc_eps >= 0) || !(c.swiglu_limit > 0) || !(c.routed_scaling_factor > 0))
    return make_error(Code::kModelFormat, "{}: rms_norm_eps, hc_eps, swiglu_limit and routed_scaling_factor must be positive", source);
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
    if (e.is_number_integer()) c.eos_token_ids.push_back(e.get<int>());
    else if (e.is_array()) {
      for (const json& v : e) {
        if (!v.is_number_integer()) return make_error(Code::kModelFormat, "{}: eos_token_id entries must be integers", r.source());
        c.eos_token_ids.push_back(v.get<int>());
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
      int ratio = v.is_number_integer() ? v.get<int>() : -1;
      if (ratio == 0) c.attention_types.push_back(AttentionType::kSliding);
      else if (ratio == 4) c.attention_types.push_back(AttentionType::kCsa);
      else if (ratio == 128) c.attention_types.push_back(AttentionType::kHca);
      else return make_error(Code::kModelFormat, "{}: compress_ratios entry {} is not 0, 4 or 128", r.source(), v.dump());
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
      else return make_error(Code::kModelFormat, "{}: unknown mlp layer type {}", r.source(), v.dump());
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
    prf = static_cast<double>(v) / c.head_dim;
  }
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
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
          b[0].get<int>() <= 0 || b[1].get<int>() <= 0)
        return make_error(Code::kModelFormat, "{}: quantization_config.weight_block_size must be two positive integers", r.source());
      c.weight_block_rows = b[0].get<int>();
      c.weight_block_cols = b[1].get<int>();
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
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(Code::kNotFound, "cannot read {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json(ss.str(), path);
}

}  // namespace deepinfer
