// Every op of the CUDA backend against the CPU reference on random inputs (odd sizes, every weight
// format, head_dim 512 and small, top-k beyond the visible entries, sequences at different stages in
// one batch). Prints max abs / relative error per case; skips where no GPU is present.
#include "twin.h"

#include "util/dtype.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace deepinfer {
namespace {

using testing::SeqSpec;
using testing::Twin;

constexpr double kBf16Tol = 1.5e-2;  // bf16 weights and activations into fp32-accumulated products
constexpr double kF32Tol = 2e-5;     // fp32 on both sides: summation order and libm only

StateLayout empty_layout() {
  StateLayout l;
  l.block_tokens = 16;
  return l;
}

// One sequence of T rows in slot 0 at position n_past.
ForwardBatch rows_batch(int32_t T, int32_t n_past = 0) {
  StateLayout l = empty_layout();
  std::vector<int32_t> blocks(static_cast<size_t>(l.blocks_for(n_past + T)), 0);  // no layer state: any valid id
  return testing::make_batch({{0, n_past, T, blocks}});
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    auto g = make_cuda_backend(0);
    if (!g) {
      if (g.error().code == Code::kUnsupported) GTEST_SKIP() << g.error().message;
      FAIL() << g.error().message;
    }
    t.gpu = std::move(g.value());
    t.cpu = make_cpu_backend(2).value();
    t.allocate(empty_layout(), 2, 4096);
  }
  Twin t;
  std::mt19937 rng{1234};
};

TEST_F(CudaOps, LinearEveryWeightFormat) {
  struct Case {
    int64_t T, K, N;
  };
  for (Case c : std::vector<Case>{{37, 100, 71}, {1, 64, 300}, {130, 512, 96}, {3, 4096, 64}, {5, 1024, 1100},
                                                  // few rows: the GEMV kernels (odd outputs, column shares), or cuBLAS where K % 8 != 0
                                                  {2, 1000, 33}, {4, 8192, 1000}, {1, 100, 71}, {1, 4096, 4099},
                                                  // one row, products of >= 16 MB (the decode step's large projections)
                                                  {1, 1024, 8195}, {1, 2048, 4097}, {1, 4096, 2051}, {1, 8192, 1027}}) {
    ForwardBatch b = rows_batch(static_cast<int32_t>(c.T));
    t.begin(b);
    auto xv = testing::randn(static_cast<size_t>(c.T * c.K), rng);
    auto wv = testing::randn(static_cast<size_t>(c.N * c.K), rng, 1.0f / std::sqrt(static_cast<float>(c.K)));
    auto x = t.tensor(xv, c.T, c.K);
    auto w = t.floats(wv, c.N, c.K);
    auto out = t.zeros(c.T, c.N);
    t.cpu->linear(x.c, *w.c, out.c);
    t.gpu->linear(x.g, *w.g, out.g);
    t.compare(fmt::format("linear f32 T={} K={} N={}", c.T, c.K, c.N), out, kBf16Tol);
  }
  // bf16, fp8 (partial 128x128 blocks) and MXFP4 sources
  const int64_t T = 19, K = 192, N = 150;
  ForwardBatch b = rows_batch(T);
  t.begin(b);
  auto x = t.tensor(testing::randn(T * K, rng), T, K);
  {
    auto wf = testing::randn(N * K, rng, 0.1f);
    std::vector<uint16_t> wb(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) wb[i] = f32_to_bf16(wf[i]);
    WeightSource w;
    w.name = "bf16";
    w.rows = N;
    w.cols = K;
    w.values = {DType::kBF16, {N, K}, reinterpret_cast<const uint8_t*>(wb.data()), wb.size() * 2};
    auto ww = t.weight(w);
    auto out = t.zeros(T, N);
    t.cpu->linear(x.c, *ww.c, out.c);
    t.gpu->linear(x.g, *ww.g, out.g);
    t.compare("linear bf16 source", out, kBf16Tol);
  }
  {
    std::uniform_int_distribution<int> code(0, 0x7e);
    std::vector<uint8_t> v(static_cast<size_t>(N * K));
    for (auto& c : v) c = static_cast<uint8_t>(code(rng) | (rng() & 1 ? 0x80 : 0));
    std::vector<uint8_t> sc = {118, 119, 120, 117};  // [2, 2] blocks of 128
    WeightSource w;
    w.name = "fp8";
    w.format = WeightFormat::kFp8Block;
    w.rows = N;
    w.cols = K;
    w.values = {DType::kF8E4M3, {N, K}, v.data(), v.size()};
    w.scale = {DType::kF8E8M0, {2, 2}, sc.data(), sc.size()};
    auto ww = t.weight(w);
    auto out = t.zeros(T, N);
    t.cpu->linear(x.c, *ww.c, out.c);
    t.gpu->linear(x.g, *ww.g, out.g);
    t.compare("linear fp8 block-scaled source", out, kBf16Tol);
  }
  {
    std::vector<uint8_t> v(static_cast<size_t>(N * K / 2));
    for (auto& c : v) c = static_cast<uint8_t>(rng());
    std::vector<uint8_t> sc(static_cast<size_t>(N * K / 32));
    for (auto& c : sc) c = static_cast<uint8_t>(121 + rng() % 4);
    WeightSource w;
    w.name = "mxfp4";
    w.format = WeightFormat::kMxfp4;
    w.rows = N;
    w.cols = K;
    w.values = {DType::kU8, {N, K / 2}, v.data(), v.size()};
    w.scale = {DType::kU8, {N, K / 32}, sc.data(), sc.size()};
    auto ww = t.weight(w);
    auto out = t.zeros(T, N);
    t.cpu->linear(x.c, *ww.c, out.c);
    t.gpu->linear(x.g, *ww.g, out.g);
    t.compare("linear mxfp4 source", out, kBf16Tol);
  }
}

TEST_F(CudaOps, ArgmaxRowsLikeGreedy) {
  // Odd widths, ties (the lowest index wins), a row of -inf, rows with NaN or +inf.
  for (int64_t cols : {1, 7, 1000, 129280}) {
    const int64_t rows = 6;
    ForwardBatch b = rows_batch(static_cast<int32_t>(rows));
    t.begin(b);
    auto v = testing::randn(static_cast<size_t>(rows * cols), rng);
    for (int64_t c = 0; c < cols; ++c) v[static_cast<size_t>(cols + c)] = std::round(v[static_cast<size_t>(cols + c)]);  // many ties
    for (int64_t c = 0; c < cols; ++c) v[static_cast<size_t>(2 * cols + c)] = -INFINITY;
    v[static_cast<size_t>(3 * cols + cols / 2)] = NAN;
    v[static_cast<size_t>(4 * cols + cols - 1)] = INFINITY;
    v[static_cast<size_t>(5 * cols + cols / 3)] = 1e30f;
    v[static_cast<size_t>(5 * cols + cols - 1)] = 1e30f;
    auto x = t.tensor(v, rows, cols);
    auto out = t.int_zeros(rows, 1);
    t.cpu->argmax_rows(x.c, out.c);
    t.gpu->argmax_rows(x.g, out.g);
    const auto want = t.read_ints_cpu(out.c), got = t.read_ints_gpu(out.g);
    EXPECT_EQ(got, want) << "cols " << cols;
    EXPECT_EQ(want[2], -1);
    EXPECT_EQ(want[3], -2);
    EXPECT_EQ(want[4], -2);
    if (cols > 1) {
      EXPECT_EQ(want[5], cols / 3);
    }
  }
}

// Products of one input: random weights of `sizes` outputs over K columns and zeroed outputs of T
// rows, with each side's lists of them.
struct Products {
  std::vector<Twin::W2> w;
  std::vector<Twin::T2> outs;
  std::vector<const DeviceWeight*> wc, wg;
  std::vector<Tensor> oc, og;
};

