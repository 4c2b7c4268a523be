#include "model/deepseek_v4.h"

#include "model/native_formats.h"
#include "model/safetensors.h"
#include "model/weight_catalog.h"

#include "backend/random_fill.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <utility>

namespace deepinfer {

using WeightPtr = std::unique_ptr<DeviceWeight>;

struct DeepseekV4::Layer {
  AttentionType type = AttentionType::kSliding;
  MoeRouting routing = MoeRouting::kLearned;
  WeightPtr attn_norm, ffn_norm;
  WeightPtr hc_attn_fn, hc_attn_base, hc_attn_scale, hc_ffn_fn, hc_ffn_base, hc_ffn_scale;
  WeightPtr wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, sinks;
  WeightPtr comp_wkv, comp_wgate, comp_ape, comp_norm;                                 // CSA / HCA
  WeightPtr idx_wq_b, idx_weights, idx_comp_wkv, idx_comp_wgate, idx_comp_ape, idx_comp_norm;  // CSA
  WeightPtr gate, gate_bias, tid2eid;
  WeightPtr w1, w2, w3;                   // routed experts, stacked
  WeightPtr shared_w1, shared_w2, shared_w3;
};

// Where the weights come from: a checkpoint, or random values made on the backend.
class DeepseekV4::WeightProvider {
 public:
  virtual ~WeightProvider() = default;
  virtual bool has(const std::string& name) const = 0;
  virtual Result<WeightPtr> matrix(const std::string& name, int64_t rows, int64_t cols) = 0;
  // count matrices named prefix + i + "." + suffix, stacked.
  virtual Result<WeightPtr> stacked(const std::string& prefix, int64_t count, const std::string& suffix, int64_t rows,
                                    int64_t cols) = 0;
  virtual Result<std::vector<int32_t>> int_table(const std::string& name, int64_t rows, int64_t cols) = 0;
  virtual Result<void> done() = 0;
};

namespace {

class CheckpointWeights final : public DeepseekV4::WeightProvider {
 public:
  CheckpointWeights(Checkpoint ckpt, Backend& be, int block_rows, int block_cols, const LoadProgress& progress)
      : ckpt_(std::move(ckpt)), cat_(ckpt_, block_rows, block_cols), be_(be), progress_(progress) {
    for (const auto& [name, t] : ckpt_.tensors()) total_ += t->nbytes;
  }
  bool has(const std::string& name) const override { return cat_.has(name); }
  Result<WeightPtr> matrix(const std::string& name, int64_t rows, int64_t cols) override {
    DI_TRY(src, cat_.matrix(name, rows, cols));
    DI_TRY(w, be_.upload(src));
    DI_TRYV(loaded(src));
    return w;
  }
  Result<WeightPtr> stacked(const std::string& prefix, int64_t count, const std::string& suffix, int64_t rows,
                            int64_t cols) override {
    std::vector<WeightSource> ws;
    for (int64_t x = 0; x < count; ++x) {
      DI_TRY(src, cat_.matrix(prefix + std::to_string(x) + "." + suffix, rows, cols));
      ws.push_back(std::move(src));
    }
    DI_TRY(w, be_.upload_stacked(ws));
    for (const WeightSource& src : ws) {
      DI_TRYV(loaded(src));
    }
    return w;
  }
  Result<std::vector<int32_t>> int_table(const std::string& name, int64_t rows, int64_t cols) override {
    return cat_.int_table(name, rows, cols);
  }
  Result<void> done() override {
    DI_TRYV(cat_.check_all_used());
    if (progress_ && !progress_(total_, total_)) return cancelled();
    return ok();
  }

 private:
  static Error cancelled() { return Error{Code::kCancelled, "loading the model was cancelled by its progress callback"}; }
  Result<void> loaded(const WeightSource& src) {
    done_ += src.values.nbytes + src.scale.nbytes;
    if (progress_ && !progress_(std::min(done_, total_), total_)) return cancelled();
    return ok();
  }

