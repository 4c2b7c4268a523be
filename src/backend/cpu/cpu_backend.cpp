// The CPU reference backend: fp32 everywhere, weights dequantized at upload, batch-invariant matrix
// products (dot_gemm.h) and a thread pool. Written for clarity first: it is what the CUDA backend and
// every optimisation are checked against.
#include "backend/backend.h"
#include "backend/cpu/dot_gemm.h"
#include "backend/random_fill.h"
#include "sample/row_math.h"
#include "sample/token_choice.h"
#include "util/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <span>

namespace deepinfer {
namespace {

struct CpuWeight final : DeviceWeight {
  std::vector<float> f;
  std::vector<int32_t> i;
};

const CpuWeight& cpu(const DeviceWeight& w) { return static_cast<const CpuWeight&>(w); }
const float* fdata(const DeviceWeight* w) { return w ? cpu(*w).f.data() : nullptr; }

float* row(Tensor t, int64_t r) { return t.data + r * t.cols; }

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x / (1.0f + std::exp(-x)); }

// torch.nn.functional.softplus (beta 1, threshold 20)
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Rotates the trailing rope_dim channels of one head vector by `position` (negative angle if inverse).
void rotate(float* head, int head_dim, const Rope& rope, int32_t position, bool inverse) {
  const float* inv_freq = fdata(rope.inv_freq);
  float* x = head + head_dim - rope.rope_dim;
  for (int i = 0; i < rope.rope_dim / 2; ++i) {
    float angle = static_cast<float>(position) * inv_freq[i];
    float c = std::cos(angle) * rope.attention_factor;
    float s = std::sin(angle) * rope.attention_factor;
    if (inverse) s = -s;
    float x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = x0 * c - x1 * s;
    x[2 * i + 1] = x1 * c + x0 * s;
  }
}

void rms_normalize(const float* x, const float* weight, float eps, int n, float* out) {
  double ss = 0.0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  float inv = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
  for (int i = 0; i < n; ++i) out[i] = weight ? weight[i] * (x[i] * inv) : x[i] * inv;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(std::unique_ptr<ThreadPool> pool) : pool_(std::move(pool)) {}

  std::string name() const override { return "cpu"; }

  Result<std::unique_ptr<DeviceWeight>> upload(const WeightSource& w) override {
    DI_TRYV(validate_weight_source(w));
    auto out = std::make_unique<CpuWeight>();
    out->rows = w.rows;
    out->cols = w.cols;
    out->f.resize(static_cast<size_t>(w.numel()));
    dequantize_to_f32(w, out->f.data());
    return std::unique_ptr<DeviceWeight>(std::move(out));
  }

  Result<std::unique_ptr<DeviceWeight>> upload_stacked(const std::vector<WeightSource>& ws) override {
    if (ws.empty()) return make_error(Code::kInternal, "upload_stacked of nothing");
    auto out = std::make_unique<CpuWeight>();
    out->count = static_cast<int64_t>(ws.size());
    out->rows = ws[0].rows;
    out->cols = ws[0].cols;
    const size_t each = static_cast<size_t>(ws[0].numel());
    out->f.resize(each * ws.size());
    for (size_t e = 0; e < ws.size(); ++e) {
      if (ws[e].rows != out->rows || ws[e].cols != out->cols)
        return make_error(Code::kModelFormat, "tensor \"{}\": shape [{}, {}] differs from its siblings' [{}, {}]", ws[e].name,
                          ws[e].rows, ws[e].cols, out->rows, out->cols);
      DI_TRYV(validate_weight_source(ws[e]));
      dequantize_to_f32(ws[e], out->f.data() + e * each);
    }
    return std::unique_ptr<DeviceWeight>(std::move(out));
  }

  Result<std::unique_ptr<DeviceWeight>> upload_floats(const std::vector<float>& v, int64_t rows, int64_t cols) override {
    auto out = std::make_unique<CpuWeight>();
    out->rows = rows;
    out->cols = cols;
    out->f = v;
    return std::unique_ptr<DeviceWeight>(std::move(out));
  }

  Result<std::unique_ptr<DeviceWeight>> upload_ints(const std::vector<int32_t>& v, int64_t rows, int64_t cols) override {
    auto out = std::make_unique<CpuWeight>();
    out->rows = rows;
    out->cols = cols;
    out->i = v;
    return std::unique_ptr<DeviceWeight>(std::move(out));
  }

  Result<std::unique_ptr<DeviceWeight>> random_weight(int64_t count, int64_t rows, int64_t cols, float mean, float stddev, uint64_t seed,
                                                      WeightFormat) override {
    if (count <= 0 || rows <= 0 || cols <= 0)
      return make_error(Code::kInternal, "random_weight of {} x [{}, {}]", count, rows, cols);
    auto out = std::make_unique<CpuWeight>();
    out->count = count;
    out->rows = rows;
    out->cols = cols;
    const size_t n = static_cast<size_t>(count * rows * cols);
    try {
      out->f.resize(n);
    } catch (const std::bad_alloc&) {
      return make_error(Code::kOutOfMemory, "cannot allocate a random weight of {} floats", n);
    }
    float* f = out->f.data();
    pool_->parallel_for(n, 1 << 16, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) f[i] = random_value(seed, i, mean, stddev);
    });
    return std::unique_ptr<DeviceWeight>(std::move(out));
  }

  Result<void> randomize_state(uint64_t seed) override {
    auto fill = [&](std::vector<float>& v, uint64_t s) {
      float* f = v.data();
      pool_->parallel_for(v.size(), 1 << 16, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) f[i] = random_value(s, i, 0.0f, 0.57735027f);  // uniform [-1, 1)
      });
    };
    fill(slots_, seed);
    fill(blocks_, seed ^ 0x5bd1e995u);
    return ok();
  }

  ScratchMark scratch_mark() override { return ScratchMark{arena_.size(), int_arena_.size()}; }

  void scratch_release(ScratchMark m) override {
    if (m.a < arena_.size()) arena_.resize(m.a);
    if (m.b < int_arena_.size()) int_arena_.resize(m.b);
  }

  Result<void> allocate_state(const StateLayout& layout, int n_slots, int n_blocks) override {
    layout_ = layout;
    n_slots_ = n_slots;
    n_blocks_ = n_blocks;
    try {
      slots_.assign(layout.slot_floats * static_cast<size_t>(n_slots), 0.0f);
      blocks_.assign(layout.block_floats * static_cast<size_t>(n_blocks), 0.0f);
    } catch (const std::bad_alloc&) {
      return make_error(Code::kOutOfMemory, "cannot allocate model state for {} slots and {} blocks", n_slots, n_blocks);
    }
    return ok();
  }

  void reset_slot(int slot) override {
    std::fill_n(slot_ptr(slot), layout_.slot_floats, 0.0f);
  }

  Result<void> begin_forward(const ForwardBatch& batch) override {
    arena_.clear();
    int_arena_.clear();
    for (const auto& s : batch.seqs) {
      if (s.slot < 0 || s.slot >= n_slots_) return make_error(Code::kInternal, "slot {} outside the {} allocated", s.slot, n_slots_);
      if (s.n_blocks < layout_.blocks_for(static_cast<int64_t>(s.n_past) + s.n_tokens))
        return make_error(Code::kInternal, "sequence in slot {} has {} blocks for {} tokens", s.slot, s.n_blocks, s.n_past + s.n_tokens);
      for (int32_t b = 0; b < s.n_blocks; ++b) {
        int32_t id = batch.block_tables[s.table_offset + b];
        if (id < 0 || id >= n_blocks_) return make_error(Code::kInternal, "block id {} outside the {} allocated", id, n_blocks_);
      }
    }
    batch_ = &batch;
    return ok();
  }

  Tensor scratch(int64_t rows, int64_t cols) override {
    arena_.push_back(std::vector<float>(static_cast<size_t>(rows * cols), 0.0f));
    return Tensor{arena_.back().data(), rows, cols};
  }

  IntTensor scratch_int(int64_t rows, int64_t cols) override {
    int_arena_.push_back(std::vector<int32_t>(static_cast<size_t>(rows * cols), 0));
    return IntTensor{int_arena_.back().data(), rows, cols};
  }

  Result<void> read(Tensor t, float* host) override {
    std::memcpy(host, t.data, sizeof(float) * static_cast<size_t>(t.rows * t.cols));
    return ok();
  }

  Result<void> write(Tensor t, const float* host) override {
    std::memcpy(t.data, host, sizeof(float) * static_cast<size_t>(t.rows * t.cols));
    return ok();
  }

  Result<void> read_ints(IntTensor t, int32_t* host) override {
    std::memcpy(host, t.data, sizeof(int32_t) * static_cast<size_t>(t.rows * t.cols));
    return ok();
  }

  Result<void> write_ints(IntTensor t, const int32_t* host) override {
    std::memcpy(t.data, host, sizeof(int32_t) * static_cast<size_t>(t.rows * t.cols));
    return ok();
  }

  void embed(const DeviceWeight& table, Tensor out) override {
    const auto& w = cpu(table);
    for (int64_t r = 0; r < out.rows; ++r)
      for (int64_t c = 0; c + w.cols <= out.cols; c += w.cols)
        std::memcpy(row(out, r) + c, w.f.data() + static_cast<size_t>(batch_->tokens[r]) * w.cols, sizeof(float) * w.cols);
  }

  void linear(Tensor x, const DeviceWeight& w, Tensor out) override {
    gemm_nt(x.data, x.cols, fdata(&w), w.cols, out.data, out.cols, x.rows, w.rows, w.cols);
  }

  void grouped_linear(Tensor x, const DeviceWeight& w, int groups, Tensor out) override {
    const int64_t k = x.cols / groups, n = w.rows / groups;
    for (int g = 0; g < groups; ++g)
      gemm_nt(x.data + g * k, x.cols, fdata(&w) + g * n * w.cols, w.cols, out.data + g * n, out.cols, x.rows, n, k);
  }

  void rms_norm(Tensor x, const DeviceWeight* weight, float eps, int group, Tensor out) override {
    const float* wt = fdata(weight);
    const int64_t groups_per_row = x.cols / group;
    pool_->parallel_for(static_cast<size_t>(x.rows * groups_per_row), 64, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        int64_t r = static_cast<int64_t>(i) / groups_per_row, g = static_cast<int64_t>(i) % groups_per_row;
        rms_normalize(row(x, r) + g * group, wt, eps, group, row(out, r) + g * group);
      }
    });
  }

  void rope(Tensor x, int head_dim, const Rope& rope, bool inverse) override {
    const int64_t heads = x.cols / head_dim;
    pool_->parallel_for(static_cast<size_t>(x.rows), 16, [&](size_t b, size_t e) {
      for (size_t r = b; r < e; ++r)
        for (int64_t h = 0; h < heads; ++h) rotate(row(x, r) + h * head_dim, head_dim, rope, batch_->positions[r], inverse);
    });
  }

  void add(Tensor a, Tensor b) override {
    for (int64_t i = 0; i < a.rows * a.cols; ++i) a.data[i] += b.data[i];
  }

  void gather_rows(Tensor x, const std::vector<int32_t>& rows, Tensor out) override {
    for (size_t i = 0; i < rows.size(); ++i) std::memcpy(row(out, i), row(x, rows[i]), sizeof(float) * x.cols);
  }

  void argmax_rows(Tensor x, IntTensor out) override {
    for (int64_t r = 0; r < x.rows; ++r) {
      const std::span<const float> values(row(x, r), static_cast<size_t>(x.cols));
      out.data[r] = first_invalid_logit(values) >= 0 ? -2 : greedy_token(values);
    }
  }

  // In place (the logits are host memory), the rows on the pool: sample_row's results exactly.
  Result<void> sample_rows(Tensor logits, std::span<const RowSampling> rows, std::vector<Result<SampleResult>>& out) override {
    out.clear();
    DI_TRYV(check_row_count(logits.rows, rows.size()));
    sample_rows_on_host(logits.data, logits.cols, rows, out, pool_.get());
    return ok();
  }

  void hc_pre(Tensor streams, const HyperConnection& hc, Tensor collapsed, Tensor post, Tensor comb, HcMixAhead) override {
    const int n = hc.hc, mix_size = (2 + n) * n;
    const int64_t d = collapsed.cols;
    Tensor mix = hc_mix(streams, hc, mix_size);
    const float* base = fdata(hc.base);
    const float* scale = fdata(hc.scale);
    pool_->parallel_for(static_cast<size_t>(streams.rows), 8, [&](size_t b, size_t e) {
      std::vector<float> pre(n), c(static_cast<size_t>(n * n));
      for (size_t t = b; t < e; ++t) {
        const float* m = row(mix, t);
        for (int i = 0; i < n; ++i) {
          pre[i] = sigmoid(m[i] * scale[0] + base[i]) + hc.eps;
          row(post, t)[i] = 2.0f * sigmoid(m[n + i] * scale[1] + base[n + i]);
        }
        // comb: row softmax + eps, column normalise, then (iters - 1) rounds of row/column normalising.
        for (int i = 0; i < n; ++i) {
          float* ci = c.data() + i * n;
          float mx = -INFINITY;
          for (int j = 0; j < n; ++j) {
            ci[j] = m[2 * n + i * n + j] * scale[2] + base[2 * n + i * n + j];
            mx = std::max(mx, ci[j]);
          }
          float sum = 0.0f;
          for (int j = 0; j < n; ++j) sum += (ci[j] = std::exp(ci[j] - mx));
          for (int j = 0; j < n; ++j) ci[j] = ci[j] / sum + hc.eps;
        }
        normalise_columns(c.data(), n, hc.eps);
        for (int it = 1; it < hc.sinkhorn_iters; ++it) {
          normalise_rows(c.data(), n, hc.eps);
          normalise_columns(c.data(), n, hc.eps);
        }
        std::copy(c.begin(), c.end(), row(comb, t));
        float* out = row(collapsed, t);
        const float* s = row(streams, t);
        for (int64_t k = 0; k < d; ++k) {
          float acc = 0.0f;
          for (int i = 0; i < n; ++i) acc += pre[i] * s[i * d + k];
          out[k] = acc;
        }
      }
    });
    if (hc.sublayer_norm) rms_norm(collapsed, hc.sublayer_norm, hc.norm_eps, static_cast<int>(d), collapsed);
  }

  HcMixAhead hc_post(Tensor streams, Tensor out, Tensor post, Tensor comb, Tensor new_streams, const DeviceWeight* = nullptr) override {
    const int n = static_cast<int>(post.cols);
    const int64_t d = out.cols;
    pool_->parallel_for(static_cast<size_t>(streams.rows), 8, [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) {
        const float* s = row(streams, t);
        const float* o = row(out, t);
        const float* c = row(comb, t);
        float* ns = row(new_streams, t);
        for (int k = 0; k < n; ++k)
          for (int64_t x = 0; x < d; ++x) {
            float acc = row(post, t)[k] * o[x];
            for (int j = 0; j < n; ++j) acc += c[j * n + k] * s[j * d + x];
            ns[k * d + x] = acc;
          }
      }
    });
    return {};  // (each site computes its own mix)
  }

  void hc_head(Tensor streams, const HyperConnection& hc, Tensor out, HcMixAhead) override {
    const int n = hc.hc;
    const int64_t d = out.cols;
    Tensor mix = hc_mix(streams, hc, n);
    const float* base = fdata(hc.base);
    const float scale = fdata(hc.scale)[0];
    for (int64_t t = 0; t < streams.rows; ++t) {
      const float* s = row(streams, t);
      float* o = row(out, t);
      for (int64_t k = 0; k < d; ++k) o[k] = 0.0f;
      for (int i = 0; i < n; ++i) {
        float pre = sigmoid(row(mix, t)[i] * scale + base[i]) + hc.eps;
        for (int64_t k = 0; k < d; ++k) o[k] += pre * s[i * d + k];
      }
    }
    if (hc.sublayer_norm) rms_norm(out, hc.sublayer_norm, hc.norm_eps, static_cast<int>(d), out);
  }

  void compress(int layer, Tensor kv, Tensor gate, const Compressor& c) override {
    const LayerStateLayout& L = layout_.layers[layer];
    const int dim = c.indexer ? L.index_dim : L.head_dim;
    const int width = c.indexer ? L.index_width() : L.width();
    const int rate = L.rate, ring_rows = L.ring_rows();
    const size_t ring_off = c.indexer ? L.index_ring_offset : L.ring_offset;
    const size_t store_off = c.indexer ? L.index_key_offset : L.entry_offset;
    const float* ape = fdata(c.ape);
    const float* norm = fdata(c.norm);
    pool_->parallel_for(batch_->seqs.size(), 1, [&](size_t b, size_t e) {
      std::vector<float> logits(static_cast<size_t>(2 * rate)), values(static_cast<size_t>(2 * rate)), entry(static_cast<size_t>(dim));
      for (size_t si = b; si < e; ++si) {
        const SequenceStep& s = batch_->seqs[si];
        float* ring = slot_ptr(s.slot) + ring_off;
        for (int32_t i = 0; i < s.n_tokens; ++i) {
          const int32_t p = s.n_past + i;
          float* ring_row = ring + static_cast<size_t>(p % ring_rows) * 2 * width;
          std::memcpy(ring_row, row(kv, s.first_row + i), sizeof(float) * width);
          for (int ch = 0; ch < width; ++ch)
            ring_row[width + ch] = row(gate, s.first_row + i)[ch] + ape[(p % rate) * width + ch];
          if ((p + 1) % rate) continue;
          const int32_t w = (p + 1) / rate - 1;  // the window that just closed
          for (int ch = 0; ch < dim; ++ch) {
            int n = 0;
            if (L.overlap && w > 0) {  // first half of the previous window (Ca)
              for (int j = 0; j < rate; ++j) {
                const float* rr = ring + static_cast<size_t>(((w - 1) * rate + j) % ring_rows) * 2 * width;
                values[n] = rr[ch];
                logits[n++] = rr[width + ch];
              }
            }
            const int half = L.overlap ? dim : 0;  // second half (Cb) of this window when overlapping
            for (int j = 0; j < rate; ++j) {
              const float* rr = ring + static_cast<size_t>((w * rate + j) % ring_rows) * 2 * width;
              values[n] = rr[half + ch];
              logits[n++] = rr[width + half + ch];
            }
            float mx = -INFINITY;
            for (int k = 0; k < n; ++k) mx = std::max(mx, logits[k]);
            float sum = 0.0f, acc = 0.0f;
            for (int k = 0; k < n; ++k) sum += (logits[k] = std::exp(logits[k] - mx));
            for (int k = 0; k < n; ++k) acc += values[k] * (logits[k] / sum);
            entry[ch] = acc;
          }
          rms_normalize(entry.data(), norm, c.norm_eps, dim, entry.data());
          rotate(entry.data(), dim, c.rope, w * rate, false);
          std::memcpy(entry_ptr(s, layer, w, store_off, dim), entry.data(), sizeof(float) * dim);
        }
      }
    });
  }

  void indexer_topk(int layer, Tensor q, Tensor weights, int heads, IntTensor out) override {
    const LayerStateLayout& L = layout_.layers[layer];
    const int dim = L.index_dim;
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(dim));
    const float w_scale = 1.0f / std::sqrt(static_cast<float>(heads));
    const int k = static_cast<int>(out.cols);
    pool_->parallel_for(static_cast<size_t>(q.rows), 1, [&](size_t b, size_t e) {
      std::vector<float> scores;
      std::vector<int32_t> order;
      for (size_t r = b; r < e; ++r) {
        const SequenceStep& s = batch_->seqs[batch_->row_seq[r]];
        const int32_t visible = (batch_->positions[r] + 1) / L.rate;
        scores.assign(static_cast<size_t>(visible), 0.0f);
        for (int32_t w = 0; w < visible; ++w) {
          const float* key = entry_ptr(s, layer, w, L.index_key_offset, dim);
          float total = 0.0f;
          for (int h = 0; h < heads; ++h) {
            const float* qh = row(q, r) + h * dim;
            float dot = 0.0f;
            for (int c = 0; c < dim; ++c) dot += qh[c] * key[c];
            total += std::max(dot, 0.0f) * q_scale * (row(weights, r)[h] * w_scale);
          }
          scores[w] = total;
        }
        order.resize(static_cast<size_t>(visible));
        std::iota(order.begin(), order.end(), 0);
        const int take = std::min(k, visible);
        std::partial_sort(order.begin(), order.begin() + take, order.end(), [&](int32_t a, int32_t c) {
          return scores[a] > scores[c] || (scores[a] == scores[c] && a < c);
        });
        int32_t* o = out.data + r * out.cols;
        for (int i = 0; i < k; ++i) o[i] = i < take ? order[i] : -1;
      }
    });
  }

  void attention(int layer, Tensor q, Tensor kv, const DeviceWeight& sinks, const IntTensor* selected, Tensor out,
                 const Rope* unrope = nullptr) override {
    const LayerStateLayout& L = layout_.layers[layer];
    const int hd = L.head_dim;
    const int64_t heads = q.cols / hd;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const float* sink = fdata(&sinks);
    pool_->parallel_for(static_cast<size_t>(q.rows), 1, [&](size_t b, size_t e) {
      std::vector<const float*> keys;
      std::vector<float> logits;
      for (size_t r = b; r < e; ++r) {
        const SequenceStep& s = batch_->seqs[batch_->row_seq[r]];
        const int32_t p = batch_->positions[r];
        keys.clear();
        const float* ring = slot_ptr(s.slot) + L.window_offset;
        for (int32_t j = std::max(0, p - L.window + 1); j <= p; ++j)
          keys.push_back(j >= s.n_past ? row(kv, s.first_row + (j - s.n_past)) : ring + static_cast<size_t>(j % L.window) * hd);
        if (L.rate > 0) {
          if (selected) {
            const int32_t* sel = selected->data + r * selected->cols;
            for (int64_t i = 0; i < selected->cols; ++i)
              if (sel[i] >= 0) keys.push_back(entry_ptr(s, layer, sel[i], L.entry_offset, hd));
          } else {
            for (int32_t w = 0; w < (p + 1) / L.rate; ++w) keys.push_back(entry_ptr(s, layer, w, L.entry_offset, hd));
          }
        }
        logits.resize(keys.size());
        for (int64_t h = 0; h < heads; ++h) {
          const float* qh = row(q, r) + h * hd;
          float mx = sink[h];
          for (size_t j = 0; j < keys.size(); ++j) {
            float dot = 0.0f;
            for (int c = 0; c < hd; ++c) dot += qh[c] * keys[j][c];
            logits[j] = dot * scale;
            mx = std::max(mx, logits[j]);
          }
          float denom = std::exp(sink[h] - mx);
          for (size_t j = 0; j < keys.size(); ++j) denom += (logits[j] = std::exp(logits[j] - mx));
          float* o = row(out, r) + h * hd;
          for (int c = 0; c < hd; ++c) o[c] = 0.0f;
          for (size_t j = 0; j < keys.size(); ++j) {
            const float p_j = logits[j] / denom;
            for (int c = 0; c < hd; ++c) o[c] += p_j * keys[j][c];
          }
        }
      }
    });
    if (unrope) rope(out, hd, *unrope, true);
  }

  void window_update(int layer, Tensor kv) override {
    const LayerStateLayout& L = layout_.layers[layer];
    for (const SequenceStep& s : batch_->seqs) {
      float* ring = slot_ptr(s.slot) + L.window_offset;
      for (int32_t i = std::max(0, s.n_tokens - L.window); i < s.n_tokens; ++i)
        std::memcpy(ring + static_cast<size_t>((s.n_past + i) % L.window) * L.head_dim, row(kv, s.first_row + i),
                    sizeof(float) * L.head_dim);
    }
  }

  void route(Tensor x, const Router& r, IntTensor experts, Tensor weights) override {
    const int64_t n_exp = r.gate->rows;
    Tensor logits = scratch(x.rows, n_exp);
    linear(x, *r.gate, logits);
    const float* bias = fdata(r.bias);
    for (int64_t t = 0; t < x.rows; ++t) {
      float* sc = row(logits, t);
      switch (r.score) {
        case RouterScore::kSqrtSoftplus:
          for (int64_t e = 0; e < n_exp; ++e) sc[e] = std::sqrt(softplus(sc[e]));
          break;
        case RouterScore::kSigmoid:
          for (int64_t e = 0; e < n_exp; ++e) sc[e] = sigmoid(sc[e]);
          break;
        case RouterScore::kSoftmax: {
          float mx = *std::max_element(sc, sc + n_exp), sum = 0.0f;
          for (int64_t e = 0; e < n_exp; ++e) sum += (sc[e] = std::exp(sc[e] - mx));
          for (int64_t e = 0; e < n_exp; ++e) sc[e] /= sum;
          break;
        }
      }
      int32_t* chosen = experts.data + t * r.top_k;
      if (r.tid2eid) {
        const auto& table = cpu(*r.tid2eid).i;
        for (int i = 0; i < r.top_k; ++i) chosen[i] = table[static_cast<size_t>(batch_->tokens[t]) * r.top_k + i];
      } else {
        std::vector<int32_t> order(static_cast<size_t>(n_exp));
        std::iota(order.begin(), order.end(), 0);
        auto key = [&](int32_t e) { return sc[e] + (bias ? bias[e] : 0.0f); };
        std::partial_sort(order.begin(), order.begin() + r.top_k, order.end(),
                          [&](int32_t a, int32_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
        std::copy(order.begin(), order.begin() + r.top_k, chosen);
      }
      float sum = 0.0f;
      for (int i = 0; i < r.top_k; ++i) sum += sc[chosen[i]];
      for (int i = 0; i < r.top_k; ++i) row(weights, t)[i] = sc[chosen[i]] / (sum + 1e-20f) * r.scaling;
    }
  }

  void moe_experts(Tensor x, IntTensor experts, Tensor weights, const Experts& e, Tensor out) override {
    const auto& w1 = cpu(*e.w1);
    const int64_t n_exp = w1.count, inter = w1.rows, d = x.cols;
    const int k = static_cast<int>(experts.cols);
    // Rows routed to each expert, in row order; experts are applied in index order.
    std::vector<std::vector<std::pair<int64_t, float>>> assigned(static_cast<size_t>(n_exp));
    for (int64_t t = 0; t < x.rows; ++t)
      for (int i = 0; i < k; ++i) assigned[experts.data[t * k + i]].emplace_back(t, row(weights, t)[i]);
    for (int64_t ex = 0; ex < n_exp; ++ex) {
      const auto& rows = assigned[ex];
      if (rows.empty()) continue;
      const int64_t m = static_cast<int64_t>(rows.size());
      std::vector<float> xin(static_cast<size_t>(m * d)), g(static_cast<size_t>(m * inter)), u(g.size()), y(xin.size());
      for (int64_t i = 0; i < m; ++i) std::memcpy(xin.data() + i * d, row(x, rows[i].first), sizeof(float) * d);
      const size_t off13 = static_cast<size_t>(ex * inter * d);
      gemm_nt(xin.data(), d, cpu(*e.w1).f.data() + off13, d, g.data(), inter, m, inter, d);
      gemm_nt(xin.data(), d, cpu(*e.w3).f.data() + off13, d, u.data(), inter, m, inter, d);
      swiglu_inplace(g.data(), u.data(), g.size(), e.limit);
      gemm_nt(g.data(), inter, cpu(*e.w2).f.data() + static_cast<size_t>(ex * d * inter), inter, y.data(), d, m, d, inter);
      for (int64_t i = 0; i < m; ++i) {
        float* o = row(out, rows[i].first);
        for (int64_t c = 0; c < d; ++c) o[c] += y[i * d + c] * rows[i].second;
      }
    }
  }

  void swiglu(Tensor x, const DeviceWeight& w1, const DeviceWeight& w3, const DeviceWeight& w2, float limit, Tensor out) override {
    const int64_t inter = w1.rows;
    Tensor g = scratch(x.rows, inter), u = scratch(x.rows, inter);
    linear(x, w1, g);
    linear(x, w3, u);
    swiglu_inplace(g.data, u.data, static_cast<size_t>(x.rows * inter), limit);
    linear(g, w2, out);
  }

 private:
  // c = a @ b^T, columns of c split over the pool, or rows when there are few columns (every output
  // is computed on its own, so no split changes a value). Must not be called from inside a pool task.
  void gemm_nt(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
    constexpr int64_t kMinColumns = 64, kMinRows = 16;
    if (pool_->size() == 1 || m * n * k < (1 << 20)) return dot_gemm_nt(a, lda, b, ldb, c, ldc, m, n, k);
    if (n >= 2 * kMinColumns) {
      pool_->parallel_for(static_cast<size_t>(n), kMinColumns, [&](size_t begin, size_t end) {
        const auto j = static_cast<int64_t>(begin);
        dot_gemm_nt(a, lda, b + j * ldb, ldb, c + j, ldc, m, static_cast<int64_t>(end) - j, k);
      });
    } else {
      pool_->parallel_for(static_cast<size_t>(m), kMinRows, [&](size_t begin, size_t end) {
        const auto i = static_cast<int64_t>(begin);
        dot_gemm_nt(a + i * lda, lda, b, ldb, c + i * ldc, ldc, static_cast<int64_t>(end) - i, n, k);
      });
    }
  }

  float* slot_ptr(int32_t slot) { return slots_.data() + static_cast<size_t>(slot) * layout_.slot_floats; }

  float* entry_ptr(const SequenceStep& s, int layer, int32_t w, size_t offset, int dim) {
    const LayerStateLayout& L = layout_.layers[layer];
    const int32_t block = batch_->block_tables[s.table_offset + (w * L.rate) / layout_.block_tokens];
    return blocks_.data() + static_cast<size_t>(block) * layout_.block_floats + offset +
           static_cast<size_t>(w % L.entries_per_block) * dim;
  }

  // mix[t] = rms_normalised(streams[t]) @ fn^T, the hyper-connection's logits.
  Tensor hc_mix(Tensor streams, const HyperConnection& hc, int mix_size) {
    Tensor normed = scratch(streams.rows, streams.cols), mix = scratch(streams.rows, mix_size);
    rms_norm(streams, nullptr, hc.norm_eps, static_cast<int>(streams.cols), normed);
    linear(normed, *hc.fn, mix);
    return mix;
  }

  static void normalise_rows(float* c, int n, float eps) {
    for (int i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int j = 0; j < n; ++j) sum += c[i * n + j];
      for (int j = 0; j < n; ++j) c[i * n + j] /= sum + eps;
    }
  }

  static void normalise_columns(float* c, int n, float eps) {
    for (int j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int i = 0; i < n; ++i) sum += c[i * n + j];
      for (int i = 0; i < n; ++i) c[i * n + j] /= sum + eps;
    }
  }

  // g = silu(min(g, limit)) * clamp(u, -limit, limit)
  static void swiglu_inplace(float* g, const float* u, size_t n, float limit) {
    for (size_t i = 0; i < n; ++i) g[i] = silu(std::min(g[i], limit)) * std::clamp(u[i], -limit, limit);
  }

  std::unique_ptr<ThreadPool> pool_;
  StateLayout layout_;
  int n_slots_ = 0, n_blocks_ = 0;
  std::vector<float> slots_, blocks_;
  std::vector<std::vector<float>> arena_;
  std::vector<std::vector<int32_t>> int_arena_;
  const ForwardBatch* batch_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_cpu_backend(int n_threads) {
  if (n_threads < 0) return make_error(Code::kInvalidArgument, "threads={} must not be negative", n_threads);
  DI_TRY(pool, ThreadPool::create(static_cast<size_t>(n_threads)));
  return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(std::move(pool)));
}

}  // namespace deepinfer