Products make_products(Twin& t, std::mt19937& rng, const std::vector<int64_t>& sizes, int64_t T, int64_t K) {
  Products p;
  for (int64_t n : sizes) {
    p.w.push_back(t.floats(testing::randn(static_cast<size_t>(n * K), rng, 1.0f / std::sqrt(static_cast<float>(K))), n, K));
    p.outs.push_back(t.zeros(T, n));
    p.wc.push_back(p.w.back().c.get());
    p.wg.push_back(p.w.back().g.get());
    p.oc.push_back(p.outs.back().c);
    p.og.push_back(p.outs.back().g);
  }
  return p;
}

// Products sharing their input: one GEMV launch for up to 4 rows (outputs of mixed sizes, odd ones
// included), the products one by one above that.
TEST_F(CudaOps, LinearsSharingAnInput) {
  const std::vector<int64_t> sizes = {1024, 512, 64, 71, 256, 8, 3};
  for (int64_t T : {1, 2, 3, 4, 5}) {
    for (int64_t K : {4096, 200}) {
      ForwardBatch b = rows_batch(static_cast<int32_t>(T));
      t.begin(b);
      auto x = t.tensor(testing::randn(static_cast<size_t>(T * K), rng), T, K);
      Products p = make_products(t, rng, sizes, T, K);
      t.cpu->linears(x.c, p.wc, p.oc);
      t.gpu->linears(x.g, p.wg, p.og);
      for (size_t i = 0; i < sizes.size(); ++i)
        t.compare(fmt::format("linears T={} K={} product {} ({} outputs)", T, K, i, sizes[i]), p.outs[i], kBf16Tol);
    }
  }
}

// Products of normalised rows: at up to 4 rows the norm is inside the GEMV launch (x stays as it
// was), above that the two ops. Sizes of V4's wq_b and indexer wq_b among them.
TEST_F(CudaOps, RmsNormLinears) {
  const std::vector<int64_t> sizes = {4096, 1024, 72, 8};
  for (int64_t T : {1, 2, 3, 4, 6}) {
    for (int64_t K : {1024, 200}) {
      ForwardBatch b = rows_batch(static_cast<int32_t>(T));
      t.begin(b);
      auto x = t.tensor(testing::randn(static_cast<size_t>(T * K), rng, 4.0f), T, K);
      auto norm = t.floats(testing::randn(static_cast<size_t>(K), rng), 1, K);
      Products p = make_products(t, rng, sizes, T, K);
      t.cpu->rms_norm_linears(x.c, norm.c.get(), 1e-6f, p.wc, p.oc);
      t.gpu->rms_norm_linears(x.g, norm.g.get(), 1e-6f, p.wg, p.og);
      for (size_t i = 0; i < sizes.size(); ++i)
        t.compare(fmt::format("rms_norm_linears T={} K={} product {} ({} outputs)", T, K, i, sizes[i]), p.outs[i], kBf16Tol);
    }
  }
}

TEST_F(CudaOps, GroupedLinear) {
  struct Case {
    int64_t T;
    int groups;
    int64_t k, n;
  };
  for (Case c : std::vector<Case>{{19, 4, 24, 40}, {1, 8, 64, 16}, {77, 2, 512, 100}, {3, 4, 96, 7}, {2, 8, 1024, 64}, {1, 8, 1024, 1025}}) {
    ForwardBatch b = rows_batch(static_cast<int32_t>(c.T));
    t.begin(b);
    auto x = t.tensor(testing::randn(static_cast<size_t>(c.T * c.groups * c.k), rng), c.T, c.groups * c.k);
    auto w = t.floats(testing::randn(static_cast<size_t>(c.groups * c.n * c.k), rng, 0.2f), c.groups * c.n, c.k);
    auto out = t.zeros(c.T, c.groups * c.n);
    t.cpu->grouped_linear(x.c, *w.c, c.groups, out.c);
    t.gpu->grouped_linear(x.g, *w.g, c.groups, out.g);
    t.compare(fmt::format("grouped_linear T={} groups={} k={} n={}", c.T, c.groups, c.k, c.n), out, kBf16Tol);
  }
}

// Prefill-sized norms (>= 4096 groups of 128..1024 values): a warp per group, rotated in registers.
TEST_F(CudaOps, NormsOfManyGroupsAWarpEach) {
  const int32_t T = 600;
  const ForwardBatch b = rows_batch(T, 70001);  // (the backends keep a view of it)
  t.begin(b);
  for (auto [cols, group] : std::vector<std::pair<int64_t, int>>{{8192, 1024}, {1024, 128}, {2048, 256}}) {
    auto x = t.tensor(testing::randn(static_cast<size_t>(T * cols), rng, 3.0f), T, cols);
    auto w = t.floats(testing::randn(static_cast<size_t>(group), rng), 1, group);
    auto out = t.zeros(T, cols);
    t.cpu->rms_norm(x.c, w.c.get(), 1e-6f, group, out.c);
    t.gpu->rms_norm(x.g, w.g.get(), 1e-6f, group, out.g);
    t.compare(fmt::format("rms_norm (a warp a group) cols={} group={}", cols, group), out, kF32Tol);
  }
  const int hd = 512, heads = 8, rope_dim = 64;
  std::vector<float> inv(rope_dim / 2);
  for (int i = 0; i < rope_dim / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / rope_dim);
  auto invw = t.floats(inv, 1, rope_dim / 2);
  Rope rc{invw.c.get(), rope_dim, 0.9f}, rg{invw.g.get(), rope_dim, 0.9f};
  auto q = t.tensor(testing::randn(static_cast<size_t>(T * heads * hd), rng), T, heads * hd);
  auto out = t.zeros(T, heads * hd);
  t.cpu->rms_norm_rope(q.c, nullptr, 1e-6f, hd, rc, out.c);
  t.gpu->rms_norm_rope(q.g, nullptr, 1e-6f, hd, rg, out.g);
  t.compare("rms_norm_rope (a warp a head)", out, kF32Tol);
  auto w = t.floats(testing::randn(hd, rng), 1, hd);
  auto k = t.tensor(testing::randn(static_cast<size_t>(T * hd), rng, 2.0f), T, hd);
  t.cpu->rms_norm_rope_pair(q.c, nullptr, k.c, w.c.get(), 1e-6f, hd, rc);
  t.gpu->rms_norm_rope_pair(q.g, nullptr, k.g, w.g.get(), 1e-6f, hd, rg);
  t.compare("rms_norm_rope_pair (a warp a head) first", q, kF32Tol);
  t.compare("rms_norm_rope_pair (a warp a head) second", k, kF32Tol);
}