  Checkpoint ckpt_;
  WeightCatalog cat_;
  Backend& be_;
  const LoadProgress& progress_;
  uint64_t done_ = 0, total_ = 0;
};

uint64_t name_hash(const std::string& s) {  // FNV-1a
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Random weights scaled so that activations stay finite and of order one through any depth: matrices
// uniform with variance 1/fan_in, norm weights near 1, hyper-connection and router parameters small.
class RandomWeights final : public DeepseekV4::WeightProvider {
 public:
  RandomWeights(Backend& be, uint64_t seed) : be_(be), seed_(seed) {}
  bool has(const std::string&) const override { return true; }
  // (Each in the format DeepSeek's checkpoints store it in: a backend keeping those formats uses it.)
  Result<WeightPtr> matrix(const std::string& name, int64_t rows, int64_t cols) override {
    const auto [mean, stddev] = init(name, cols);
    const bool fp8 =
        native_format(DeepseekV4::WeightSpec{name, rows, cols, DeepseekV4::WeightSpec::Kind::kMatrix}) == NativeFormat::kFp8Block;
    return be_.random_weight(1, rows, cols, mean, stddev, seed_ ^ name_hash(name), fp8 ? WeightFormat::kFp8Block : WeightFormat::kPlain);
  }
  Result<WeightPtr> stacked(const std::string& prefix, int64_t count, const std::string& suffix, int64_t rows,
                            int64_t cols) override {
    return be_.random_weight(count, rows, cols, 0.0f, 1.0f / std::sqrt(static_cast<float>(cols)), seed_ ^ name_hash(prefix + "*." + suffix),
                             WeightFormat::kMxfp4);
  }
  // Rows of distinct experts.
  Result<std::vector<int32_t>> int_table(const std::string& name, int64_t rows, int64_t cols) override {
    std::vector<int32_t> t(static_cast<size_t>(rows * cols));
    const uint64_t seed = seed_ ^ name_hash(name);
    const int64_t n_exp = experts_;
    if (n_exp < cols) return make_error(Code::kInternal, "{}: {} distinct experts of {}", name, cols, n_exp);
    for (int64_t r = 0; r < rows; ++r) {
      uint64_t draw = static_cast<uint64_t>(r) * 1024;
      for (int64_t c = 0; c < cols; ++c) {
        int32_t e;
        bool dup;
        do {
          e = static_cast<int32_t>(random_bits(seed, draw++) % static_cast<uint64_t>(n_exp));
          dup = false;
          for (int64_t j = 0; j < c; ++j) dup |= t[static_cast<size_t>(r * cols + j)] == e;
        } while (dup);
        t[static_cast<size_t>(r * cols + c)] = e;
      }
    }
    return t;
  }
  Result<void> done() override { return ok(); }
  void set_experts(int64_t n) { experts_ = n; }

 private:
  static std::pair<float, float> init(const std::string& name, int64_t cols) {
    if (ends_with(name, "norm.weight")) return {1.0f, 0.05f};
    if (ends_with(name, "_base")) return {0.0f, 0.5f};
    if (ends_with(name, "_scale")) return {0.5f, 0.05f};
    if (ends_with(name, "attn_sink")) return {0.0f, 1.0f};
    if (ends_with(name, ".ape")) return {0.0f, 0.5f};
    if (ends_with(name, "gate.bias")) return {0.0f, 0.01f};
    if (name == "embed.weight") return {0.0f, 1.0f};
    return {0.0f, 1.0f / std::sqrt(static_cast<float>(cols))};
  }

  Backend& be_;
  uint64_t seed_;
  int64_t experts_ = 1;
};

}  // namespace

DeepseekV4::DeepseekV4(ModelConfig config, Backend& backend) : config_(std::move(config)), be_(backend) {}
DeepseekV4::~DeepseekV4() = default;

Result<std::unique_ptr<DeepseekV4>> DeepseekV4::load(const std::string& dir, Backend& backend, const LoadProgress& progress) {
  DI_TRY(config, ModelConfig::from_file((std::filesystem::path(dir) / "config.json").string()));
  std::unique_ptr<DeepseekV4> model(new DeepseekV4(std::move(config), backend));
  DI_TRY(ckpt, Checkpoint::open_dir(dir));
  CheckpointWeights w(std::move(ckpt), backend, model->config_.weight_block_rows, model->config_.weight_block_cols, progress);
  DI_TRYV(model->load_weights(w));
  return model;
}

Result<std::unique_ptr<DeepseekV4>> DeepseekV4::random(const ModelConfig& config, Backend& backend, uint64_t seed) {
  std::unique_ptr<DeepseekV4> model(new DeepseekV4(config, backend));
  RandomWeights w(backend, seed);
  w.set_experts(config.num_experts);
  DI_TRYV(model->load_weights(w));
  DI_TRYV(backend.finish());
  return model;
}

namespace {

// Records what load_weights asks for and hands back weights of that shape that hold nothing.
class WeightLister final : public DeepseekV4::WeightProvider {
 public:
  explicit WeightLister(int64_t experts) : experts_(experts) {}
  bool has(const std::string&) const override { return true; }
  Result<WeightPtr> matrix(const std::string& name, int64_t rows, int64_t cols) override {
    specs.push_back({name, rows, cols, DeepseekV4::WeightSpec::Kind::kMatrix});
    return shape(1, rows, cols);
  }
  Result<WeightPtr> stacked(const std::string& prefix, int64_t count, const std::string& suffix, int64_t rows,
                            int64_t cols) override {
    for (int64_t x = 0; x < count; ++x)
      specs.push_back({prefix + std::to_string(x) + "." + suffix, rows, cols, DeepseekV4::WeightSpec::Kind::kExpert});
    return shape(count, rows, cols);
  }
  Result<std::vector<int32_t>> int_table(const std::string& name, int64_t rows, int64_t cols) override {
    specs.push_back({name, rows, cols, DeepseekV4::WeightSpec::Kind::kIntTable});
    std::vector<int32_t> t(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(static_cast<int64_t>(i % static_cast<size_t>(cols)) % experts_);
    return t;
  }
  Result<void> done() override { return ok(); }
  std::vector<DeepseekV4::WeightSpec> specs;

 private:
  static WeightPtr shape(int64_t count, int64_t rows, int64_t cols) {
    auto w = std::make_unique<DeviceWeight>();
    w->count = count;
    w->rows = rows;
    w->cols = cols;
    return w;
  }
  int64_t experts_;
};

}  // namespace

Result<std::vector<DeepseekV4::WeightSpec>> DeepseekV4::weight_specs(const ModelConfig& config, Backend& backend) {
  DeepseekV4 model(config, backend);
  WeightLister lister(std::max<int64_t>(config.num_experts, 1));
  DI_TRYV(model.load_weights(lister));
  return std::move(lister.specs);
}

Result<ModelConfig> DeepseekV4::read_config(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return ModelConfig::from_file((fs::path(path) / "config.json").string());
  return ModelConfig::from_file(path);
}

Result<void> DeepseekV4::load_weights(WeightProvider& src) {
  const ModelConfig& c = config_;
  // Loads one weight into its slot: DI_TRYV(set(slot, matrix(...))).
  auto set = [this](WeightPtr& slot, Result<WeightPtr> w) -> Result<void> {
    if (!w) return w.error();
    slot = std::move(w).value();
    parameters_ += slot->count * slot->rows * slot->cols;
    return ok();
  };
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols) { return src.matrix(name, rows, cols); };
  auto vec = [&](const std::string& name, int64_t n) { return mat(name, 1, n); };

