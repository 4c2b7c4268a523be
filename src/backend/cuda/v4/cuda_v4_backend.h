// DeepSeek-V4's op families on the CUDA backend: hyper-connections, compressors and the sliding
// window, the lightning indexer, the attention. Everything else (weights, state, forwards, graphs,
// products, norms, MoE) is CudaDevice's; a second architecture (V4.1's CSA2 and single-pass mHC)
// would sit beside this class on the same device, with its own families where they differ.
#pragma once

#include "backend/cuda/cuda_device.h"
#include "key_table.h"

namespace deepinfer {

class CudaV4Backend final : public CudaDevice {
 public:
  static Result<std::unique_ptr<Backend>> create(const BackendOptions& options, const CudaFeatures& features);
  ~CudaV4Backend() override;

  // --- hyper-connections (hyper_connection.cpp)
  void hc_pre(Tensor streams, const HyperConnection& hc, Tensor collapsed, Tensor post, Tensor comb, HcMixAhead ahead) override;
  HcMixAhead hc_post(Tensor streams, Tensor out, Tensor post, Tensor comb, Tensor new_streams, const DeviceWeight* next_fn) override;
  void hc_head(Tensor streams, const HyperConnection& hc, Tensor out, HcMixAhead ahead) override;

  // --- compressors and window (compressor.cpp)
  void compress(int layer, Tensor kv, Tensor gate, const Compressor& c) override;
  void window_update(int layer, Tensor kv) override;

  // --- indexer and top-k (indexer.cpp)
  void indexer_topk(int layer, Tensor q, Tensor weights, int heads, IntTensor out) override;

  // --- attention (attention.cpp)
  Tensor attention_query(int layer, int64_t rows, int64_t cols) override;
  void attention(int layer, Tensor q, Tensor kv, const DeviceWeight& sinks, const IntTensor* selected, Tensor out,
                 const Rope* unrope) override;
  void attention_projected(int layer, Tensor q, Tensor kv, const DeviceWeight& sinks, const IntTensor* selected, const Rope* unrope,
                           const DeviceWeight& wo_a, int groups, const DeviceWeight& wo_b, Tensor out) override;

 protected:
  bool defer_query_norm(const DeviceWeight* weight, float eps, int head_dim, const kn::RopeDev& r) override;
  void reset_forward_state() override { pending_mix_ = {}; }

 private:
  CudaV4Backend(int device, const BackendOptions& options) : CudaDevice(device, options) {}
  Result<void> init_v4();

  // hyper_connection.cpp
  const float* sublayer_norm(const HyperConnection& hc, int64_t d);
  std::pair<float*, int> mix_product(Tensor x, const CudaWeight& w, int n, HcMixAhead ahead);

  // indexer.cpp
  bool index_key_table(int layer, int heads, kn::KeyTableDev& t);

  // attention.cpp
  static constexpr int kMqaHd = 512;  // the tensor-core attention kernels' head_dim
  static int mqa_splits(int64_t rows, int heads, int head_tile);
  Tensor query_f32(Tensor q);
  bool apply_query_norm(Tensor q);
  bool fused_attention_fits(int layer, int64_t rows, int64_t cols) const;
  std::pair<int64_t, int64_t> wgmma_table_rows(int layer, int64_t rows) const;
  std::pair<int64_t, int64_t> key_table_extent(const kn::LayerDev& L, kn::KeyTableKind kind) const;
  bool wgmma_attention(int layer, Tensor q, Tensor kv, const float* sinks, const IntTensor* selected, int heads, kn::RopeDev un,
                       kn::bf16_t* ob);

  // The next site's mix that hc_post computed with the new streams (decode), kept in post_mix_ for
  // the hc_pre / hc_head given its HcMixAhead.
  static constexpr size_t kPostMixFloats = size_t(1) << 16;
  float* post_mix_ = nullptr;
  struct PendingMix {
    uint64_t id = 0;
    const float* streams = nullptr;
    const DeviceWeight* fn = nullptr;
    int splits = 0;
  } pending_mix_;
  uint64_t mix_serial_ = 0;
};

}  // namespace deepinfer