TEST_F(CudaOps, RmsNormRopeAddGatherEmbed) {
  const int32_t T = 37;
  ForwardBatch b = rows_batch(T, 100003);  // large positions: rope angles far from 0
  b.logit_rows = {36, 0, 5, 5, 17};
  t.begin(b);
  for (auto [cols, group, weighted] : std::vector<std::tuple<int64_t, int, bool>>{
           {256, 256, true}, {512, 32, false}, {7168, 7168, true}, {96, 16, true}, {2048, 1024, true}}) {
    auto xv = testing::randn(static_cast<size_t>(T * cols), rng, 3.0f);
    auto x = t.tensor(xv, T, cols);
    auto out = t.zeros(T, cols);
    auto w = t.floats(testing::randn(static_cast<size_t>(group), rng), 1, group);
    t.cpu->rms_norm(x.c, weighted ? w.c.get() : nullptr, 1e-6f, group, out.c);
    t.gpu->rms_norm(x.g, weighted ? w.g.get() : nullptr, 1e-6f, group, out.g);
    t.compare(fmt::format("rms_norm cols={} group={} weight={}", cols, group, weighted), out, kF32Tol);
    t.cpu->rms_norm(x.c, weighted ? w.c.get() : nullptr, 1e-6f, group, x.c);  // in place
    t.gpu->rms_norm(x.g, weighted ? w.g.get() : nullptr, 1e-6f, group, x.g);
    t.compare(fmt::format("rms_norm in place cols={} group={}", cols, group), x, kF32Tol);
  }
  // (rope_dim 6: the norm kernel rotates through memory, not in registers)
  for (auto [head_dim, rope_dim, heads, factor] :
       std::vector<std::tuple<int, int, int, float>>{{32, 16, 4, 1.0f}, {512, 64, 3, 0.7f}, {128, 128, 2, 1.3f}, {64, 6, 3, 1.0f}}) {
    std::vector<float> inv(static_cast<size_t>(rope_dim / 2));
    for (int i = 0; i < rope_dim / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / rope_dim);
    auto invw = t.floats(inv, 1, rope_dim / 2);
    Rope rc{invw.c.get(), rope_dim, factor}, rg{invw.g.get(), rope_dim, factor};
    auto x = t.tensor(testing::randn(static_cast<size_t>(T * heads * head_dim), rng), T, heads * head_dim);
    t.cpu->rope(x.c, head_dim, rc, false);
    t.gpu->rope(x.g, head_dim, rg, false);
    t.compare(fmt::format("rope head_dim={} rope_dim={} factor={}", head_dim, rope_dim, factor), x, kF32Tol);
    t.cpu->rope(x.c, head_dim, rc, true);
    t.gpu->rope(x.g, head_dim, rg, true);
    t.compare(fmt::format("rope inverse head_dim={} rope_dim={}", head_dim, rope_dim), x, kF32Tol);
    for (bool weighted : {false, true}) {  // the fused norm + rope (CPU: the two ops), into another tensor and in place
      auto w = t.floats(testing::randn(static_cast<size_t>(head_dim), rng), 1, head_dim);
      auto out = t.zeros(T, heads * head_dim);
      t.cpu->rms_norm_rope(x.c, weighted ? w.c.get() : nullptr, 1e-6f, head_dim, rc, out.c);
      t.gpu->rms_norm_rope(x.g, weighted ? w.g.get() : nullptr, 1e-6f, head_dim, rg, out.g);
      t.compare(fmt::format("rms_norm_rope head_dim={} rope_dim={} weight={}", head_dim, rope_dim, weighted), out, kF32Tol);
      t.cpu->rms_norm_rope(x.c, weighted ? w.c.get() : nullptr, 1e-6f, head_dim, rc, x.c);
      t.gpu->rms_norm_rope(x.g, weighted ? w.g.get() : nullptr, 1e-6f, head_dim, rg, x.g);
      t.compare(fmt::format("rms_norm_rope in place head_dim={} weight={}", head_dim, weighted), x, kF32Tol);
    }
    {  // two tensors in one op (a query of `heads` heads, a key of one head with a weight), in place
      auto w = t.floats(testing::randn(static_cast<size_t>(head_dim), rng), 1, head_dim);
      auto k = t.tensor(testing::randn(static_cast<size_t>(T * head_dim), rng, 2.0f), T, head_dim);
      t.cpu->rms_norm_rope_pair(x.c, nullptr, k.c, w.c.get(), 1e-6f, head_dim, rc);
      t.gpu->rms_norm_rope_pair(x.g, nullptr, k.g, w.g.get(), 1e-6f, head_dim, rg);
      t.compare(fmt::format("rms_norm_rope_pair first head_dim={} rope_dim={}", head_dim, rope_dim), x, kF32Tol);
      t.compare(fmt::format("rms_norm_rope_pair second head_dim={} rope_dim={}", head_dim, rope_dim), k, kF32Tol);
    }
  }
  {
    auto a = t.tensor(testing::randn(T * 70, rng), T, 70);
    auto c = t.tensor(testing::randn(T * 70, rng), T, 70);
    t.cpu->add(a.c, c.c);
    t.gpu->add(a.g, c.g);
    t.compare("add", a, 0.0);
    auto out = t.zeros(5, 70);
    t.cpu->gather_rows(a.c, b.logit_rows, out.c);
    t.gpu->gather_rows(a.g, b.logit_rows, out.g);
    t.compare("gather_rows (batch logit rows)", out, 0.0);
    std::vector<int32_t> rows = {3, 3, 36, 1};
    auto out2 = t.zeros(4, 70);
    t.cpu->gather_rows(a.c, rows, out2.c);
    t.gpu->gather_rows(a.g, rows, out2.g);
    t.compare("gather_rows (other rows)", out2, 0.0);
  }
  for (auto [vocab, d] : std::vector<std::pair<int64_t, int64_t>>{{1000, 33}, {2000, 600}}) {  // fp32 table; bf16-only table
    auto table = t.floats(testing::randn(static_cast<size_t>(vocab * d), rng), vocab, d);
    auto out = t.zeros(T, d);
    t.cpu->embed(*table.c, out.c);
    t.gpu->embed(*table.g, out.g);
    t.compare(fmt::format("embed vocab={} d={}", vocab, d), out, vocab * d > (int64_t(1) << 20) ? 5e-3 : 0.0);
    auto streams = t.zeros(T, 4 * d);  // the residual streams: four copies
    t.cpu->embed(*table.c, streams.c);
    t.gpu->embed(*table.g, streams.g);
    t.compare(fmt::format("embed x4 vocab={} d={}", vocab, d), streams, vocab * d > (int64_t(1) << 20) ? 5e-3 : 0.0);
  }
}