  const int64_t d = c.hidden_size, hc = c.hc_mult, mix = c.hc_mix_size(), hd = c.head_dim;
  DI_TRYV(set(embed_, mat("embed.weight", c.vocab_size, d)));
  const bool tied = c.tie_word_embeddings && !src.has("head.weight");
  DI_TRYV(set(head_, mat(tied ? "embed.weight" : "head.weight", c.vocab_size, d)));
  DI_TRYV(set(norm_, vec("norm.weight", d)));
  DI_TRYV(set(hc_head_fn_, mat("hc_head_fn", hc, hc * d)));
  DI_TRYV(set(hc_head_base_, vec("hc_head_base", hc)));
  DI_TRYV(set(hc_head_scale_, vec("hc_head_scale", 1)));
  DI_TRYV(set(inv_freq_main_, be_.upload_floats(c.rope_main.inv_freq(), 1, c.rope_dim() / 2)));
  DI_TRYV(set(inv_freq_compress_, be_.upload_floats(c.rope_compress.inv_freq(), 1, c.rope_dim() / 2)));

  layers_.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    Layer& L = layers_[l];
    L.type = c.attention_types[l];
    L.routing = c.moe_routing[l];
    const std::string p = "layers." + std::to_string(l) + ".";
    DI_TRYV(set(L.attn_norm, vec(p + "attn_norm.weight", d)));
    DI_TRYV(set(L.ffn_norm, vec(p + "ffn_norm.weight", d)));
    DI_TRYV(set(L.hc_attn_fn, mat(p + "hc_attn_fn", mix, hc * d)));
    DI_TRYV(set(L.hc_attn_base, vec(p + "hc_attn_base", mix)));
    DI_TRYV(set(L.hc_attn_scale, vec(p + "hc_attn_scale", 3)));
    DI_TRYV(set(L.hc_ffn_fn, mat(p + "hc_ffn_fn", mix, hc * d)));
    DI_TRYV(set(L.hc_ffn_base, vec(p + "hc_ffn_base", mix)));
    DI_TRYV(set(L.hc_ffn_scale, vec(p + "hc_ffn_scale", 3)));

