// Every stateless op of the CUDA backend but the MoE ones against the CPU reference on random inputs
// (odd sizes, every weight format, decode and prefill row counts). Prints max abs / relative error per
// case; skips where no GPU is present.
#include "ops_fixture.h"

#include "util/dtype.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace deepinfer {
namespace {

using testing::CudaOps;
using testing::kBf16Tol;
using testing::kF32Tol;
using testing::rows_batch;
using testing::SeqSpec;
using testing::Twin;

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
  // Decode rows: the collapse spread over blocks beside the Sinkhorn's; 264+ rows a block a row, pre,
  // post and comb from a kernel of their own (hc * hc <= 32) or (hc 7: the block-wide Sinkhorn of 49
  // entries after the collapse's barrier) in the collapsing block. The mix on the FMA units for few
  // rows and for hc 7's 63 outputs; >= 1024 rows on the tensor cores, but for hc 2 d 101: columns not
  // a multiple of 4, no 16-byte reads; hc 2 d 1002: 2004 columns, a last k16 step cut inside, 8
  // outputs, a last row tile cut inside. hc_post: hc 4 a thread a row's four streams, else a block a
  // stream.
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
    // The next site's mix computed by hc_post with the new streams where the launch takes it (decode
    // rows, d % 4 == 0, a mix of at most 64 outputs), handed to that op: hc_pre, for the last layer hc_head.
    for (int last = 0; last < 2; ++last) {
      auto ns = t.zeros(c.T, D);
      const DeviceWeight* next_g = last ? hfn.g.get() : fn.g.get();
      t.cpu->hc_post(streams.c, out.c, post.c, comb.c, ns.c, last ? hfn.c.get() : fn.c.get());
      const HcMixAhead ahead = t.gpu->hc_post(streams.g, out.g, post.g, comb.g, ns.g, next_g);
      t.compare("hc_post with the next mix " + tag, ns, 1e-4);
      EXPECT_EQ(ahead.id != 0, c.T <= 4 && c.d % 4 == 0 && next_g->rows <= 64) << "the mix computed ahead: " << tag;
      if (last) {
        auto h2 = t.zeros(c.T, c.d);
        t.cpu->hc_head(ns.c, hc_c, h2.c);
        t.gpu->hc_head(ns.g, hc_g, h2.g, ahead);
        t.compare("hc_head after hc_post " + tag, h2, 1e-4);
      } else {
        auto c2 = t.zeros(c.T, c.d), p2 = t.zeros(c.T, c.hc), m2 = t.zeros(c.T, c.hc * c.hc);
        t.cpu->hc_pre(ns.c, hcc, c2.c, p2.c, m2.c);
        t.gpu->hc_pre(ns.g, hcg, c2.g, p2.g, m2.g, ahead);
        t.compare("hc_pre after hc_post: collapsed " + tag, c2, 1e-4);
        t.compare("hc_pre after hc_post: post " + tag, p2, 1e-4);
        t.compare("hc_pre after hc_post: comb " + tag, m2, 1e-4);
        if (ahead.id != 0 && c.d % 512 == 0) {  // the mix ahead sums mix_partial's chunks in its order: the same bits
          auto c3 = t.zeros(c.T, c.d), p3 = t.zeros(c.T, c.hc), m3 = t.zeros(c.T, c.hc * c.hc);
          t.gpu->hc_pre(ns.g, hcg, c3.g, p3.g, m3.g);
          EXPECT_EQ(t.read_gpu(c3.g), t.read_gpu(c2.g)) << "hc_pre with the mix ahead against its own mix, collapsed: " << tag;
          EXPECT_EQ(t.read_gpu(p3.g), t.read_gpu(p2.g)) << "the same, post: " << tag;
          EXPECT_EQ(t.read_gpu(m3.g), t.read_gpu(m2.g)) << "the same, comb: " << tag;
        }
      }
    }
  }
}

// A mix computed ahead belongs to the streams and weights hc_post was given: handed to an op on other
// streams it is an error the next read reports (not a silently wrong mix); the next forward runs.
TEST_F(CudaOps, HyperConnectionMixAheadOfOtherStreamsIsAnError) {
  const int hc = 4, mix = (2 + hc) * hc;
  const int64_t d = 64, D = hc * d;
  const int32_t T = 2;
  ForwardBatch b = rows_batch(T);
  t.begin(b);
  auto streams = t.tensor(testing::randn(static_cast<size_t>(T * D), rng), T, D);
  auto out = t.tensor(testing::randn(static_cast<size_t>(T * d), rng), T, d);
  auto post = t.tensor(testing::randn(static_cast<size_t>(T * hc), rng), T, hc);
  auto comb = t.tensor(testing::randn(static_cast<size_t>(T * hc * hc), rng), T, hc * hc);
  auto fn = t.floats(testing::randn(static_cast<size_t>(mix * D), rng, 0.05f), mix, D);
  auto base = t.floats(testing::randn(mix, rng), 1, mix);
  auto scale = t.floats({0.8f, 1.1f, 1.7f}, 1, 3);
  HyperConnection hcg{fn.g.get(), base.g.get(), scale.g.get(), hc, 3, 1e-6f, 1e-6f};
  auto ns = t.zeros(T, D);
  const HcMixAhead ahead = t.gpu->hc_post(streams.g, out.g, post.g, comb.g, ns.g, fn.g.get());
  ASSERT_NE(ahead.id, 0u);
  auto collapsed = t.zeros(T, d), p2 = t.zeros(T, hc), m2 = t.zeros(T, hc * hc);
  t.gpu->hc_pre(streams.g, hcg, collapsed.g, p2.g, m2.g, ahead);  // (the old streams)
  std::vector<float> host(static_cast<size_t>(T * d));
  auto r = t.gpu->read(collapsed.g, host.data());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kInternal) << r.error().message;
  EXPECT_NE(r.error().message.find("computed ahead"), std::string::npos) << r.error().message;
  auto again = t.gpu->begin_forward(b);
  EXPECT_FALSE(again);  // (the kept error, once)
  t.begin(b);
}

}  // namespace
}  // namespace deepinfer