TEST_F(CudaOps, HyperConnections) {
  struct Case {
    int hc;
    int64_t d;
    int iters;
    int32_t T;
  };
  // (hc 7: the block-wide Sinkhorn of 49 entries after the collapse's barrier, in one block per row,
  // and mixes of 63 outputs: mix_partial_kernel. >= 1024 rows: the mix on the tensor cores, but for
  // hc 2 d 101: columns not a multiple of 4, no 16-byte reads; hc 2 d 1002: 2004 columns, a last
  // k16 step cut inside, 8 outputs, a last row tile cut inside.)
  for (Case c : std::vector<Case>{{4, 64, 20, 37}, {2, 100, 1, 5}, {4, 4096, 20, 3}, {8, 48, 3, 1}, {4, 1000, 20, 1}, {2, 100, 1, 4},
                                  {4, 1000, 20, 300}, {4, 4096, 20, 200}, {7, 512, 3, 1000}, {4, 1000, 20, 2100}, {2, 101, 1, 2100},
                                  {2, 1002, 3, 1100}}) {
    ForwardBatch b = rows_batch(c.T);
    t.begin(b);
    const int mix = (2 + c.hc) * c.hc;
    const int64_t D = c.hc * c.d;
    auto streams = t.tensor(testing::randn(static_cast<size_t>(c.T * D), rng, 2.0f), c.T, D);
    auto fn = t.floats(testing::randn(static_cast<size_t>(mix * D), rng, 1.0f / std::sqrt(static_cast<float>(D))), mix, D);
    auto base = t.floats(testing::randn(mix, rng, 0.5f), 1, mix);
    auto scale = t.floats({0.8f, 1.1f, 1.7f}, 1, 3);
    HyperConnection hcc{fn.c.get(), base.c.get(), scale.c.get(), c.hc, c.iters, 1e-6f, 1e-6f};
    HyperConnection hcg{fn.g.get(), base.g.get(), scale.g.get(), c.hc, c.iters, 1e-6f, 1e-6f};
    auto collapsed = t.zeros(c.T, c.d), post = t.zeros(c.T, c.hc), comb = t.zeros(c.T, c.hc * c.hc);
    t.cpu->hc_pre(streams.c, hcc, collapsed.c, post.c, comb.c);
    t.gpu->hc_pre(streams.g, hcg, collapsed.g, post.g, comb.g);
    const std::string tag = fmt::format("hc={} d={} iters={} T={}", c.hc, c.d, c.iters, c.T);
    t.compare("hc_pre collapsed " + tag, collapsed, 1e-4);
    t.compare("hc_pre post " + tag, post, 1e-4);
    t.compare("hc_pre comb " + tag, comb, 1e-4);
    {  // post and comb in the collapsing block (hc_split 0): the same sums in the same order, the same values
      ASSERT_TRUE(t.gpu->set_option("hc_split", 0));
      auto collapsed0 = t.zeros(c.T, c.d), post0 = t.zeros(c.T, c.hc), comb0 = t.zeros(c.T, c.hc * c.hc);
      t.gpu->hc_pre(streams.g, hcg, collapsed0.g, post0.g, comb0.g);
      ASSERT_TRUE(t.gpu->set_option("hc_split", 1));
      EXPECT_EQ(t.read_gpu(collapsed0.g), t.read_gpu(collapsed.g)) << "hc_pre, hc_split 0: " << tag;
      EXPECT_EQ(t.read_gpu(post0.g), t.read_gpu(post.g)) << "hc_pre, hc_split 0: " << tag;
      EXPECT_EQ(t.read_gpu(comb0.g), t.read_gpu(comb.g)) << "hc_pre, hc_split 0: " << tag;
    }
    {  // the mix on the FMA units (mix_mma 0; the tensor cores' terms are exact to 2^-24): the same to fp32 rounding
      ASSERT_TRUE(t.gpu->set_option("mix_mma", 0));
      auto collapsed0 = t.zeros(c.T, c.d), post0 = t.zeros(c.T, c.hc), comb0 = t.zeros(c.T, c.hc * c.hc);
      t.gpu->hc_pre(streams.g, hcg, collapsed0.g, post0.g, comb0.g);
      ASSERT_TRUE(t.gpu->set_option("mix_mma", 1));
      for (const auto& [name, a, b] : {std::tuple{"collapsed", &collapsed0, &collapsed}, std::tuple{"post", &post0, &post},
                                       std::tuple{"comb", &comb0, &comb}}) {
        const auto dv = testing::deviation_of(t.read_gpu(a->g), t.read_gpu(b->g));
        EXPECT_LE(dv.relative, 1e-5) << "hc_pre " << name << ", mix_mma 0 against 1: " << tag << " max abs " << dv.max_abs;
      }
    }
    // With the sublayer's norm applied in the same op: equal to hc_pre then rms_norm.
    auto norm_w = t.floats(testing::randn(static_cast<size_t>(c.d), rng, 0.2f), 1, c.d);
    hcc.sublayer_norm = norm_w.c.get();
    hcg.sublayer_norm = norm_w.g.get();
    auto normed = t.zeros(c.T, c.d), post2 = t.zeros(c.T, c.hc), comb2 = t.zeros(c.T, c.hc * c.hc);
    t.cpu->hc_pre(streams.c, hcc, normed.c, post2.c, comb2.c);
    t.gpu->hc_pre(streams.g, hcg, normed.g, post2.g, comb2.g);
    t.compare("hc_pre + sublayer norm " + tag, normed, 1e-4);
    t.compare("hc_pre + sublayer norm, comb " + tag, comb2, 1e-4);
    if (c.d >= 2048) {  // rms_norm's blocks have hc_pre's 256 threads: the same sums, bit for bit
      t.gpu->rms_norm(collapsed.g, norm_w.g.get(), 1e-6f, static_cast<int>(c.d), collapsed.g);
      EXPECT_EQ(t.read_gpu(collapsed.g), t.read_gpu(normed.g)) << "the fused norm against rms_norm: " << tag;
    }
    hcc.sublayer_norm = hcg.sublayer_norm = nullptr;
    auto out = t.tensor(testing::randn(static_cast<size_t>(c.T * c.d), rng), c.T, c.d);
    auto next = t.zeros(c.T, D);
    t.cpu->hc_post(streams.c, out.c, post.c, comb.c, next.c);
    t.gpu->hc_post(streams.g, out.g, post.g, comb.g, next.g);
    t.compare("hc_post " + tag, next, 1e-4);
    {  // a block per new stream (hc_post_rows 0): the same sums in the same order, the same values
      ASSERT_TRUE(t.gpu->set_option("hc_post_rows", 0));
      auto next0 = t.zeros(c.T, D);
      t.gpu->hc_post(streams.g, out.g, post.g, comb.g, next0.g);
      ASSERT_TRUE(t.gpu->set_option("hc_post_rows", 1));
      EXPECT_EQ(t.read_gpu(next0.g), t.read_gpu(next.g)) << "hc_post, hc_post_rows 0: " << tag;
    }
    auto hfn = t.floats(testing::randn(static_cast<size_t>(c.hc * D), rng, 1.0f / std::sqrt(static_cast<float>(D))), c.hc, D);
    auto hbase = t.floats(testing::randn(c.hc, rng, 0.5f), 1, c.hc);
    auto hscale = t.floats({0.9f}, 1, 1);
    HyperConnection hc_c{hfn.c.get(), hbase.c.get(), hscale.c.get(), c.hc, 1, 1e-6f, 1e-6f};
    HyperConnection hc_g{hfn.g.get(), hbase.g.get(), hscale.g.get(), c.hc, 1, 1e-6f, 1e-6f};
    auto head = t.zeros(c.T, c.d);
    t.cpu->hc_head(streams.c, hc_c, head.c);
    t.gpu->hc_head(streams.g, hc_g, head.g);
    t.compare("hc_head " + tag, head, 1e-4);
    {  // with the final norm
      HyperConnection nc = hc_c, ng = hc_g;
      nc.sublayer_norm = norm_w.c.get();
      ng.sublayer_norm = norm_w.g.get();
      auto normed_head = t.zeros(c.T, c.d);
      t.cpu->hc_head(streams.c, nc, normed_head.c);
      t.gpu->hc_head(streams.g, ng, normed_head.g);
      t.compare("hc_head + final norm " + tag, normed_head, 1e-4);
    }
    // hc_post told the next op's mix weights (a decode batch computes that mix with the new
    // streams), then that op: hc_pre, and for the last layer hc_head.
    for (int last = 0; last < 2; ++last) {
      auto ns = t.zeros(c.T, D);
      t.cpu->hc_post(streams.c, out.c, post.c, comb.c, ns.c, last ? hfn.c.get() : fn.c.get());
      t.gpu->hc_post(streams.g, out.g, post.g, comb.g, ns.g, last ? hfn.g.get() : fn.g.get());
      t.compare("hc_post with the next mix " + tag, ns, 1e-4);
      if (last) {
        auto h2 = t.zeros(c.T, c.d);
        t.cpu->hc_head(ns.c, hc_c, h2.c);
        t.gpu->hc_head(ns.g, hc_g, h2.g);
        t.compare("hc_head after hc_post " + tag, h2, 1e-4);
      } else {
        auto c2 = t.zeros(c.T, c.d), p2 = t.zeros(c.T, c.hc), m2 = t.zeros(c.T, c.hc * c.hc);
        t.cpu->hc_pre(ns.c, hcc, c2.c, p2.c, m2.c);
        t.gpu->hc_pre(ns.g, hcg, c2.g, p2.g, m2.g);
        t.compare("hc_pre after hc_post: collapsed " + tag, c2, 1e-4);
        t.compare("hc_pre after hc_post: post " + tag, p2, 1e-4);
        t.compare("hc_pre after hc_post: comb " + tag, m2, 1e-4);
      }
    }
  }
}

