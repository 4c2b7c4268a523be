// The stateful ops of the CUDA backend against the CPU reference: compress (both compressors), the
// indexer's top-k, attention and the window update over several steps of several sequences at
// different stages (head_dim 512 and small, top-k beyond the visible entries), on each GPU variant.
#include "ops_fixture.h"

#include "util/dtype.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace deepinfer {
namespace {

using testing::kBf16Tol;
using testing::SeqSpec;
using testing::Twin;

struct StateCase {
  int head_dim, heads, rope_dim, window, csa_rate, hca_rate, index_dim, index_heads, topk;
};

inline void PrintTo(const StateCase& c, std::ostream* os) { *os << "head_dim " << c.head_dim << " x " << c.heads << " heads"; }

// Sliding, CSA and HCA layers, as DeepseekV4::state_layout describes them.
StateLayout layout_for(const StateCase& c, int block_tokens) {
  return make_state_layout({{c.head_dim, c.window, 0, false, 0},
                            {c.head_dim, c.window, c.csa_rate, true, c.index_dim},
                            {c.head_dim, c.window, c.hca_rate, false, 0}},
                           block_tokens);
}

// Skips (GTEST_SKIP) where no GPU is present.
#define DI_TWIN_OR_SKIP(var, variant, layout, slots, blocks)                                       \
  auto var##_r = testing::make_twin(variant, layout, slots, blocks);                               \
  if (!var##_r) {                                                                                 \
    if (var##_r.error().code == Code::kUnsupported) GTEST_SKIP() << var##_r.error().message;      \
    FAIL() << var##_r.error().message;                                                             \
  }                                                                                               \
  Twin& var = var##_r.value()

// Selected entries of the GPU's top-k rows against the CPU's: the GPU lists them by index (then -1),
// rows whose scores all tie take the lowest indices, and the selections agree (fp32 scores: the same
// sets up to near-ties; bf16 scores on the tensor cores may reorder near-equal scores: 95% of entries).
struct TopkAgreement {
  int rows = 0, rows_differing = 0, entries = 0, entries_shared = 0;

  void add(const std::string& tag, const std::vector<int32_t>& cpu, const std::vector<int32_t>& gpu, int64_t T, int k,
           const std::vector<int32_t>& visible, const std::vector<bool>& tied) {
    for (int64_t r = 0; r < T; ++r) {
      std::vector<int32_t> a(cpu.begin() + r * k, cpu.begin() + (r + 1) * k), g(gpu.begin() + r * k, gpu.begin() + (r + 1) * k);
      EXPECT_TRUE(std::is_sorted(g.begin(), g.end(), [](int32_t x, int32_t y) { return x >= 0 && (y < 0 || x < y); }))
          << tag << " row " << r << ": indices ascending, then -1";
      if (tied[r]) {
        for (int i = 0; i < k; ++i) EXPECT_EQ(g[i], i < visible[r] ? i : -1) << tag << " tied row " << r;
      }
      std::sort(a.begin(), a.end());
      std::sort(g.begin(), g.end());
      ++rows;
      rows_differing += a != g;
      for (int32_t e : g) {
        ++entries;
        entries_shared += std::binary_search(a.begin(), a.end(), e);
      }
    }
  }
  void check(const std::string& what, bool exact_scores) const {
    std::printf("[ op ] %s: %d of %d rows differ from the CPU, %d of %d selected entries shared\n", what.c_str(), rows_differing, rows,
                entries_shared, entries);
    if (exact_scores) {
      EXPECT_LE(rows_differing, rows / 100) << what;
    } else {
      EXPECT_GE(entries_shared, entries * 95 / 100) << what;
    }
  }
};

class CudaStateOps : public ::testing::TestWithParam<std::tuple<StateCase, testing::GpuVariant>> {
 protected:
  std::mt19937 rng{1234};
};

TEST_P(CudaStateOps, CompressIndexerAttentionWindowOverSteps) {
  const auto& [c, variant] = GetParam();
  const int block_tokens = 32;
  StateLayout layout = layout_for(c, block_tokens);
  DI_TWIN_OR_SKIP(t, variant, layout, 4, 64);
  const int hd = c.head_dim;
  const bool fp32 = variant.fp32_weights;
  // The fp32 attention kernel serves fp32 mode and head dims other than 512; the tensor-core ones
  // (mma.sync, and for prefill wgmma on an sm_90a device) head_dim 512 in bf16 mode.
  const double attention_tol = fp32 || hd != 512 ? 1e-4 : kBf16Tol;
  const double product_tol = fp32 ? 1e-4 : kBf16Tol;
  std::vector<float> inv(static_cast<size_t>(c.rope_dim / 2));
  for (int i = 0; i < c.rope_dim / 2; ++i) inv[i] = std::pow(160000.0f, -2.0f * i / c.rope_dim);
  auto invw = t.floats(inv, 1, c.rope_dim / 2);
  Rope rope_c{invw.c.get(), c.rope_dim, 1.0f}, rope_g{invw.g.get(), c.rope_dim, 1.0f};
  auto sinks = t.floats(testing::randn(c.heads, rng), 1, c.heads);
  struct LayerW {
    Twin::W2 ape, norm, iape, inorm;
  };
  std::vector<LayerW> lw(3);
  for (int l = 1; l < 3; ++l) {
    const LayerStateLayout& L = layout.layers[l];
    lw[l].ape = t.floats(testing::randn(static_cast<size_t>(L.rate * L.width()), rng, 0.5f), L.rate, L.width());
    lw[l].norm = t.floats(testing::randn(hd, rng, 0.3f), 1, hd);
    if (L.index_dim) {
      lw[l].iape = t.floats(testing::randn(static_cast<size_t>(L.rate * L.index_width()), rng, 0.5f), L.rate, L.index_width());
      lw[l].inorm = t.floats(testing::randn(L.index_dim, rng, 0.3f), 1, L.index_dim);
    }
  }
  // The attention's output projections (bf16 between the three where no key shares split a row).
  const int groups = 2;
  const int64_t n_wo = 24, kc = static_cast<int64_t>(c.heads) * hd / groups, nb = 40;
  auto wo = t.floats(testing::randn(static_cast<size_t>(groups * n_wo * kc), rng, 1.0f / std::sqrt(static_cast<float>(kc))), groups * n_wo, kc);
  auto wob = t.floats(testing::randn(static_cast<size_t>(nb * groups * n_wo), rng, 1.0f / std::sqrt(static_cast<float>(groups * n_wo))), nb,
                      groups * n_wo);
  // The query's product (attention_query: bf16 on the GPU where the prefill attention reads it so).
  const int64_t qk = 96, qcols = static_cast<int64_t>(c.heads) * hd;
  auto wq = t.floats(testing::randn(static_cast<size_t>(qcols * qk), rng, 1.0f / std::sqrt(static_cast<float>(qk))), qcols, qk);

  // Tokens per step for sequences A, B, C (0: absent); C restarts in its slot at step 6.
  const std::vector<std::vector<int32_t>> plan = {{37, 1, 13, 1, 1, 7, 1, 1, 1, 16},
                                                  {0, 100, 1, 64, 1, 1, 1, 3, 1, 1},
                                                  {0, 0, 1, 1, 1, 1, 5, 1, 1, 33}};
  std::vector<int32_t> length(3, 0);
  std::vector<std::vector<int32_t>> blocks(3);
  int32_t next_block = 0;
  double worst[3] = {0, 0, 0};
  TopkAgreement topk;
  for (size_t step = 0; step < plan[0].size(); ++step) {
    if (step == 6) {  // C starts over
      t.cpu->reset_slot(2);
      t.gpu->reset_slot(2);
      length[2] = 0;
    }
    std::vector<SeqSpec> specs;
    for (int s = 0; s < 3; ++s) {
      const int32_t n = plan[s][step];
      if (!n) continue;
      while (static_cast<int32_t>(blocks[s].size()) < layout.blocks_for(length[s] + n)) blocks[s].push_back(next_block++ % 64);
      specs.push_back({s, length[s], n, blocks[s]});
      length[s] += n;
    }
    ForwardBatch b = testing::make_batch(specs);
    t.begin(b);
    const int32_t T = b.rows();
    for (int l = 0; l < 3; ++l) {
      const LayerStateLayout& L = layout.layers[l];
      const std::string tag = fmt::format("hd={} step={} layer={} [{}]", hd, step, l == 0 ? "sliding" : l == 1 ? "CSA" : "HCA", variant.name);
      auto kv = t.tensor(testing::randn(static_cast<size_t>(T * hd), rng), T, hd);
      auto q = t.tensor(testing::randn(static_cast<size_t>(T * c.heads * hd), rng, 1.5f), T, c.heads * hd);
      if (L.rate) {
        auto ckv = t.tensor(testing::randn(static_cast<size_t>(T * L.width()), rng), T, L.width());
        auto cg = t.tensor(testing::randn(static_cast<size_t>(T * L.width()), rng), T, L.width());
        t.cpu->compress(l, ckv.c, cg.c, Compressor{lw[l].ape.c.get(), lw[l].norm.c.get(), 1e-6f, false, rope_c});
        t.gpu->compress(l, ckv.g, cg.g, Compressor{lw[l].ape.g.get(), lw[l].norm.g.get(), 1e-6f, false, rope_g});
      }
      Twin::I2 sel{};
      if (L.index_dim) {
        const int idim = L.index_dim;
        auto ikv = t.tensor(testing::randn(static_cast<size_t>(T * 2 * idim), rng), T, 2 * idim);
        auto ig = t.tensor(testing::randn(static_cast<size_t>(T * 2 * idim), rng), T, 2 * idim);
        t.cpu->compress(l, ikv.c, ig.c, Compressor{lw[l].iape.c.get(), lw[l].inorm.c.get(), 1e-6f, true, rope_c});
        t.gpu->compress(l, ikv.g, ig.g, Compressor{lw[l].iape.g.get(), lw[l].inorm.g.get(), 1e-6f, true, rope_g});
        auto iqv = testing::randn(static_cast<size_t>(T * c.index_heads * idim), rng);
        auto iwv = testing::randn(static_cast<size_t>(T * c.index_heads), rng);
        std::vector<int32_t> visible(static_cast<size_t>(T));
        std::vector<bool> tied(static_cast<size_t>(T));
        for (int32_t r = 0; r < T; ++r) {
          visible[r] = (b.positions[r] + 1) / L.rate;
          tied[r] = r % 5 == 0;  // every 5th row: all scores tie at (-)0 -> lowest indices first
          if (!tied[r]) continue;
          std::fill_n(iqv.begin() + static_cast<int64_t>(r) * c.index_heads * idim, c.index_heads * idim, 0.0f);
          std::fill_n(iwv.begin() + static_cast<int64_t>(r) * c.index_heads, c.index_heads, -1.0f);
        }
        auto iq = t.tensor(iqv, T, c.index_heads * idim);
        auto iw = t.tensor(iwv, T, c.index_heads);
        sel = t.int_zeros(T, c.topk);
        t.cpu->indexer_topk(l, iq.c, iw.c, c.index_heads, sel.c);
        t.gpu->indexer_topk(l, iq.g, iw.g, c.index_heads, sel.g);
        const auto sc = t.read_ints_cpu(sel.c);
        topk.add(tag, sc, t.read_ints_gpu(sel.g), T, c.topk, visible, tied);
        ASSERT_TRUE(t.gpu->write_ints(sel.g, sc.data()));  // attention below compares on the same selection
      }
      const IntTensor* sel_c = L.index_dim ? &sel.c : nullptr;
      const IntTensor* sel_g = L.index_dim ? &sel.g : nullptr;
      {
        auto out = t.zeros(T, c.heads * hd);
        t.cpu->attention(l, q.c, kv.c, *sinks.c, sel_c, out.c);
        t.gpu->attention(l, q.g, kv.g, *sinks.g, sel_g, out.g);
        worst[l] = std::max(worst[l], t.compare(tag + " attention", out, attention_tol).relative);
      }
      {  // the output rotated back as it is written (unrope)
        auto out = t.zeros(T, c.heads * hd);
        t.cpu->attention(l, q.c, kv.c, *sinks.c, sel_c, out.c, &rope_c);
        t.gpu->attention(l, q.g, kv.g, *sinks.g, sel_g, out.g, &rope_g);
        t.compare(tag + " attention, unrope", out, attention_tol);
      }
      {  // straight into a grouped projection and a plain one
        auto proj = t.zeros(T, nb);
        t.cpu->attention_projected(l, q.c, kv.c, *sinks.c, sel_c, &rope_c, *wo.c, groups, *wob.c, proj.c);
        t.gpu->attention_projected(l, q.g, kv.g, *sinks.g, sel_g, &rope_g, *wo.g, groups, *wob.g, proj.g);
        t.compare(tag + " attention_projected", proj, product_tol);
      }
      // The query as the model makes it: attention_query, written by its product, normalised and
      // rotated in place, consumed by attention_projected (a prefill query in bf16 where the fused
      // attention reads it: its norm + rope then left to the wgmma attention, which applies them as it
      // loads the query), or by the plain attention (a bf16 query converted back).
      auto qa = t.tensor(testing::randn(static_cast<size_t>(T * qk), rng), T, qk);
      for (bool plain_attention : {false, true}) {
        Twin::T2 qq{t.cpu->attention_query(l, T, qcols), t.gpu->attention_query(l, T, qcols)};
        t.cpu->linear(qa.c, *wq.c, qq.c);
        t.gpu->linear(qa.g, *wq.g, qq.g);
        t.cpu->rms_norm_rope(qq.c, nullptr, 1e-6f, hd, rope_c, qq.c);
        t.gpu->rms_norm_rope(qq.g, nullptr, 1e-6f, hd, rope_g, qq.g);
        if (plain_attention) {
          auto o = t.zeros(T, qcols);
          t.cpu->attention(l, qq.c, kv.c, *sinks.c, sel_c, o.c, &rope_c);
          t.gpu->attention(l, qq.g, kv.g, *sinks.g, sel_g, o.g, &rope_g);
          t.compare(tag + " query chain into attention", o, product_tol);
        } else {
          auto proj = t.zeros(T, nb);
          t.cpu->attention_projected(l, qq.c, kv.c, *sinks.c, sel_c, &rope_c, *wo.c, groups, *wob.c, proj.c);
          t.gpu->attention_projected(l, qq.g, kv.g, *sinks.g, sel_g, &rope_g, *wo.g, groups, *wob.g, proj.g);
          t.compare(tag + " query chain into attention_projected", proj, product_tol);
        }
      }
      t.cpu->window_update(l, kv.c);
      t.gpu->window_update(l, kv.g);
    }
  }
  std::printf("[ op ] state ops hd=%d heads=%d window=%d rates=%d/%d topk=%d [%s]: attention rel (worst step) sliding %.3g, CSA %.3g, HCA %.3g\n",
              hd, c.heads, c.window, c.csa_rate, c.hca_rate, c.topk, variant.name, worst[0], worst[1], worst[2]);
  // fp32 mode scores in fp32 (kernels/indexer: the CPU's products in another order); bf16 mode on the
  // tensor cores for these shapes (bf16 operands).
  topk.check(fmt::format("indexer top-k hd={} [{}]", hd, variant.name), fp32);
}

std::vector<StateCase> state_cases() {
  return {StateCase{32, 4, 16, 8, 4, 16, 16, 8, 6},      // small heads, top-k < visible
          StateCase{512, 2, 64, 16, 4, 32, 128, 4, 64},  // head_dim 512, top-k > visible, HCA pooled in 4 runs
          StateCase{512, 80, 64, 48, 4, 8, 128, 4, 20},  // 512 x 80 heads: a full and a partial group of 64 (prefill: one block a row)
          StateCase{64, 3, 16, 5, 2, 8, 32, 64, 3}};     // odd window, 64 indexer heads
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaStateOps, ::testing::Combine(::testing::ValuesIn(state_cases()), ::testing::ValuesIn(testing::gpu_variants())),
                         [](const auto& info) {
                           const StateCase& c = std::get<0>(info.param);
                           std::string n = "hd" + std::to_string(c.head_dim) + "_h" + std::to_string(c.heads) + "_" + std::get<1>(info.param).name;
                           std::replace(n.begin(), n.end(), ' ', '_');
                           return n;
                         });

// The top-k of rows too long for registers (more than 16 K visible entries: 70 K tokens of context at
// compression rate 4), whose every pass reads the scores from memory: over a randomized state (the
// same values on both backends), rows of tied scores and random ones.
TEST(CudaStateLong, IndexerTopkOfRowsLongerThanRegistersHold) {
  const int index_dim = 16, heads = 4, k = 512, rate = 4;
  const StateLayout layout = make_state_layout({{32, 8, rate, true, index_dim}}, 64);
  const int32_t n_past = 70000, T = 3;
  const int n_blocks = static_cast<int>(layout.blocks_for(n_past + T));
  DI_TWIN_OR_SKIP(t, (testing::GpuVariant{"fp32", true, {}}), layout, 1, n_blocks);
  ASSERT_TRUE(t.cpu->randomize_state(7));
  ASSERT_TRUE(t.gpu->randomize_state(7));
  std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  ForwardBatch b = testing::make_batch({{0, n_past, T, ids}});
  t.begin(b);
  std::mt19937 rng(99);
  auto qv = testing::randn(static_cast<size_t>(T * heads * index_dim), rng);
  auto wv = testing::randn(static_cast<size_t>(T * heads), rng);
  std::fill_n(qv.begin(), heads * index_dim, 0.0f);  // row 0: every score ties
  auto q = t.tensor(qv, T, heads * index_dim);
  auto w = t.tensor(wv, T, heads);
  auto sel = t.int_zeros(T, k);
  t.cpu->indexer_topk(0, q.c, w.c, heads, sel.c);
  t.gpu->indexer_topk(0, q.g, w.g, heads, sel.g);
  std::vector<int32_t> visible(T);
  for (int32_t r = 0; r < T; ++r) visible[r] = (n_past + r + 1) / rate;
  ASSERT_GT(visible[0], 16 * 1024);
  TopkAgreement a;
  a.add("long rows", t.read_ints_cpu(sel.c), t.read_ints_gpu(sel.g), T, k, visible, {true, false, false});
  a.check("indexer top-k of 17.5 K entries a row", true);
  EXPECT_GE(a.entries_shared, a.entries * 99 / 100);
}

}  // namespace
}  // namespace deepinfer
