// The DeepSeek-V4 forward, written once against the Backend interface (the semantics it reproduces:
// docs/ARCHITECTURE.md, "The DeepSeek-V4 forward"). One call processes a batch of sequences, each
// with its new tokens (a prefill chunk or one decode token), against per-sequence state kept by the
// backend.
#pragma once

#include "backend/backend.h"
#include "model/config.h"
#include "util/result.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace deepinfer {

// Told the checkpoint bytes loaded so far and in all as weights load; returning false aborts the
// load (kCancelled).
using LoadProgress = std::function<bool(uint64_t done, uint64_t total)>;

class DeepseekV4 {
 public:
  // Loads config.json and the safetensors weights of `dir` onto `backend` (which must outlive the model).
  static Result<std::unique_ptr<DeepseekV4>> load(const std::string& dir, Backend& backend, const LoadProgress& progress = {});
  // A model of `config`'s shape with random weights made on the backend (Backend::random_weight;
  // nothing is read or uploaded): for benchmarks and tests of a model shape without its checkpoint.
  // The same seed gives the same weights on every backend.
  static Result<std::unique_ptr<DeepseekV4>> random(const ModelConfig& config, Backend& backend, uint64_t seed = 0);
  // The tensors a checkpoint of `config`'s shape holds (native names, logical shapes): what load
  // asks for, listed without reading or uploading weights (`backend` only takes the small tables the
  // model derives). For tools that write checkpoints.
  struct WeightSpec {
    enum class Kind { kMatrix, kExpert, kIntTable };
    std::string name;
    int64_t rows = 0, cols = 0;
    Kind kind = Kind::kMatrix;
  };
  static Result<std::vector<WeightSpec>> weight_specs(const ModelConfig& config, Backend& backend);
  // config.json of a model directory, or a config file given directly.
  static Result<ModelConfig> read_config(const std::string& path);
  ~DeepseekV4();

  // Where load and random take the weights from (defined in deepseek_v4.cpp).
  class WeightProvider;

  const ModelConfig& config() const { return config_; }
  // Number of weights (matrix, vector and table elements) the model loaded.
  int64_t parameters() const { return parameters_; }

  // The per-sequence state this model needs, with blocks of `block_tokens` positions (0: a default
  // that is a multiple of every compress rate).
  StateLayout state_layout(int block_tokens = 0) const { return state_layout_of(config_, block_tokens); }
  static StateLayout state_layout_of(const ModelConfig& config, int block_tokens = 0);

  // Runs the batch; returns the logits of batch.logit_rows, row-major [logit_rows x vocab], in host
  // memory the model owns (valid until the next forward; the caller may change it). Token ids and
  // positions are checked first: a bad batch is an error and changes no state.
  Result<std::span<float>> forward(const ForwardBatch& batch);
  // Greedy decoding without the logits: runs a batch with greedy_tokens set and returns the best
  // token of each logit row (Backend::argmax_rows: -1 for a row of -inf, -2 for a NaN or +inf),
  // valid until the next forward.
  Result<std::span<const int32_t>> forward_greedy(const ForwardBatch& batch);
  // Runs the batch and leaves the logits of batch.logit_rows on the backend ([logit_rows x vocab],
  // scratch valid until the next forward; an empty tensor for none), for Backend::sample_rows:
  // sampling without copying the rows to the host.
  Result<Tensor> forward_logits(const ForwardBatch& batch);
  // Benchmarks: with false, forward computes the logits but leaves them on the backend (it returns
  // an empty span and may still be running; Backend::finish waits for it).
  void set_logits_to_host(bool on) { logits_to_host_ = on; }

 private:
  struct Layer;
  DeepseekV4(ModelConfig config, Backend& backend);
  Result<void> load_weights(WeightProvider& src);
  // The forward up to the logits of batch.logit_rows, left on the backend (no rows: empty).
  Result<Tensor> run(const ForwardBatch& batch);
  Tensor attention(int index, const Layer& layer, Tensor x);
  Tensor moe(const Layer& layer, Tensor x);

  ModelConfig config_;
  Backend& be_;
  std::unique_ptr<DeviceWeight> embed_, head_, norm_, hc_head_fn_, hc_head_base_, hc_head_scale_;
  std::unique_ptr<DeviceWeight> inv_freq_main_, inv_freq_compress_;
  std::vector<Layer> layers_;
  bool logits_to_host_ = true;
  int64_t parameters_ = 0;
  HostFloats logits_;  // allocate_host memory, grown to the largest forward's logits
  size_t logits_capacity_ = 0;
  std::vector<int32_t> tokens_;  // forward_greedy's answer
};

}  // namespace deepinfer