TEST_F(CudaOps, SharedExpertSwiglu) {
  for (auto [T, d, inter, limit] : std::vector<std::tuple<int32_t, int64_t, int64_t, float>>{{37, 64, 48, 2.0f}, {1, 256, 1000, 10.0f}, {300, 128, 96, 0.5f}, {4, 72, 40, 1.0f}, {2, 60, 44, 3.0f}}) {
    ForwardBatch b = rows_batch(T);
    t.begin(b);
    auto x = t.tensor(testing::randn(static_cast<size_t>(T * d), rng, 2.0f), T, d);
    auto w1 = t.floats(testing::randn(static_cast<size_t>(inter * d), rng, 1.0f / std::sqrt(static_cast<float>(d)) * 2), inter, d);
    auto w3 = t.floats(testing::randn(static_cast<size_t>(inter * d), rng, 1.0f / std::sqrt(static_cast<float>(d)) * 2), inter, d);
    auto w2 = t.floats(testing::randn(static_cast<size_t>(d * inter), rng, 1.0f / std::sqrt(static_cast<float>(inter))), d, inter);
    auto out = t.zeros(T, d);
    t.cpu->swiglu(x.c, *w1.c, *w3.c, *w2.c, limit, out.c);
    t.gpu->swiglu(x.g, *w1.g, *w3.g, *w2.g, limit, out.g);
    t.compare(fmt::format("swiglu T={} d={} inter={} limit={}", T, d, inter, limit), out, kBf16Tol);
  }
}

// 37 rows: cuBLAS's gate product, then the routing kernel; up to 4 rows (decode): both in one launch.
// (Gates of <= 2^20 values, which the CUDA backend keeps in fp32, as V4's 256 x 4096.)
TEST_F(CudaOps, RouteEveryScoreAndHash) {
  for (auto [T, d] : std::vector<std::pair<int32_t, int64_t>>{{37, 64}, {1, 2048}, {3, 64}, {4, 200}}) {
    ForwardBatch b = rows_batch(T);
    t.begin(b);
    auto x = t.tensor(testing::randn(T * d, rng), T, d);
    struct Case {
      int64_t experts;
      int k;
      RouterScore score;
      bool bias, hash, zero_gate;
    };
    const std::vector<Case> cases = {{8, 2, RouterScore::kSqrtSoftplus, true, false, false},
                                     {64, 6, RouterScore::kSqrtSoftplus, true, false, false},
                                     {300, 8, RouterScore::kSigmoid, true, false, false},
                                     {16, 4, RouterScore::kSoftmax, false, false, false},
                                     {256, 6, RouterScore::kSqrtSoftplus, false, true, false},
                                     {32, 5, RouterScore::kSqrtSoftplus, false, false, true}};  // all tied: lowest indices
    for (const Case& c : cases) {
      const float gate_scale = 2.4f / std::sqrt(static_cast<float>(d));  // logits of std ~2.4 at any width
      std::vector<float> gv = c.zero_gate ? std::vector<float>(static_cast<size_t>(c.experts * d), 0.0f)
                                          : testing::randn(static_cast<size_t>(c.experts * d), rng, gate_scale);
      auto gate = t.floats(gv, c.experts, d);
      auto bias = t.floats(testing::randn(static_cast<size_t>(c.experts), rng, 0.2f), 1, c.experts);
      std::vector<int32_t> table(static_cast<size_t>(1000 * c.k));
      for (auto& v : table) v = static_cast<int32_t>(rng() % c.experts);
      auto tid = t.int_table(table, 1000, c.k);
      Router rc, rg;
      rc.gate = gate.c.get();
      rg.gate = gate.g.get();
      if (c.bias) rc.bias = bias.c.get(), rg.bias = bias.g.get();
      if (c.hash) rc.tid2eid = tid.c.get(), rg.tid2eid = tid.g.get();
      rc.score = rg.score = c.score;
      rc.top_k = rg.top_k = c.k;
      rc.scaling = rg.scaling = 1.5f;
      auto ex = t.int_zeros(T, c.k);
      auto w = t.zeros(T, c.k);
      t.cpu->route(x.c, rc, ex.c, w.c);
      t.gpu->route(x.g, rg, ex.g, w.g);
      const std::string tag = fmt::format("route T={} d={} E={} k={} score={} bias={} hash={} tied={}", T, d, c.experts, c.k,
                                          static_cast<int>(c.score), c.bias, c.hash, c.zero_gate);
      auto ec = t.read_ints_cpu(ex.c), eg = t.read_ints_gpu(ex.g);
      int mismatched = 0;
      for (size_t i = 0; i < ec.size(); ++i) mismatched += ec[i] != eg[i];
      std::printf("[ op ] %-52s expert mismatches %d of %zu\n", tag.c_str(), mismatched, ec.size());
      EXPECT_EQ(mismatched, 0) << tag;
      if (c.zero_gate) {
        for (int32_t r = 0; r < T; ++r)
          for (int i = 0; i < c.k; ++i) EXPECT_EQ(eg[r * c.k + i], i) << tag;
      }
      t.compare(tag + " weights", w, 1e-5);
    }
  }
}

TEST_F(CudaOps, RoutedExperts) {
  struct Case {
    int32_t T;
    int64_t experts, d, inter;
    int k;
    bool mxfp4;
    bool skewed = false;  // every token picks experts 0 .. k-1: too uneven for the prefill slabs
  };
  for (Case c : std::vector<Case>{{37, 8, 64, 32, 2, false},
                                  {300, 16, 64, 64, 4, false, true},
                                  {300, 16, 256, 96, 4, false},
                                  {1, 8, 72, 40, 6, false},
                                  {3, 16, 64, 48, 6, false},   // few rows: the expert GEMV kernels
                                  {2, 8, 70, 30, 2, false},    // ... unless d % 8 != 0
                                  {9, 4, 70, 30, 2, false},
                                  {130, 32, 128, 64, 6, true},
                                  {600, 256, 128, 128, 6, false},   // many small groups: 64-column blocks
                                  {4500, 8, 64, 64, 2, false},      // more rows than one chunk
                                  {700, 16, 256, 128, 4, false},    // 128-row tiles on wgmma: 2 a expert, the last partial
                                  {1100, 8, 384, 256, 2, false},    // ... 3 a expert; 6 K slices of 64 (> the 3 stages)
                                  {900, 8, 512, 256, 3, false}}) {  // ... 8 K slices
    ForwardBatch b = rows_batch(c.T);
    t.begin(b);
    auto x = t.tensor(testing::randn(static_cast<size_t>(c.T * c.d), rng, 1.5f), c.T, c.d);
    std::vector<std::vector<float>> vals;
    std::vector<std::vector<uint8_t>> packed, scales;
    auto make = [&](int64_t rows, int64_t cols) {
      std::vector<WeightSource> ws;
      for (int64_t e = 0; e < c.experts; ++e) {
        if (c.mxfp4) {
          packed.emplace_back(static_cast<size_t>(rows * cols / 2));
          for (auto& v : packed.back()) v = static_cast<uint8_t>(rng());
          scales.emplace_back(static_cast<size_t>(rows * cols / 32));
          for (auto& v : scales.back()) v = static_cast<uint8_t>(122 + rng() % 3);
          WeightSource w;
          w.name = "expert";
          w.format = WeightFormat::kMxfp4;
          w.rows = rows;
          w.cols = cols;
          w.values = {DType::kU8, {rows, cols / 2}, packed.back().data(), packed.back().size()};
          w.scale = {DType::kU8, {rows, cols / 32}, scales.back().data(), scales.back().size()};
          ws.push_back(w);
        } else {
          vals.push_back(testing::randn(static_cast<size_t>(rows * cols), rng, 1.0f / std::sqrt(static_cast<float>(cols)) * 2));
          ws.push_back(testing::f32_source(vals.back(), rows, cols, "expert"));
        }
      }
      return ws;
    };
    vals.reserve(3 * c.experts);
    packed.reserve(3 * c.experts);
    scales.reserve(3 * c.experts);
    auto w1 = t.stacked(make(c.inter, c.d));
    auto w3 = t.stacked(make(c.inter, c.d));
    auto w2 = t.stacked(make(c.d, c.inter));
    std::vector<int32_t> ev(static_cast<size_t>(c.T * c.k));
    for (size_t i = 0; i < ev.size(); ++i) ev[i] = c.skewed ? static_cast<int32_t>(i % c.k) : static_cast<int32_t>(rng() % c.experts);
    auto ex = t.ints(ev, c.T, c.k);
    std::vector<float> wv(static_cast<size_t>(c.T * c.k));
    for (auto& v : wv) v = std::uniform_real_distribution<float>(0.1f, 1.0f)(rng);
    auto wts = t.tensor(wv, c.T, c.k);
    const auto init = testing::randn(static_cast<size_t>(c.T * c.d), rng);
    Experts ec{w1.c.get(), w3.c.get(), w2.c.get(), 1.5f}, eg{w1.g.get(), w3.g.get(), w2.g.get(), 1.5f};
    const std::string tag = fmt::format("moe_experts T={} E={} d={} inter={} k={}{}{}", c.T, c.experts, c.d, c.inter, c.k,
                                        c.mxfp4 ? " mxfp4" : "", c.skewed ? " skewed" : "");
    // Experts averaging 32+ rows take the prefill path: 128-row tiles on wgmma (d and inter multiples of
    // 128; by default only while experts average <= 128 rows, here always), cuBLAS over slabs per group
    // of similar counts (groups of 4 experts: the cases have 8-16), over slabs of one cap, then the
    // mma.sync tile kernels (blas_moe 0).
    struct Path {
      int wgmma_rows, blas, grouped;
      const char* name;
    };
    for (const Path& p : {Path{1 << 20, 1, 1, " (wgmma where it applies)"}, Path{0, 1, 1, ""}, Path{0, 1, 0, " (one cap)"},
                          Path{0, 0, 1, " (tile kernel)"}}) {
      ASSERT_TRUE(t.gpu->set_option("wgmma_moe_rows", p.wgmma_rows));
      ASSERT_TRUE(t.gpu->set_option("blas_moe", p.blas));
      ASSERT_TRUE(t.gpu->set_option("moe_group_experts", p.grouped ? 4 : 0));
      auto out = t.tensor(init, c.T, c.d);  // accumulates
      t.cpu->moe_experts(x.c, ex.c, wts.c, ec, out.c);
      t.gpu->moe_experts(x.g, ex.g, wts.g, eg, out.g);
      t.compare(tag + p.name, out, kBf16Tol);
    }
    ASSERT_TRUE(t.gpu->set_option("wgmma_moe_rows", 128));
    ASSERT_TRUE(t.gpu->set_option("blas_moe", 1));
    ASSERT_TRUE(t.gpu->set_option("moe_group_experts", 64));
  }
}