    const std::string a = p + "attn.";
    DI_TRYV(set(L.wq_a, mat(a + "wq_a.weight", c.q_lora_rank, d)));
    DI_TRYV(set(L.q_norm, vec(a + "q_norm.weight", c.q_lora_rank)));
    DI_TRYV(set(L.wq_b, mat(a + "wq_b.weight", c.num_heads * hd, c.q_lora_rank)));
    DI_TRYV(set(L.wkv, mat(a + "wkv.weight", hd, d)));
    DI_TRYV(set(L.kv_norm, vec(a + "kv_norm.weight", hd)));
    DI_TRYV(set(L.wo_a, mat(a + "wo_a.weight", c.o_groups * c.o_lora_rank, c.num_heads * hd / c.o_groups)));
    DI_TRYV(set(L.wo_b, mat(a + "wo_b.weight", d, c.o_groups * c.o_lora_rank)));
    DI_TRYV(set(L.sinks, vec(a + "attn_sink", c.num_heads)));
    if (L.type != AttentionType::kSliding) {
      const int64_t rate = c.compress_rate(L.type), width = (L.type == AttentionType::kCsa ? 2 : 1) * hd;
      DI_TRYV(set(L.comp_wkv, mat(a + "compressor.wkv.weight", width, d)));
      DI_TRYV(set(L.comp_wgate, mat(a + "compressor.wgate.weight", width, d)));
      DI_TRYV(set(L.comp_ape, mat(a + "compressor.ape", rate, width)));
      DI_TRYV(set(L.comp_norm, vec(a + "compressor.norm.weight", hd)));
    }
    if (L.type == AttentionType::kCsa) {
      const int64_t ihd = c.index_head_dim, rate = c.csa_rate;
      DI_TRYV(set(L.idx_wq_b, mat(a + "indexer.wq_b.weight", c.index_heads * ihd, c.q_lora_rank)));
      DI_TRYV(set(L.idx_weights, mat(a + "indexer.weights_proj.weight", c.index_heads, d)));
      DI_TRYV(set(L.idx_comp_wkv, mat(a + "indexer.compressor.wkv.weight", 2 * ihd, d)));
      DI_TRYV(set(L.idx_comp_wgate, mat(a + "indexer.compressor.wgate.weight", 2 * ihd, d)));
      DI_TRYV(set(L.idx_comp_ape, mat(a + "indexer.compressor.ape", rate, 2 * ihd)));
      DI_TRYV(set(L.idx_comp_norm, vec(a + "indexer.compressor.norm.weight", ihd)));
    }

