// The MoE ops of the CUDA backend against the CPU reference: routing, the shared expert, the routed
// experts and the whole feed-forward, at decode and prefill row counts, on every kernel the situation
// picks (GEMV, 32-row tiles, 128-row tiles on wgmma, mma.sync or cuBLAS slabs, fp32 tiles).
#include "ops_fixture.h"

#include "util/dtype.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace deepinfer {
namespace {

using testing::CudaOps;
using testing::kBf16Tol;
using testing::rows_batch;
using testing::SeqSpec;
using testing::Twin;

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

// The expert tests on each GPU variant (bf16, bf16 without wgmma, fp32, native weights): their kernels
// differ (native: the MXFP4 cases' experts stay as stored).
std::vector<testing::GpuVariant> moe_variants() {
  auto v = testing::gpu_variants();
  v.push_back({"native", false, {}, true});
  return v;
}

class CudaMoe : public ::testing::TestWithParam<testing::GpuVariant> {
 protected:
  void SetUp() override {
    auto tw = testing::make_twin(GetParam(), testing::empty_layout(), 2, 64);
    if (!tw) {
      if (tw.error().code == Code::kUnsupported) GTEST_SKIP() << tw.error().message;
      FAIL() << tw.error().message;
    }
    t = std::move(tw.value());
  }
  double tol() const { return GetParam().fp32_weights ? 1e-4 : kBf16Tol; }
  std::string tag() const { return std::string(" [") + GetParam().name + "]"; }
  Twin t;
  std::mt19937 rng{4321};
};

// Routed experts at every row count. Few rows (<= 4, d % 8 == 0): the expert GEMV kernels. Experts
// averaging under 32 rows: 32-row tiles (the pipelined kernel; the synchronous one where d % 8 != 0).
// 32+ rows (prefill): 128-row tiles, on wgmma while the experts average at most 128 rows (d and inter
// multiples of 128, an sm_90a device), else cuBLAS over per-expert slabs in groups of 64 experts of
// similar counts, or the mma.sync tile kernel where the routing is too skewed for slabs. fp32: the
// fp32 tile kernels.
TEST_P(CudaMoe, RoutedExperts) {
  struct Case {
    int32_t T;
    int64_t experts, d, inter;
    int k;
    bool mxfp4;
    bool skewed = false;  // every token's first expert is expert 0: slabs of its count would be mostly empty
  };
  for (Case c : std::vector<Case>{{37, 8, 64, 32, 2, false},
                                  {300, 16, 64, 64, 4, false, true},  // 128-row tiles, skewed: the tile kernel
                                  {300, 16, 256, 96, 4, false},
                                  {1, 8, 72, 40, 6, false},
                                  {3, 16, 64, 48, 6, false},  // few rows: the expert GEMV kernels
                                  {2, 8, 70, 30, 2, false},   // ... unless d % 8 != 0
                                  {9, 4, 70, 30, 2, false},   // 32-row tiles, d % 8 != 0: the synchronous kernel
                                  {130, 32, 128, 64, 6, true},
                                  // MXFP4 with native weights: decode pairs one block each (1 x 2 of 64 experts) and
                                  // by expert (4 x 4 of 16); prefill on the MXFP4 wgmma tiles (d, inter multiples
                                  // of 512: 8 K slices, one group of scales; d 1024: 16 slices, two groups), else
                                  // the stack dequantized per call (d 128).
                                  {1, 64, 128, 64, 2, true},
                                  {4, 16, 128, 64, 4, true},
                                  {300, 8, 512, 512, 2, true},
                                  {700, 16, 1024, 512, 4, true},
                                  {300, 8, 128, 64, 2, true},
                                  {600, 256, 128, 128, 6, false},    // many small groups: 64-column blocks
                                  {4500, 8, 64, 64, 2, false},       // more rows than one chunk
                                  {2800, 128, 64, 64, 6, false},     // cuBLAS slabs, two groups of 64 experts
                                  {700, 16, 256, 128, 4, false},     // 175 rows an expert: cuBLAS slabs
                                  {1000, 32, 256, 128, 4, false},    // 125 rows an expert: wgmma, 2 tiles for some, the last partial
                                  {1100, 32, 384, 256, 2, false},    // ... 6 K slices of 64 (> the 3 stages)
                                  {900, 24, 512, 256, 3, false}}) {  // ... 8 K slices
    ForwardBatch b = testing::rows_batch(c.T);
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
    for (size_t i = 0; i < ev.size(); ++i)
      ev[i] = c.skewed && i % c.k == 0 ? 0 : static_cast<int32_t>((c.skewed ? 1 : 0) + rng() % (c.experts - (c.skewed ? 1 : 0)));
    auto ex = t.ints(ev, c.T, c.k);
    std::vector<float> wv(static_cast<size_t>(c.T * c.k));
    for (auto& v : wv) v = std::uniform_real_distribution<float>(0.1f, 1.0f)(rng);
    auto wts = t.tensor(wv, c.T, c.k);
    auto out = t.tensor(testing::randn(static_cast<size_t>(c.T * c.d), rng), c.T, c.d);  // accumulates
    Experts ec{w1.c.get(), w3.c.get(), w2.c.get(), 1.5f}, eg{w1.g.get(), w3.g.get(), w2.g.get(), 1.5f};
    t.cpu->moe_experts(x.c, ex.c, wts.c, ec, out.c);
    t.gpu->moe_experts(x.g, ex.g, wts.g, eg, out.g);
    t.compare(fmt::format("moe_experts T={} E={} d={} inter={} k={}{}{}", c.T, c.experts, c.d, c.inter, c.k, c.mxfp4 ? " mxfp4" : "",
                          c.skewed ? " skewed" : "") + tag(),
              out, tol());
  }
}

// The MoE feed-forward as one op: routed experts + the shared expert. Few rows take the fused GEMV
// kernels (one launch pair, parts summed by the last block); more rows (prefill) one bf16 copy of x
// for both kinds, the routed sums added to the shared expert's output, the shared expert on the side
// stream in eager forwards (in a graph capture after the routed ones: CudaRandomModel's wide decode
// steps); fp32: the three ops.
TEST_P(CudaMoe, MoeFeedForwardRoutedAndShared) {
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
                                  {300, 8, 64, 40, 2},       // prefill: cuBLAS slabs
                                  {700, 16, 256, 128, 2}}) {  // ... wgmma (~88 rows an expert)
    ForwardBatch b = testing::rows_batch(c.T);
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
    t.gpu->moe_ffn(x.g, ex.g, wts.g, Experts{w1.g.get(), w3.g.get(), w2.g.get(), limit}, Experts{s1.g.get(), s3.g.get(), s2.g.get(), limit},
                   out.g);
    t.compare(fmt::format("moe_ffn T={} E={} d={} inter={} k={}", c.T, c.experts, c.d, c.inter, c.k) + tag(), out, tol());
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, CudaMoe, ::testing::ValuesIn(moe_variants()), [](const auto& info) {
  std::string n = info.param.name;
  std::replace(n.begin(), n.end(), ' ', '_');
  return n;
});

}  // namespace
}  // namespace deepinfer