// The MoE feed-forward as one op: routed experts + the shared expert. Few rows take the fused GEMV
// kernels (one launch pair, parts summed by the last block); more rows (prefill) one bf16 copy of x
// for both kinds, the routed sums added to the shared expert's output (fused_moe_ffn; the shared
// expert on the side stream with shared_beside), or the three ops.
TEST_F(CudaOps, MoeFeedForwardRoutedAndShared) {
  struct Case {
    int32_t T;
    int64_t experts, d, inter;
    int k;
  };
  for (Case c : std::vector<Case>{{1, 16, 256, 96, 6},
                                  {3, 8, 64, 40, 2},
                                  {4, 32, 128, 64, 8},
                                  {9, 8, 64, 40, 2},
                                  {2, 8, 70, 30, 2},
                                  {300, 8, 64, 40, 2},      // prefill: cuBLAS slabs
                                  {700, 16, 256, 128, 2}}) {  // ... wgmma (~88 rows an expert)
    ForwardBatch b = rows_batch(c.T);
    t.begin(b);
    auto x = t.tensor(testing::randn(static_cast<size_t>(c.T * c.d), rng, 1.5f), c.T, c.d);
    std::vector<std::vector<float>> vals;
    vals.reserve(3 * c.experts + 3);
    auto make = [&](int64_t count, int64_t rows, int64_t cols) {
      std::vector<WeightSource> ws;
      for (int64_t e = 0; e < count; ++e) {
        vals.push_back(testing::randn(static_cast<size_t>(rows * cols), rng, 1.0f / std::sqrt(static_cast<float>(cols)) * 2));
        ws.push_back(testing::f32_source(vals.back(), rows, cols, "expert"));
      }
      return ws;
    };
    auto w1 = t.stacked(make(c.experts, c.inter, c.d)), w3 = t.stacked(make(c.experts, c.inter, c.d)), w2 = t.stacked(make(c.experts, c.d, c.inter));
    auto s1 = t.stacked(make(1, c.inter, c.d)), s3 = t.stacked(make(1, c.inter, c.d)), s2 = t.stacked(make(1, c.d, c.inter));
    std::vector<int32_t> ev(static_cast<size_t>(c.T * c.k));
    for (size_t i = 0; i < ev.size(); ++i) ev[i] = static_cast<int32_t>(rng() % c.experts);
    auto ex = t.ints(ev, c.T, c.k);
    std::vector<float> wv(static_cast<size_t>(c.T * c.k));
    for (auto& v : wv) v = std::uniform_real_distribution<float>(0.1f, 1.0f)(rng);
    auto wts = t.tensor(wv, c.T, c.k);
    auto out = t.tensor(testing::randn(static_cast<size_t>(c.T * c.d), rng), c.T, c.d);  // overwritten
    const float limit = 1.5f;
    t.cpu->moe_ffn(x.c, ex.c, wts.c, Experts{w1.c.get(), w3.c.get(), w2.c.get(), limit}, Experts{s1.c.get(), s3.c.get(), s2.c.get(), limit},
                   out.c);
    struct Variant {
      int fused, beside;
      const char* name;
    };
    for (const Variant& v : {Variant{1, 1, ""}, Variant{1, 0, " (shared expert after)"}, Variant{0, 0, " (three ops)"}}) {
      ASSERT_TRUE(t.gpu->set_option("fused_moe_ffn", v.fused));
      ASSERT_TRUE(t.gpu->set_option("shared_beside", v.beside));
      t.gpu->moe_ffn(x.g, ex.g, wts.g, Experts{w1.g.get(), w3.g.get(), w2.g.get(), limit},
                     Experts{s1.g.get(), s3.g.get(), s2.g.get(), limit}, out.g);
      t.compare(fmt::format("moe_ffn T={} E={} d={} inter={} k={}{}", c.T, c.experts, c.d, c.inter, c.k, v.name), out, kBf16Tol);
    }
    ASSERT_TRUE(t.gpu->set_option("fused_moe_ffn", 1));
    ASSERT_TRUE(t.gpu->set_option("shared_beside", 1));
  }
}

// --- stateful ops: compress (both compressors), indexer top-k, attention, window update over
// several steps of several sequences at different stages.

struct StateCase {
  int head_dim, heads, rope_dim, window, csa_rate, hca_rate, index_dim, index_heads, topk;
};

// Sliding, CSA and HCA layers, as DeepseekV4::state_layout describes them.
StateLayout layout_for(const StateCase& c, int block_tokens) {
  return make_state_layout({{c.head_dim, c.window, 0, false, 0},
                            {c.head_dim, c.window, c.csa_rate, true, c.index_dim},
                            {c.head_dim, c.window, c.hca_rate, false, 0}},
                           block_tokens);
}

class CudaStateOps : public CudaOps, public ::testing::WithParamInterface<StateCase> {};