    const std::string f = p + "ffn.";
    const int64_t e = c.num_experts, inter = c.moe_intermediate_size;
    DI_TRYV(set(L.gate, mat(f + "gate.weight", e, d)));
    if (L.routing == MoeRouting::kHash) {
      DI_TRY(table, src.int_table(f + "gate.tid2eid", c.vocab_size, c.experts_per_token));
      for (int32_t v : table)
        if (v < 0 || v >= e) return make_error(Code::kModelFormat, "{}gate.tid2eid holds expert {} of {}", f, v, e);
      DI_TRYV(set(L.tid2eid, be_.upload_ints(table, c.vocab_size, c.experts_per_token)));
    } else {
      DI_TRYV(set(L.gate_bias, vec(f + "gate.bias", e)));
    }
    DI_TRYV(set(L.w1, src.stacked(f + "experts.", e, "w1.weight", inter, d)));
    DI_TRYV(set(L.w2, src.stacked(f + "experts.", e, "w2.weight", d, inter)));
    DI_TRYV(set(L.w3, src.stacked(f + "experts.", e, "w3.weight", inter, d)));
    DI_TRYV(set(L.shared_w1, mat(f + "shared_experts.w1.weight", inter, d)));
    DI_TRYV(set(L.shared_w2, mat(f + "shared_experts.w2.weight", d, inter)));
    DI_TRYV(set(L.shared_w3, mat(f + "shared_experts.w3.weight", inter, d)));
  }
  return src.done();
}

StateLayout DeepseekV4::state_layout_of(const ModelConfig& c, int block_tokens) {
  if (block_tokens <= 0) {
    int base = 1;
    for (AttentionType t : c.attention_types)
      if (int r = c.compress_rate(t)) base = std::lcm(base, r);
    block_tokens = base * ((256 + base - 1) / base);
  }
  std::vector<LayerStateShape> shapes;
  for (AttentionType t : c.attention_types)
    shapes.push_back({c.head_dim, c.sliding_window, c.compress_rate(t), t == AttentionType::kCsa,
                      t == AttentionType::kCsa ? c.index_head_dim : 0});
  return make_state_layout(shapes, block_tokens);
}

Tensor DeepseekV4::attention(int index, const Layer& L, Tensor x) {
  const ModelConfig& c = config_;
  const int64_t T = x.rows, hd = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const Rope rope{L.type == AttentionType::kSliding ? inv_freq_main_.get() : inv_freq_compress_.get(), c.rope_dim(),
                  static_cast<float>(L.type == AttentionType::kSliding ? c.rope_main.attention_factor
                                                                       : c.rope_compress.attention_factor)};

  // Every product of the layer's input, as one op: wq_a, wkv, then the compressor's and the indexer's.
  Tensor qa = be_.scratch_uninit(T, c.q_lora_rank), kv = be_.scratch_uninit(T, hd);
  std::vector<const DeviceWeight*> ws = {L.wq_a.get(), L.wkv.get()};
  std::vector<Tensor> outs = {qa, kv};
  Tensor ckv, cgate, ikv, igate, iw;
  if (L.type != AttentionType::kSliding) {
    ckv = be_.scratch_uninit(T, L.comp_wkv->rows);
    cgate = be_.scratch_uninit(T, L.comp_wgate->rows);
    ws.insert(ws.end(), {L.comp_wkv.get(), L.comp_wgate.get()});
    outs.insert(outs.end(), {ckv, cgate});
  }
  if (L.type == AttentionType::kCsa) {
    ikv = be_.scratch_uninit(T, L.idx_comp_wkv->rows);
    igate = be_.scratch_uninit(T, L.idx_comp_wgate->rows);
    iw = be_.scratch_uninit(T, c.index_heads);
    ws.insert(ws.end(), {L.idx_comp_wkv.get(), L.idx_comp_wgate.get(), L.idx_weights.get()});
    outs.insert(outs.end(), {ikv, igate, iw});
  }
  be_.linears(x, ws, outs);

  // The products of the normalised qa: wq_b, and the indexer's queries.
  Tensor q = be_.attention_query(index, T, c.num_heads * hd), iq;
  std::vector<const DeviceWeight*> q_ws = {L.wq_b.get()};
  std::vector<Tensor> q_outs = {q};
  if (L.type == AttentionType::kCsa) {
    iq = be_.scratch_uninit(T, c.index_heads * c.index_head_dim);
    q_ws.push_back(L.idx_wq_b.get());
    q_outs.push_back(iq);
  }
  be_.rms_norm_linears(qa, L.q_norm.get(), eps, q_ws, q_outs);
  be_.rms_norm_rope_pair(q, nullptr, kv, L.kv_norm.get(), eps, static_cast<int>(hd), rope);

  IntTensor selected;
  if (L.type != AttentionType::kSliding)
    be_.compress(index, ckv, cgate, Compressor{L.comp_ape.get(), L.comp_norm.get(), eps, false, rope});
  if (L.type == AttentionType::kCsa) {
    const int64_t ihd = c.index_head_dim;
    be_.compress(index, ikv, igate, Compressor{L.idx_comp_ape.get(), L.idx_comp_norm.get(), eps, true, rope});
    be_.rope(iq, static_cast<int>(ihd), rope, false);
    selected = be_.scratch_int_uninit(T, c.index_topk);
    be_.indexer_topk(index, iq, iw, c.index_heads, selected);
  }

  // K=V carried rope into the output: rotated back as it is written; then wo_a and wo_b.
  Tensor out = be_.scratch_uninit(T, c.hidden_size);
  be_.attention_projected(index, q, kv, *L.sinks, L.type == AttentionType::kCsa ? &selected : nullptr, &rope, *L.wo_a, c.o_groups,
                          *L.wo_b, out);
  be_.window_update(index, kv);
  return out;
}

Tensor DeepseekV4::moe(const Layer& L, Tensor x) {
  const ModelConfig& c = config_;
  const int64_t T = x.rows;
  Router router;
  router.gate = L.gate.get();
  router.bias = L.gate_bias.get();
  router.tid2eid = L.tid2eid.get();
  router.score = c.scoring == ScoringFunc::kSqrtSoftplus ? RouterScore::kSqrtSoftplus
                 : c.scoring == ScoringFunc::kSigmoid    ? RouterScore::kSigmoid
                                                         : RouterScore::kSoftmax;
  router.top_k = c.experts_per_token;
  router.scaling = static_cast<float>(c.routed_scaling_factor);
  IntTensor experts = be_.scratch_int_uninit(T, c.experts_per_token);
  Tensor weights = be_.scratch_uninit(T, c.experts_per_token);
  be_.route(x, router, experts, weights);
  Tensor out = be_.scratch_uninit(T, c.hidden_size);
  const float limit = static_cast<float>(c.swiglu_limit);
  be_.moe_ffn(x, experts, weights, Experts{L.w1.get(), L.w3.get(), L.w2.get(), limit},
              Experts{L.shared_w1.get(), L.shared_w3.get(), L.shared_w2.get(), limit}, out);
  return out;
}

Result<Tensor> DeepseekV4::run(const ForwardBatch& batch) {
  const ModelConfig& c = config_;
  const int64_t T = batch.rows(), d = c.hidden_size, hc = c.hc_mult;
  for (int64_t r = 0; r < T; ++r) {
    if (batch.tokens[r] < 0 || batch.tokens[r] >= c.vocab_size)
      return make_error(Code::kInvalidArgument, "token id {} is outside the vocabulary [0, {})", batch.tokens[r], c.vocab_size);
    if (batch.positions[r] < 0 || batch.positions[r] >= c.max_position_embeddings)
      return make_error(Code::kCapacity, "position {} exceeds max_position_embeddings {}", batch.positions[r], c.max_position_embeddings);
  }
  for (int32_t r : batch.logit_rows)
    if (r < 0 || r >= T) return make_error(Code::kInternal, "logit row {} outside the batch of {}", r, T);
  if (T == 0) return Tensor{};
  DI_TRYV(be_.begin_forward(batch));

  Tensor streams = be_.scratch_uninit(T, hc * d), spare = be_.scratch_uninit(T, hc * d);
  be_.embed(*embed_, streams);  // hc copies of the embedding

  const float eps = static_cast<float>(c.rms_norm_eps);
  HcMixAhead ahead;  // the next site's mix, where hc_post computed it
  for (int l = 0; l < c.num_layers; ++l) {
    const Layer& L = layers_[l];
    for (int site = 0; site < 2; ++site) {
      HyperConnection h;
      h.fn = site ? L.hc_ffn_fn.get() : L.hc_attn_fn.get();
      h.base = site ? L.hc_ffn_base.get() : L.hc_attn_base.get();
      h.scale = site ? L.hc_ffn_scale.get() : L.hc_attn_scale.get();
      h.hc = static_cast<int>(hc);
      h.sinkhorn_iters = c.hc_sinkhorn_iters;
      h.eps = static_cast<float>(c.hc_eps);
      h.norm_eps = eps;
      h.sublayer_norm = site ? L.ffn_norm.get() : L.attn_norm.get();
      // The sublayer's intermediates live until its output has been mixed into the other stream
      // buffer; then their memory serves the next sublayer.
      const ScratchMark mark = be_.scratch_mark();
      Tensor collapsed = be_.scratch_uninit(T, d), post = be_.scratch_uninit(T, hc), comb = be_.scratch_uninit(T, hc * hc);
      be_.hc_pre(streams, h, collapsed, post, comb, ahead);  // collapsed: normalised by the sublayer's norm
      Tensor out = site ? moe(L, collapsed) : attention(l, L, collapsed);
      // (the next site's mix weights: a backend may compute its mix of the new streams here)
      const DeviceWeight* next_fn = site == 0                 ? L.hc_ffn_fn.get()
                                    : l + 1 < c.num_layers ? layers_[l + 1].hc_attn_fn.get()
                                                           : hc_head_fn_.get();
      ahead = be_.hc_post(streams, out, post, comb, spare, next_fn);
      be_.scratch_release(mark);
      std::swap(streams, spare);
    }
  }

  HyperConnection head{hc_head_fn_.get(), hc_head_base_.get(), hc_head_scale_.get(), static_cast<int>(hc), 1,
                       static_cast<float>(c.hc_eps), eps, norm_.get()};
  Tensor final_x = be_.scratch_uninit(T, d);
  be_.hc_head(streams, head, final_x, ahead);  // with the final norm
  if (batch.logit_rows.empty()) return Tensor{};
  // Every row's logits (decode): the rows as they are; else the rows asked for.
  bool every_row = static_cast<int64_t>(batch.logit_rows.size()) == T;
  for (int64_t i = 0; every_row && i < T; ++i) every_row = batch.logit_rows[i] == i;
  Tensor picked = final_x;
  if (!every_row) {
    picked = be_.scratch_uninit(static_cast<int64_t>(batch.logit_rows.size()), d);
    be_.gather_rows(final_x, batch.logit_rows, picked);
  }
  Tensor out = be_.scratch_uninit(picked.rows, c.vocab_size);
  be_.linear(picked, *head_, out);
  return out;
}

Result<std::span<float>> DeepseekV4::forward(const ForwardBatch& batch) {
  if (batch.greedy_tokens) return make_error(Code::kInternal, "a batch for greedy tokens went to forward()");
  DI_TRY(out, run(batch));
  if (out.rows == 0 || !logits_to_host_) return std::span<float>();
  const size_t count = static_cast<size_t>(out.rows) * static_cast<size_t>(out.cols);
  if (count > logits_capacity_) {  // grown geometrically: a batch that fills up reallocates rarely
    const size_t want = std::max(count, 2 * logits_capacity_);
    logits_.reset();
    logits_capacity_ = 0;
    auto memory = be_.allocate_host(want);
    if (!memory) memory = be_.Backend::allocate_host(want);  // no page-locked memory: ordinary memory
    if (!memory) return memory.error();
    logits_ = std::move(memory).value();
    logits_capacity_ = want;
  }
  DI_TRYV(be_.read(out, logits_.get()));
  return std::span<float>(logits_.get(), count);
}

Result<Tensor> DeepseekV4::forward_logits(const ForwardBatch& batch) {
  if (batch.greedy_tokens) return make_error(Code::kInternal, "a batch for greedy tokens went to forward_logits()");
  return run(batch);
}

Result<std::span<const int32_t>> DeepseekV4::forward_greedy(const ForwardBatch& batch) {
  if (!batch.greedy_tokens) return make_error(Code::kInternal, "forward_greedy() needs a batch for greedy tokens");
  DI_TRY(out, run(batch));
  if (out.rows == 0) return std::span<const int32_t>();
  IntTensor best = be_.scratch_int_uninit(out.rows, 1);
  be_.argmax_rows(out, best);
  tokens_.resize(static_cast<size_t>(out.rows));
  DI_TRYV(be_.read_ints(best, tokens_.data()));
  return std::span<const int32_t>(tokens_);
}

}  // namespace deepinfer