TEST_P(CudaStateOps, CompressIndexerAttentionWindowOverSteps) {
  const StateCase c = GetParam();
  const int block_tokens = 32;
  StateLayout layout = layout_for(c, block_tokens);
  t.allocate(layout, 4, 64);
  const int hd = c.head_dim;
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

  // Tokens per step for sequences A, B, C (0: absent); C restarts in its slot at step 6.
  const std::vector<std::vector<int32_t>> plan = {{37, 1, 13, 1, 1, 7, 1, 1, 1, 16},
                                                  {0, 100, 1, 64, 1, 1, 1, 3, 1, 1},
                                                  {0, 0, 1, 1, 1, 1, 5, 1, 1, 33}};
  std::vector<int32_t> length(3, 0);
  std::vector<std::vector<int32_t>> blocks(3);
  int32_t next_block = 0;
  double worst[3] = {0, 0, 0}, worst_tc[3] = {0, 0, 0};
  int topk_rows = 0, topk_mismatch = 0, tie_rows = 0, tc_entries = 0, tc_same = 0;
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
      const std::string tag = fmt::format("hd={} step={} layer={}", hd, step, l == 0 ? "sliding" : l == 1 ? "CSA" : "HCA");
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
        for (int32_t r = 0; r < T; r += 5) {  // every 5th row: all scores tie at (-)0 -> lowest indices first
          std::fill_n(iqv.begin() + static_cast<int64_t>(r) * c.index_heads * idim, c.index_heads * idim, 0.0f);
          std::fill_n(iwv.begin() + static_cast<int64_t>(r) * c.index_heads, c.index_heads, -1.0f);
        }
        auto iq = t.tensor(iqv, T, c.index_heads * idim);
        auto iw = t.tensor(iwv, T, c.index_heads);
        sel = t.int_zeros(T, c.topk);
        t.cpu->indexer_topk(l, iq.c, iw.c, c.index_heads, sel.c);
        auto sc = t.read_ints_cpu(sel.c);
        // Tensor-core scores (bf16 operands) may reorder near-equal scores: compare selected sets. Prefill
        // rows (index_dim 64/128) on wgmma from the bf16 index-key table, then on mma.sync.
        ASSERT_TRUE(t.gpu->set_option("mqa_indexer", 1));
        for (int wgmma : {1, 0}) {
          ASSERT_TRUE(t.gpu->set_option("wgmma_indexer", wgmma));
          t.gpu->indexer_topk(l, iq.g, iw.g, c.index_heads, sel.g);
          const auto stc = t.read_ints_gpu(sel.g);
          for (int32_t r = 0; r < T; ++r) {
            std::vector<int32_t> a(sc.begin() + r * c.topk, sc.begin() + (r + 1) * c.topk);
            std::vector<int32_t> g(stc.begin() + r * c.topk, stc.begin() + (r + 1) * c.topk);
            std::sort(a.begin(), a.end());
            std::sort(g.begin(), g.end());
            for (int i = 0; i < c.topk; ++i) {
              ++tc_entries;
              tc_same += std::binary_search(a.begin(), a.end(), g[i]);
            }
            if (r % 5 == 0) {
              EXPECT_TRUE(std::equal(sc.begin() + r * c.topk, sc.begin() + (r + 1) * c.topk, stc.begin() + r * c.topk))
                  << tag << " tied row " << r << " (tensor cores, wgmma " << wgmma << ")";
            }
          }
        }
        ASSERT_TRUE(t.gpu->set_option("wgmma_indexer", 1));
        // The fp32 kernel: the same selection as the CPU (which lists it by score, the GPU by index).
        ASSERT_TRUE(t.gpu->set_option("mqa_indexer", 0));
        t.gpu->indexer_topk(l, iq.g, iw.g, c.index_heads, sel.g);
        auto sg = t.read_ints_gpu(sel.g);
        // The top-k of rows too long for registers (every pass reads the scores): the same list.
        ASSERT_TRUE(t.gpu->set_option("topk_regs", 0));
        t.gpu->indexer_topk(l, iq.g, iw.g, c.index_heads, sel.g);
        ASSERT_TRUE(t.gpu->set_option("topk_regs", 1));
        ASSERT_TRUE(t.gpu->set_option("mqa_indexer", 1));
        EXPECT_EQ(t.read_ints_gpu(sel.g), sg) << tag << ": top-k from memory vs from registers";
        for (int32_t r = 0; r < T; ++r) {
          std::vector<int32_t> a(sc.begin() + r * c.topk, sc.begin() + (r + 1) * c.topk);
          std::vector<int32_t> g(sg.begin() + r * c.topk, sg.begin() + (r + 1) * c.topk);
          EXPECT_TRUE(std::is_sorted(g.begin(), g.end(), [](int32_t x, int32_t y) { return x >= 0 && (y < 0 || x < y); }))
              << tag << " row " << r << ": indices ascending, then -1";
          std::sort(a.begin(), a.end());
          std::sort(g.begin(), g.end());
          const bool same = a == g;
          ++topk_rows;
          if (!same) {
            ++topk_mismatch;
            if (topk_mismatch <= 3) {
              std::string a, g;
              for (int i = 0; i < std::min(c.topk, 12); ++i) {
                a += fmt::format(" {}", sc[r * c.topk + i]);
                g += fmt::format(" {}", sg[r * c.topk + i]);
              }
              std::printf("[ op ] top-k mismatch %s row %d: cpu%s | gpu%s\n", tag.c_str(), r, a.c_str(), g.c_str());
            }
          }
          if (r % 5 == 0) {
            ++tie_rows;
            const int32_t visible = (b.positions[r] + 1) / L.rate;
            for (int i = 0; i < c.topk; ++i) EXPECT_EQ(sg[r * c.topk + i], i < visible ? i : -1) << tag << " tied row " << r;
          }
        }
        ASSERT_TRUE(t.gpu->write_ints(sel.g, sc.data()));  // attention below compares on the same selection
      }
      auto out = t.zeros(T, c.heads * hd);
      t.cpu->attention(l, q.c, kv.c, *sinks.c, L.index_dim ? &sel.c : nullptr, out.c);
      const auto ref = t.read_cpu(out.c);
      // The fp32 kernel, then (head_dim 512) the tensor-core one with its bf16 operands.
      ASSERT_TRUE(t.gpu->set_option("mqa_attention", 0));
      t.gpu->attention(l, q.g, kv.g, *sinks.g, L.index_dim ? &sel.g : nullptr, out.g);
      const auto d = testing::deviation_of(t.read_gpu(out.g), ref);
      worst[l] = std::max(worst[l], d.relative);
      EXPECT_TRUE(d.finite) << tag;
      EXPECT_LE(d.relative, 1e-4) << tag << " max abs " << d.max_abs;
      ASSERT_TRUE(t.gpu->set_option("mqa_attention", 1));
      if (hd == 512) {
        auto out_tc = t.zeros(T, c.heads * hd);
        t.gpu->attention(l, q.g, kv.g, *sinks.g, L.index_dim ? &sel.g : nullptr, out_tc.g);
        const auto dt = testing::deviation_of(t.read_gpu(out_tc.g), ref);
        worst_tc[l] = std::max(worst_tc[l], dt.relative);
        EXPECT_TRUE(dt.finite) << tag << " (tensor cores)";
        EXPECT_LE(dt.relative, kBf16Tol) << tag << " (tensor cores) max abs " << dt.max_abs;
      }
      {  // the output rotated back as it is written (unrope): the fp32 kernel, then the tensor-core one
        auto out_un = t.zeros(T, c.heads * hd);
        t.cpu->attention(l, q.c, kv.c, *sinks.c, L.index_dim ? &sel.c : nullptr, out_un.c, &rope_c);
        const auto ref_un = t.read_cpu(out_un.c);
        for (int mqa : {0, 1}) {
          if (mqa && hd != 512) continue;
          ASSERT_TRUE(t.gpu->set_option("mqa_attention", mqa));
          t.gpu->attention(l, q.g, kv.g, *sinks.g, L.index_dim ? &sel.g : nullptr, out_un.g, &rope_g);
          const auto du = testing::deviation_of(t.read_gpu(out_un.g), ref_un);
          EXPECT_TRUE(du.finite) << tag << " unrope mqa=" << mqa;
          EXPECT_LE(du.relative, mqa ? kBf16Tol : 1e-4) << tag << " unrope mqa=" << mqa << " max abs " << du.max_abs;
        }
      }
      // Straight into a grouped projection and a plain one: bf16 between the three where no key shares
      // split a row (101 rows x 80 heads).
      if (hd == 512) {
        const int groups = 2;
        const int64_t n = 24, kc = static_cast<int64_t>(c.heads) * hd / groups;
        auto wo = t.floats(testing::randn(static_cast<size_t>(groups * n * kc), rng, 1.0f / std::sqrt(static_cast<float>(kc))), groups * n, kc);
        const int64_t nb = 40;  // wo_b's rows (the hidden size)
        auto wob = t.floats(testing::randn(static_cast<size_t>(nb * groups * n), rng, 1.0f / std::sqrt(static_cast<float>(groups * n))),
                            nb, groups * n);
        // bf16 output from the wgmma kernel (sm_90a), from the mma.sync one, then fp32 output
        for (const auto& [bf16_out, wgmma] : {std::pair{1, 1}, std::pair{1, 0}, std::pair{0, 0}}) {
          ASSERT_TRUE(t.gpu->set_option("bf16_attention_output", bf16_out));
          ASSERT_TRUE(t.gpu->set_option("wgmma_attention", wgmma));
          auto proj = t.zeros(T, nb);
          t.cpu->attention_projected(l, q.c, kv.c, *sinks.c, L.index_dim ? &sel.c : nullptr, &rope_c, *wo.c, groups, *wob.c, proj.c);
          t.gpu->attention_projected(l, q.g, kv.g, *sinks.g, L.index_dim ? &sel.g : nullptr, &rope_g, *wo.g, groups, *wob.g, proj.g);
          t.compare(fmt::format("{} attention_projected bf16_out={} wgmma={}", tag, bf16_out, wgmma), proj, kBf16Tol);
        }
        ASSERT_TRUE(t.gpu->set_option("wgmma_attention", 1));
        ASSERT_TRUE(t.gpu->set_option("bf16_attention_output", 1));
        // The query as the model makes it: attention_query (bf16 on the GPU where the wgmma attention
        // reads it), written by its product, normalised and rotated in place, consumed by the attention.
        const int64_t qk = 96, qcols = static_cast<int64_t>(c.heads) * hd;
        auto qa = t.tensor(testing::randn(static_cast<size_t>(T * qk), rng), T, qk);
        auto wq = t.floats(testing::randn(static_cast<size_t>(qcols * qk), rng, 1.0f / std::sqrt(static_cast<float>(qk))), qcols, qk);
        std::vector<float> by_query[2];
        for (int bf16_query : {1, 0}) {
          ASSERT_TRUE(t.gpu->set_option("bf16_query", bf16_query));
          Twin::T2 qq{t.cpu->attention_query(l, T, qcols), t.gpu->attention_query(l, T, qcols)};
          t.cpu->linear(qa.c, *wq.c, qq.c);
          t.gpu->linear(qa.g, *wq.g, qq.g);
          t.cpu->rms_norm_rope(qq.c, nullptr, 1e-6f, hd, rope_c, qq.c);
          t.gpu->rms_norm_rope(qq.g, nullptr, 1e-6f, hd, rope_g, qq.g);
          auto proj = t.zeros(T, nb);
          t.cpu->attention_projected(l, qq.c, kv.c, *sinks.c, L.index_dim ? &sel.c : nullptr, &rope_c, *wo.c, groups, *wob.c, proj.c);
          t.gpu->attention_projected(l, qq.g, kv.g, *sinks.g, L.index_dim ? &sel.g : nullptr, &rope_g, *wo.g, groups, *wob.g, proj.g);
          t.compare(fmt::format("{} query chain bf16_query={}", tag, bf16_query), proj, kBf16Tol);
          by_query[bf16_query] = t.read_gpu(proj.g);
        }
        // bf16_query 1 rounds the product's output once more, so the two differ where the bf16 query was
        // used: the fused path, which needs one block per row and 64 heads to fill the GPU (> 132 blocks).
        if (T * ((c.heads + 63) / 64) > 132) {
          EXPECT_NE(by_query[0], by_query[1]) << tag;
        }
        ASSERT_TRUE(t.gpu->set_option("bf16_query", 1));
        // The safety nets: a bf16 query whose product cannot take the one-bf16-input path (written in
        // fp32, then converted), and a bf16 query read by the plain attention (converted back).
        for (bool plain_attention : {false, true}) {
          Twin::T2 qq{t.cpu->attention_query(l, T, qcols), t.gpu->attention_query(l, T, qcols)};
          if (!plain_attention) {
            ASSERT_TRUE(t.gpu->set_option("one_bf16_input", 0));
          }
          t.cpu->linear(qa.c, *wq.c, qq.c);
          t.gpu->linear(qa.g, *wq.g, qq.g);
          ASSERT_TRUE(t.gpu->set_option("one_bf16_input", 1));
          t.cpu->rms_norm_rope(qq.c, nullptr, 1e-6f, hd, rope_c, qq.c);
          t.gpu->rms_norm_rope(qq.g, nullptr, 1e-6f, hd, rope_g, qq.g);
          if (plain_attention) {
            auto o = t.zeros(T, qcols);
            t.cpu->attention(l, qq.c, kv.c, *sinks.c, L.index_dim ? &sel.c : nullptr, o.c, &rope_c);
            t.gpu->attention(l, qq.g, kv.g, *sinks.g, L.index_dim ? &sel.g : nullptr, o.g, &rope_g);
            t.compare(fmt::format("{} bf16 query into the plain attention", tag), o, kBf16Tol);
          } else {
            auto proj = t.zeros(T, nb);
            t.cpu->attention_projected(l, qq.c, kv.c, *sinks.c, L.index_dim ? &sel.c : nullptr, &rope_c, *wo.c, groups, *wob.c, proj.c);
            t.gpu->attention_projected(l, qq.g, kv.g, *sinks.g, L.index_dim ? &sel.g : nullptr, &rope_g, *wo.g, groups, *wob.g, proj.g);
            t.compare(fmt::format("{} bf16 query written in fp32 and converted", tag), proj, kBf16Tol);
          }
        }
      }
      t.cpu->window_update(l, kv.c);
      t.gpu->window_update(l, kv.g);
    }
  }
  std::printf("[ op ] state ops hd=%d heads=%d window=%d rates=%d/%d topk=%d: attention rel (worst step) sliding %.3g, CSA %.3g, HCA %.3g\n",
              hd, c.heads, c.window, c.csa_rate, c.hca_rate, c.topk, worst[0], worst[1], worst[2]);
  if (hd == 512)
    std::printf("[ op ] tensor-core attention hd=512 heads=%d: rel (worst step) sliding %.3g, CSA %.3g, HCA %.3g\n", c.heads,
                worst_tc[0], worst_tc[1], worst_tc[2]);
  std::printf("[ op ] indexer top-k: %d of %d rows differ from the CPU (%d rows of exact ties checked)\n", topk_mismatch, topk_rows, tie_rows);
  EXPECT_LE(topk_mismatch, topk_rows / 100) << "indexer selections differ";
  std::printf("[ op ] indexer top-k on tensor cores: %d of %d selected entries also selected by the CPU\n", tc_same, tc_entries);
  EXPECT_GE(tc_same, tc_entries * 95 / 100) << "tensor-core indexer selections differ";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaStateOps,
                         ::testing::Values(StateCase{32, 4, 16, 8, 4, 16, 16, 8, 6},      // small heads, top-k < visible
                                           StateCase{512, 2, 64, 16, 4, 32, 128, 4, 64},  // head_dim 512, top-k > visible, HCA pooled in 4 runs
                                           StateCase{512, 80, 64, 48, 4, 8, 128, 4, 20},  // 512 x 80 heads: a full and a partial group of 64
                                           StateCase{64, 3, 16, 5, 2, 8, 32, 64, 3}),    // odd window, 64 indexer heads
                         [](const auto& info) { return "hd" + std::to_string(info.param.head_dim) + "_h" + std::to_string(info.param.heads); });

}  // namespace
}  // namespace deepinfer
