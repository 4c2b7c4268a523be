// Backend::sample_rows on the GPU against the host sampler (sample_row): the same uniform draw
// (Philox, bit for bit), the same distribution (chi-square over many seeds), the same token wherever
// the draw is not within rounding of a boundary of the cumulative distribution, greedy rows equal to
// the argmax, every feature's logprobs within 1e-5 with the same ranks, the host's errors, and the
// same results for a row whatever else is in the batch. Each test prints what it measured.
#include "ops_fixture.h"
#include "random_model.h"
#include "sampling_cases.h"

#include "sample/sampler.h"

#ifdef DEEPINFER_HAS_CUDA
#include "sample/philox.h"
#include "sampling.h"

#include <cuda_runtime.h>
#endif

#include <cstring>
#include <numeric>

namespace deepinfer::testing {
namespace {

constexpr double kLogprobTol = 1e-5;
// A draw this close to an end of the host token's interval of the cumulative distribution may go
// to its neighbour on the device: the masses differ by rounding (the device sums weights in fixed
// point, the host in double; after a truncation the host's weights are double, the device's float).
constexpr double kBoundaryMargin = 1e-6;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Distance of u from the nearer end of token's interval of the distribution `processed` (the host's
// processed row: -inf outside the candidates) cumulated in token id order.
double interval_margin(const std::vector<float>& processed, int32_t token, double u) {
  double mx = -INFINITY;
  for (float v : processed) mx = std::max(mx, static_cast<double>(v));
  double total = 0, before = 0;
  for (size_t i = 0; i < processed.size(); ++i) {
    const double w = processed[i] > -INFINITY ? std::exp(processed[i] - mx) : 0.0;
    if (static_cast<int32_t>(i) < token) before += w;
    total += w;
  }
  const double p = processed[static_cast<size_t>(token)] > -INFINITY ? std::exp(processed[static_cast<size_t>(token)] - mx) : 0.0;
  return std::min(std::abs(u - before / total), std::abs((before + p) / total - u));
}

// Softmax of the host's processed row.
std::vector<double> processed_probabilities(const std::vector<float>& processed) {
  double mx = -INFINITY;
  for (float v : processed) mx = std::max(mx, static_cast<double>(v));
  std::vector<double> p(processed.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += p[i] = processed[i] > -INFINITY ? std::exp(processed[i] - mx) : 0.0;
  for (double& q : p) q /= total;
  return p;
}

struct Agreement {
  int rows = 0, compared = 0, near_boundary = 0, mismatched = 0;
  double max_logprob_error = 0;
};

// The device's result for one row against sample_row's (`processed`: the host's row afterwards):
// the same token unless the draw lies within kBoundaryMargin of an end of the host token's interval.
void compare_row(const Result<SampleResult>& got, const Result<SampleResult>& want, const std::vector<float>& processed,
                 const SamplingCase& c, Agreement& a) {
  ++a.rows;
  ASSERT_EQ(static_cast<bool>(got), static_cast<bool>(want))
      << c.name << ": " << (got ? "device sampled, host: " + want.error().message : "device: " + got.error().message);
  if (!want) {
    EXPECT_EQ(got.error().code, want.error().code) << c.name;
    EXPECT_EQ(got.error().message, want.error().message) << c.name;
    return;
  }
  const bool greedy = c.params.temperature == 0.0f;
  if (!greedy && interval_margin(processed, want.value().token, sample_uniform(c.key)) <= kBoundaryMargin) {
    ++a.near_boundary;
    return;
  }
  ++a.compared;
  if (got.value().token != want.value().token) ++a.mismatched;
  EXPECT_EQ(got.value().token, want.value().token) << c.name << " (u " << sample_uniform(c.key) << ")";
  ASSERT_EQ(got.value().logprobs.has_value(), want.value().logprobs.has_value()) << c.name;
  if (!want.value().logprobs || got.value().token != want.value().token) return;
  const Logprobs& g = *got.value().logprobs;
  const Logprobs& w = *want.value().logprobs;
  auto close = [&](float x, float y, const std::string& what) {
    if (std::isinf(y)) {
      EXPECT_EQ(x, y) << c.name << " " << what;
      return;
    }
    const double e = std::abs(static_cast<double>(x) - y);
    a.max_logprob_error = std::max(a.max_logprob_error, e);
    EXPECT_LE(e, kLogprobTol) << c.name << " " << what << ": " << x << " vs " << y;
  };
  close(g.logprob, w.logprob, "logprob");
  EXPECT_EQ(g.rank, w.rank) << c.name;
  ASSERT_EQ(g.top.size(), w.top.size()) << c.name;
  for (size_t i = 0; i < w.top.size(); ++i) {
    EXPECT_EQ(g.top[i].token, w.top[i].token) << c.name << " top " << i;
    close(g.top[i].logprob, w.top[i].logprob, "top " + std::to_string(i));
  }
}

void print_agreement(const std::string& what, const Agreement& a) {
  std::printf("[ sampling ] %-44s rows %5d  compared %5d  near a boundary %3d  mismatched %d  max |dlogprob| %.2g\n", what.c_str(), a.rows,
              a.compared, a.near_boundary, a.mismatched, a.max_logprob_error);
}

bool same_result(const Result<SampleResult>& a, const Result<SampleResult>& b) {
  if (static_cast<bool>(a) != static_cast<bool>(b)) return false;
  if (!a) return a.error().code == b.error().code && a.error().message == b.error().message;
  if (a.value().token != b.value().token || a.value().logprobs.has_value() != b.value().logprobs.has_value()) return false;
  if (!a.value().logprobs) return true;
  const Logprobs &x = *a.value().logprobs, &y = *b.value().logprobs;
  if (!same_bits(x.logprob, y.logprob) || x.rank != y.rank || x.top.size() != y.top.size()) return false;
  for (size_t i = 0; i < x.top.size(); ++i)
    if (x.top[i].token != y.top[i].token || !same_bits(x.top[i].logprob, y.top[i].logprob)) return false;
  return true;
}

class CudaSampling : public ::testing::Test {
 protected:
  void SetUp() override {
    auto g = gpu_backend();
    if (!g) {
      if (g.error().code == Code::kUnsupported) GTEST_SKIP() << g.error().message;
      FAIL() << g.error().message;
    }
    gpu = std::move(g.value());
    ASSERT_TRUE(gpu->allocate_state(empty_layout(), 2, 16));
  }

  // The rows (row-major, `vocab` wide) on the device, sampled there.
  std::vector<Result<SampleResult>> sample(const std::vector<float>& flat, int64_t vocab, const std::vector<RowSampling>& specs) {
    std::vector<Result<SampleResult>> out;
    const auto rows = static_cast<int64_t>(flat.size()) / vocab;
    EXPECT_TRUE(gpu->begin_forward(rows_batch(1)));
    Tensor x = gpu->scratch_uninit(rows, vocab);
    auto w = gpu->write(x, flat.data());
    EXPECT_TRUE(w) << (w ? "" : w.error().message);
    auto r = gpu->sample_rows(x, specs, out);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    EXPECT_EQ(out.size(), specs.size());
    return out;
  }

  // cases[i] on logits[i]: device against host.
  Agreement check_cases(const std::vector<SamplingCase>& cases, const std::vector<std::vector<float>>& logits) {
    Agreement a;
    const auto vocab = static_cast<int64_t>(logits[0].size());
    std::vector<float> flat;
    std::vector<RowSampling> specs;
    for (size_t i = 0; i < cases.size(); ++i) {
      flat.insert(flat.end(), logits[i].begin(), logits[i].end());
      specs.push_back(cases[i].row());
    }
    const auto got = sample(flat, vocab, specs);
    if (got.size() != cases.size()) return a;
    for (size_t i = 0; i < cases.size(); ++i) {
      std::vector<float> row = logits[i];
      const SamplingCase& c = cases[i];
      const auto want = sample_row(row, c.params, c.state, c.eos, c.mask, c.key);
      compare_row(got[i], want, row, c, a);
    }
    return a;
  }

  std::unique_ptr<Backend> gpu;
};

TEST_F(CudaSampling, PhiloxUniformMatchesTheHostExactly) {
#ifndef DEEPINFER_HAS_CUDA
  GTEST_SKIP() << "no CUDA build";
#else
  std::vector<SampleKey> keys;
  const uint64_t seeds[] = {0, 1, 7, 0xFFFFFFFFull, 0x100000000ull, 0x5EED00000001ull, ~0ull};
  const uint32_t completions[] = {0, 1, 127, 0x80000000u, ~0u};
  const uint32_t positions[] = {0, 1, 2, 1000, 1u << 20, ~0u};
  for (uint64_t s : seeds)
    for (uint32_t c : completions)
      for (uint32_t p : positions) keys.push_back({s, c, p});
  std::mt19937_64 rng(99);
  while (keys.size() < 8192) keys.push_back({rng(), static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng())});
  std::vector<uint32_t> words;
  for (const SampleKey& k : keys) {
    words.insert(words.end(), {static_cast<uint32_t>(k.seed), static_cast<uint32_t>(k.seed >> 32), k.completion_index, k.position});
  }
  uint32_t* d_keys = nullptr;
  uint64_t* d_bits = nullptr;
  ASSERT_EQ(cudaMalloc(&d_keys, words.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_bits, keys.size() * 8), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_keys, words.data(), words.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  const kernels::PhiloxConstants philox{kPhiloxMultiplier0, kPhiloxMultiplier1, kPhiloxWeyl0, kPhiloxWeyl1};
  ASSERT_EQ(kernels::sample_uniform_bits(d_keys, static_cast<int64_t>(keys.size()), philox, d_bits, kernels::Stream{nullptr, false}),
            cudaSuccess);
  std::vector<uint64_t> bits(keys.size());
  ASSERT_EQ(cudaMemcpy(bits.data(), d_bits, bits.size() * 8, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d_keys);
  cudaFree(d_bits);
  int mismatches = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const double device = static_cast<double>(bits[i]) * 0x1.0p-53;
    if (device != sample_uniform(keys[i]) && ++mismatches <= 5)
      ADD_FAILURE() << "key (" << keys[i].seed << ", " << keys[i].completion_index << ", " << keys[i].position << "): device " << device
                    << ", host " << sample_uniform(keys[i]);
  }
  std::printf("[ sampling ] Philox uniforms: %zu keys, %d differ from sample_uniform\n", keys.size(), mismatches);
  EXPECT_EQ(mismatches, 0);
#endif
}

TEST_F(CudaSampling, ARowsResultDoesNotDependOnItsBlockCount) {
  // The select kernel shares a row among a cluster of 1-8 blocks (fewer as rows grow): every count
  // gives the same bytes, on rows whose slices are empty, tied, masked, non-finite or too short, and
  // whose top_k lists are crowded or tied (crowded boundary buckets of the whole row:
  // TiesAndCrowdedValuesCutLikeTheHost, at the default count).
#ifndef DEEPINFER_HAS_CUDA
  GTEST_SKIP() << "no CUDA build";
#else
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 9) GTEST_SKIP() << "clusters of blocks need sm_90";
  for (int64_t vocab : {int64_t(7), int64_t(1000), int64_t(129280)}) {
    std::vector<std::vector<float>> rows;
    std::vector<kernels::SampleRowSpec> specs;
    std::vector<uint32_t> masks;  // grammar bitmasks, (vocab + 31) / 32 words a masked row
    auto add = [&](std::vector<float> row, float temperature, float top_p, int top_k, float min_p, int logprobs,
                   const std::vector<int64_t>* allowed = nullptr) {
      kernels::SampleRowSpec sp;
      if (allowed) {  // only these tokens (the prepare kernel writes the row with -inf elsewhere)
        sp.flags = kernels::kRowProcessed | kernels::kRowGrammar;
        sp.mask_offset = static_cast<int32_t>(masks.size());
        masks.resize(masks.size() + static_cast<size_t>((vocab + 31) / 32), 0u);
        for (int64_t t : *allowed) masks[static_cast<size_t>(sp.mask_offset + t / 32)] |= 1u << (t % 32);
      }
      sp.temperature = temperature;
      sp.top_p = top_p;
      sp.top_k = top_k;
      sp.min_p = min_p;
      sp.logprobs = logprobs;
      sp.seed_lo = 0x5eedu + static_cast<uint32_t>(specs.size());
      sp.position = 17;
      if (specs.size() % 3 == 2) sp.flags |= kernels::kRowRawLogprobs;
      rows.push_back(std::move(row));
      specs.push_back(sp);
    };
    for (uint32_t seed = 0; seed < 3; ++seed) {
      const RowShape shape = seed == 0 ? RowShape::kPeaked : seed == 1 ? RowShape::kFlat : RowShape::kTies;
      add(make_logits(vocab, 40 + seed, shape), 0.0f, 1.0f, 0, 0.0f, 3);
      add(make_logits(vocab, 50 + seed, shape), 1.0f, 0.95f, 0, 0.0f, 5);
      add(make_logits(vocab, 60 + seed, shape), 0.8f, 0.9f, 50, 0.01f, 20);
      add(make_logits(vocab, 70 + seed, shape), 1.3f, 1.0f, 3, 0.0f, 2);
    }
    add(std::vector<float>(static_cast<size_t>(vocab), 0.5f), 1.0f, 0.3f, 0, 0.0f, 20);  // all equal
    // A crowded top: top_k's list (gathered from every block) holds ties, then top_p cuts it.
    std::vector<float> crowded = make_logits(vocab, 95, RowShape::kFlat);
    for (int64_t i = 0; i < vocab / 4; ++i) crowded[static_cast<size_t>((i * 41) % vocab)] = 20.0f;
    add(crowded, 1.0f, 0.5f, static_cast<int>(std::min<int64_t>(1000, vocab / 2)), 0.0f, 5);
    // Ties at top_k's cut in a short list (ranked in shared memory, not sorted).
    std::vector<float> tied = make_logits(vocab, 96, RowShape::kFlat);
    for (int64_t i = 0; i < std::min<int64_t>(300, vocab / 2); ++i) tied[static_cast<size_t>((i * 37) % vocab)] = 20.0f;
    add(tied, 1.0f, 0.7f, static_cast<int>(std::min<int64_t>(200, vocab / 3)), 0.0f, 5);
    const std::vector<int64_t> few{vocab / 3, vocab - 1}, none;
    add(make_logits(vocab, 90, RowShape::kFlat), 1.0f, 1.0f, 0, 0.0f, 20, &few);  // fewer allowed than logprobs: -inf ones listed
    add(make_logits(vocab, 91, RowShape::kFlat), 1.0f, 1.0f, 0, 0.0f, 2, &none);  // no token
    std::vector<float> bad = make_logits(vocab, 80, RowShape::kFlat);
    bad[static_cast<size_t>(vocab - 1)] = NAN;
    add(bad, 1.0f, 1.0f, 0, 0.0f, -1);
    const auto n = static_cast<int64_t>(rows.size());
    std::vector<float> flat;
    for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
    float *d_logits = nullptr, *d_work = nullptr;
    kernels::SampleRowSpec* d_specs = nullptr;
    kernels::SampleOut* d_out = nullptr;
    uint32_t* d_masks = nullptr;
    ASSERT_EQ(cudaMalloc(&d_masks, masks.size() * sizeof(uint32_t)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_masks, masks.data(), masks.size() * sizeof(uint32_t), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_logits, flat.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_work, static_cast<size_t>(n * kernels::sample_work_stride(vocab)) * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_specs, specs.size() * sizeof(specs[0])), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out, specs.size() * sizeof(kernels::SampleOut)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_logits, flat.data(), flat.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_specs, specs.data(), specs.size() * sizeof(specs[0]), cudaMemcpyHostToDevice), cudaSuccess);
    const kernels::PhiloxConstants philox{kPhiloxMultiplier0, kPhiloxMultiplier1, kPhiloxWeyl0, kPhiloxWeyl1};
    std::vector<std::vector<kernels::SampleOut>> results;
    for (int blocks : {1, 2, 4, 8}) {
      ASSERT_EQ(cudaMemset(d_out, 0, specs.size() * sizeof(kernels::SampleOut)), cudaSuccess);
      ASSERT_EQ(kernels::sample_rows(d_logits, n, vocab, d_specs, nullptr, d_masks, d_work, d_out, philox, kernels::Stream{nullptr, false},
                                     blocks),
                cudaSuccess)
          << blocks << " blocks a row";
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      results.emplace_back(specs.size());
      ASSERT_EQ(cudaMemcpy(results.back().data(), d_out, specs.size() * sizeof(kernels::SampleOut), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    cudaFree(d_logits);
    cudaFree(d_work);
    cudaFree(d_specs);
    cudaFree(d_out);
    cudaFree(d_masks);
    int differ = 0;
    for (size_t b = 1; b < results.size(); ++b)
      for (size_t i = 0; i < specs.size(); ++i) {
        const bool same = std::memcmp(&results[b][i], &results[0][i], sizeof(kernels::SampleOut)) == 0;
        differ += !same;
        EXPECT_TRUE(same) << "vocabulary " << vocab << ", row " << i << ": " << (1 << b) << " blocks give token " << results[b][i].token
                          << ", one block " << results[0][i].token;
      }
    for (size_t i = 0; i + 2 < specs.size(); ++i) EXPECT_GE(results[0][i].token, 0) << "vocabulary " << vocab << ", row " << i;
    const kernels::SampleOut& masked = results[0][specs.size() - 3];
    EXPECT_TRUE(masked.token == few[0] || masked.token == few[1]);
    EXPECT_EQ(masked.n_top, std::min<int64_t>(20, vocab));
    EXPECT_EQ(results[0][specs.size() - 2].token, kernels::kSampleNoToken);
    EXPECT_EQ(results[0][specs.size() - 1].token, kernels::kSampleBadLogit);
    EXPECT_EQ(results[0][specs.size() - 1].bad_index, vocab - 1);
    std::printf("[ sampling ] vocabulary %lld: %zu rows at 1-8 blocks a row, %d results differ from one block's\n",
                static_cast<long long>(vocab), specs.size(), differ);
  }
#endif
}

TEST_F(CudaSampling, GreedyRowsAreTheArgmax) {
  for (int64_t vocab : {int64_t(1), int64_t(7), int64_t(1000), int64_t(129280)}) {
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    std::vector<SamplingCase> cases;
    std::vector<std::vector<float>> logits;
    for (int i = 0; i < 6; ++i) {
      cases.push_back({"greedy " + std::to_string(i), greedy, make_state(vocab, 3, 0, 0), {}, {}, {1, 0, static_cast<uint32_t>(i)}});
      std::vector<float> row = randn(static_cast<size_t>(vocab), rng);
      if (i == 1)
        for (float& v : row) v = std::round(v);       // ties: the lowest id wins
      if (i == 2) row.assign(row.size(), -INFINITY);  // no token
      if (i == 3) row[row.size() / 2] = NAN;
      if (i == 4) row.back() = INFINITY;
      if (i == 5) {
        row[row.size() / 3] = 1e30f;
        row.back() = 1e30f;
      }
      logits.push_back(row);
    }
    const Agreement a = check_cases(cases, logits);
    print_agreement("greedy, vocabulary " + std::to_string(vocab), a);
    EXPECT_EQ(a.mismatched, 0);
  }
}

TEST_F(CudaSampling, EveryFeatureMatchesTheHost) {
  for (int64_t vocab : {int64_t(1000), int64_t(129280)}) {
    for (RowShape shape : {RowShape::kPeaked, RowShape::kFlat, RowShape::kTies}) {
      const std::vector<SamplingCase> cases = feature_cases(vocab, 31 + static_cast<uint32_t>(shape));
      std::vector<std::vector<float>> logits;
      for (size_t i = 0; i < cases.size(); ++i) logits.push_back(make_logits(vocab, 2000 + static_cast<uint32_t>(i), shape));
      const Agreement a = check_cases(cases, logits);
      const char* shape_name = shape == RowShape::kPeaked ? "peaked" : shape == RowShape::kFlat ? "flat" : "ties";
      print_agreement("features, " + std::string(shape_name) + ", vocabulary " + std::to_string(vocab), a);
      EXPECT_EQ(a.mismatched, 0);
    }
  }
}

TEST_F(CudaSampling, AgreesWithTheHostAwayFromBoundaries) {
  // Many rows and keys of the parameter sets servers use.
  const int64_t vocab = 129280;
  std::vector<SamplingParams> sets(4);
  sets[0].temperature = 0.8f;
  sets[0].top_p = 0.95f;
  sets[1].temperature = 0.8f;
  sets[1].top_k = 50;
  sets[2].temperature = 1.0f;
  sets[2].top_k = 50;
  sets[2].top_p = 0.95f;
  sets[2].min_p = 0.05f;
  sets[2].repetition_penalty = 1.1f;
  sets[3].temperature = 0.7f;
  Agreement a;
  for (RowShape shape : {RowShape::kPeaked, RowShape::kFlat}) {
    std::vector<SamplingCase> cases;
    std::vector<std::vector<float>> logits;
    for (int i = 0; i < 64; ++i) {
      cases.push_back({"row " + std::to_string(i),
                       sets[static_cast<size_t>(i) % sets.size()],
                       make_state(vocab, 9 + i, 30, 10),
                       {},
                       {},
                       {0xABCDull + static_cast<uint64_t>(i), static_cast<uint32_t>(i % 3), static_cast<uint32_t>(i * 7)}});
      logits.push_back(make_logits(vocab, 500 + static_cast<uint32_t>(i), shape));
    }
    const Agreement b = check_cases(cases, logits);
    a.rows += b.rows;
    a.compared += b.compared;
    a.near_boundary += b.near_boundary;
    a.mismatched += b.mismatched;
  }
  print_agreement("server parameter sets, 129280 wide", a);
  EXPECT_EQ(a.mismatched, 0);
  EXPECT_LE(a.near_boundary, 2) << "draws near a boundary should be rare (a margin of 1e-6)";
}

// Pearson's statistic against the host's processed distribution, bins under 5 expected draws
// pooled; fails for a draw outside the distribution. Critical value at p = 1e-6 (Wilson-Hilferty).
void expect_distribution(const std::vector<int>& counts, const std::vector<double>& p, int draws, const std::string& what) {
  double statistic = 0, pooled_e = 0, pooled_n = 0;
  int bins = 0, outside = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0.0) {
      outside += counts[i];
      continue;
    }
    const double e = p[i] * draws;
    if (e < 5.0) {
      pooled_e += e;
      pooled_n += counts[i];
      continue;
    }
    statistic += (counts[i] - e) * (counts[i] - e) / e;
    ++bins;
  }
  if (pooled_e > 0) {
    statistic += (pooled_n - pooled_e) * (pooled_n - pooled_e) / pooled_e;
    ++bins;
  }
  const double k = bins - 1, z = 4.7534;  // the normal quantile at 1 - 1e-6
  const double critical = k * std::pow(1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k)), 3.0);
  std::printf("[ sampling ] %-44s draws %d  chi-square %.2f  dof %.0f  critical (p 1e-6) %.2f  outside %d\n", what.c_str(), draws,
              statistic, k, critical, outside);
  EXPECT_EQ(outside, 0) << what << ": draws outside the distribution";
  EXPECT_GE(k, 1.0) << what;
  EXPECT_LT(statistic, critical) << what;
}

TEST_F(CudaSampling, FollowsTheHostDistributionOverManySeeds) {
  struct Dist {
    std::string name;
    int64_t vocab;
    int draws;
    SamplingParams params;
    std::vector<float> logits;
  };
  std::vector<Dist> dists;
  {
    Dist d{"64 tokens, top_k 40, top_p 0.9, min_p 0.02", 64, 32768, {}, {}};
    d.params.temperature = 0.9f;
    d.params.top_k = 40;
    d.params.top_p = 0.9f;
    d.params.min_p = 0.02f;
    for (int i = 0; i < 64; ++i) d.logits.push_back(2.0f - 0.09f * static_cast<float>((i * 37) % 64));
    dists.push_back(d);
  }
  {
    Dist d{"1000 tokens, penalties, bias, temperature 1.3", 1000, 32768, {}, {}};
    d.params.temperature = 1.3f;
    d.params.repetition_penalty = 1.2f;
    d.params.presence_penalty = 0.4f;
    d.params.logit_bias = {{3, 2.0f}, {999, 4.0f}};
    d.logits = make_logits(1000, 77, RowShape::kPeaked);
    dists.push_back(d);
  }
  {  // top_p's cut among the row's highest tokens (the short list)
    Dist d{"4096 tokens, top_p 0.9, min_p 0.05, temperature 1.5", 4096, 16384, {}, {}};
    d.params.temperature = 1.5f;
    d.params.top_p = 0.9f;
    d.params.min_p = 0.05f;
    d.logits = make_logits(4096, 79, RowShape::kPeaked);
    dists.push_back(d);
  }
  {  // a list of several hundred: top_k's cut and top_p's by ranks in the short list
    Dist d{"4096 tokens, top_k 300, top_p 0.95", 4096, 32768, {}, {}};
    d.params.top_k = 300;
    d.params.top_p = 0.95f;
    d.logits = make_logits(4096, 80, RowShape::kFlat);
    dists.push_back(d);
  }
  {
    Dist d{"129280 tokens, top_k 8, temperature 2", 129280, 1024, {}, {}};
    d.params.temperature = 2.0f;
    d.params.top_k = 8;
    d.logits = make_logits(129280, 78, RowShape::kPeaked);
    dists.push_back(d);
  }
  for (const Dist& d : dists) {
    const auto state = make_state(d.vocab, 4, 20, 8);
    std::vector<float> processed = d.logits;
    ASSERT_TRUE(sample_row(processed, d.params, state, {}, {}, {}));
    const std::vector<double> p = processed_probabilities(processed);
    std::vector<float> flat;
    std::vector<RowSampling> specs;
    for (int i = 0; i < d.draws; ++i) {
      flat.insert(flat.end(), d.logits.begin(), d.logits.end());
      specs.push_back({&d.params, &state, {}, {}, {0x5EED0000ull, 0, static_cast<uint32_t>(i)}});
    }
    const auto got = sample(flat, d.vocab, specs);
    ASSERT_EQ(got.size(), specs.size());
    std::vector<int> counts(static_cast<size_t>(d.vocab), 0);
    int agree = 0;
    for (int i = 0; i < d.draws; ++i) {
      ASSERT_TRUE(got[static_cast<size_t>(i)]) << got[static_cast<size_t>(i)].error().message;
      const int32_t token = got[static_cast<size_t>(i)].value().token;
      ++counts[static_cast<size_t>(token)];
      std::vector<float> row = d.logits;
      agree += sample_row(row, d.params, state, {}, {}, specs[static_cast<size_t>(i)].key).value().token == token;
    }
    std::printf("[ sampling ] %-44s the host drew the same token for %d of %d keys\n", d.name.c_str(), agree, d.draws);
    expect_distribution(counts, p, d.draws, d.name);
  }
}

TEST_F(CudaSampling, ARowsResultDoesNotDependOnTheBatch) {
  const int64_t vocab = 129280;
  const std::vector<SamplingCase> cases = feature_cases(vocab, 71);
  std::vector<std::vector<float>> logits;
  for (size_t i = 0; i < cases.size(); ++i)
    logits.push_back(make_logits(vocab, 300 + static_cast<uint32_t>(i), i % 2 ? RowShape::kPeaked : RowShape::kFlat));
  auto run = [&](const std::vector<size_t>& order, size_t filler) {
    // The rows in `order`, after `filler` other rows (different logits and parameters).
    std::vector<float> flat;
    std::vector<RowSampling> specs;
    for (size_t f = 0; f < filler; ++f) {
      const std::vector<float> other = make_logits(vocab, 9000 + static_cast<uint32_t>(f), RowShape::kFlat);
      flat.insert(flat.end(), other.begin(), other.end());
      specs.push_back(cases[(f * 7) % cases.size()].row());
    }
    for (size_t i : order) {
      flat.insert(flat.end(), logits[i].begin(), logits[i].end());
      specs.push_back(cases[i].row());
    }
    auto out = sample(flat, vocab, specs);
    std::vector<Result<SampleResult>> mine(cases.size(), make_error(Code::kInternal, "missing"));
    for (size_t k = 0; k < order.size() && filler + k < out.size(); ++k) mine[order[k]] = out[filler + k];
    return mine;
  };
  std::vector<size_t> order(cases.size());
  std::iota(order.begin(), order.end(), 0);
  const auto together = run(order, 0);
  std::vector<size_t> reversed(order.rbegin(), order.rend());
  const auto backwards = run(reversed, 0);
  const auto crowded = run(reversed, 64 - cases.size());
  int differ = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto alone = run({i}, 0);
    const bool same = same_result(together[i], alone[i]) && same_result(together[i], backwards[i]) && same_result(together[i], crowded[i]);
    differ += !same;
    EXPECT_TRUE(same) << cases[i].name << ": differs with the batch";
  }
  std::printf("[ sampling ] batch invariance: %zu rows alone, together, reversed, among 64: %d differ\n", cases.size(), differ);
}

TEST_F(CudaSampling, ErrorsLikeTheHost) {
  const int64_t vocab = 5000;
  std::vector<SamplingCase> cases = feature_cases(vocab, 8);
  cases.erase(cases.begin() + 8, cases.end());
  std::vector<std::vector<float>> logits;
  for (size_t i = 0; i < cases.size(); ++i) logits.push_back(make_logits(vocab, 60 + static_cast<uint32_t>(i), RowShape::kPeaked));
  logits[1][123] = NAN;
  logits[2][vocab - 1] = INFINITY;
  cases[3].params.allowed_token_ids = {5};  // and the grammar bans 5: no token
  cases[3].mask.assign(bitmask_words(vocab), ~0u);
  cases[3].mask[0] &= ~(1u << 5);
  cases[4].mask.assign(7, ~0u);  // the wrong size
  logits[5][9] = NAN;            // the NaN comes first, as on the host
  cases[5].mask.assign(7, ~0u);
  cases[6].eos = {static_cast<int32_t>(vocab) + 3};
  cases[7].state = make_state(vocab + 1, 1, 3, 0);  // another vocabulary
  const Agreement a = check_cases(cases, logits);
  print_agreement("rows with errors among good ones", a);

  // What only the device checks (the host trusts validate()): ids outside the row, too many logprobs.
  SamplingCase bad = feature_cases(vocab, 9)[3];
  bad.params.allowed_token_ids = {static_cast<int32_t>(vocab)};
  SamplingCase many = feature_cases(vocab, 9)[3];
  many.params.logprobs = 21;
  const std::vector<float> row = make_logits(vocab, 1, RowShape::kFlat);
  std::vector<float> flat = row;
  flat.insert(flat.end(), row.begin(), row.end());
  const auto got = sample(flat, vocab, {bad.row(), many.row()});
  ASSERT_EQ(got.size(), 2u);
  ASSERT_FALSE(got[0]);
  EXPECT_EQ(got[0].error().code, Code::kInvalidArgument);
  ASSERT_FALSE(got[1]);
  EXPECT_EQ(got[1].error().code, Code::kInvalidArgument);
  std::vector<Result<SampleResult>> out;
  EXPECT_TRUE(gpu->begin_forward(rows_batch(1)));
  Tensor x = gpu->scratch(2, vocab);
  auto mismatch = gpu->sample_rows(x, std::vector<RowSampling>{bad.row()}, out);
  ASSERT_FALSE(mismatch);
  EXPECT_EQ(mismatch.error().code, Code::kInvalidArgument);
}

TEST_F(CudaSampling, TiesAndCrowdedValuesCutLikeTheHost) {
  // Cuts whose boundary lies among more equal or near values than the kernel sorts at once.
  const int64_t vocab = 129280;
  std::vector<SamplingCase> cases;
  std::vector<std::vector<float>> logits;
  auto add = [&](const std::string& name, SamplingParams p, std::vector<float> row, bool logprobs = true) {
    if (logprobs) p.logprobs = 5;
    cases.push_back({name, p, make_state(vocab, 2, 5, 0), {}, {}, {0x7135ull + cases.size(), 0, 11}});
    logits.push_back(std::move(row));
  };
  SamplingParams p;
  p.temperature = 1.0f;
  const std::vector<float> zeros(static_cast<size_t>(vocab), 0.0f);
  p.top_k = 5000;
  add("all equal, top_k 5000", p, zeros);
  p.top_k = 0;
  p.top_p = 0.3f;
  add("all equal, top_p 0.3", p, zeros);
  std::vector<float> plateau = make_logits(vocab, 5, RowShape::kFlat);
  for (int64_t i = 0; i < 3000; ++i) plateau[static_cast<size_t>((i * 41) % vocab)] = 20.0f;
  p.top_p = 1.0f;
  p.top_k = 1000;
  add("3000 equal maxima, top_k 1000", p, plateau);
  p.top_k = 0;
  p.top_p = 0.5f;
  add("3000 equal maxima, top_p 0.5", p, plateau);
  // top_k then top_p and min_p: the list top_k keeps (at most 2048), or the row where it keeps more.
  p.top_k = 1000;
  add("3000 equal maxima, top_k 1000, top_p 0.5", p, plateau);
  p.top_k = 5000;
  p.top_p = 0.3f;
  add("all equal, top_k 5000, top_p 0.3", p, zeros);
  // top_k of at most 512 tokens: ranked in a short list where its bucket and those above hold at
  // most 512 tokens (here with ties at the cut), else cut over the row.
  std::vector<float> plateau200 = make_logits(vocab, 7, RowShape::kFlat);
  for (int64_t i = 0; i < 200; ++i) plateau200[static_cast<size_t>((i * 613) % vocab)] = 20.0f;
  p.top_k = 150;
  p.top_p = 0.7f;
  add("200 equal maxima, top_k 150, top_p 0.7", p, plateau200);
  p.top_k = 300;
  p.top_p = 0.5f;
  add("3000 equal maxima, top_k 300, top_p 0.5", p, plateau);
  std::vector<float> crowded = make_logits(vocab, 6, RowShape::kFlat);
  for (int64_t i = 0; i < 6000; ++i) crowded[static_cast<size_t>((i * 17) % vocab)] = 12.0f + 1e-5f * static_cast<float>(i % 997);
  p.top_p = 1.0f;
  p.top_k = 2500;
  add("6000 near maxima, top_k 2500", p, crowded);
  p.top_k = 2048;
  p.top_p = 0.9f;
  p.min_p = 0.5f;
  add("6000 near maxima, top_k 2048, top_p 0.9, min_p 0.5", p, crowded);
  p.min_p = 0.0f;
  p.top_k = 0;
  p.top_p = 0.6f;
  p.logprobs_mode = LogprobsMode::kProcessed;
  add("6000 near maxima, top_p 0.6, processed logprobs", p, crowded);
  const Agreement a = check_cases(cases, logits);
  print_agreement("ties and crowded buckets", a);
  EXPECT_EQ(a.mismatched, 0);
}

TEST_F(CudaSampling, SamplesTheLogitsOfAStepReplayedAsAGraph) {
  // sample_rows launches the pending graph of the step first: it samples that step's logits (read
  // back afterwards: the CUDA backend leaves them as they are).
  auto model = DeepseekV4::random(demo_config(), *gpu, 21);
  ASSERT_TRUE(model) << model.error().message;
  DeepseekV4& m = *model.value();
  const StateLayout layout = m.state_layout();
  const int n = 3, blocks = layout.blocks_for(96);
  ASSERT_TRUE(gpu->allocate_state(layout, n, n * blocks));
  gpu->set_graphs(true);
  std::vector<std::vector<int32_t>> tables(n);
  for (int i = 0; i < n; ++i)
    for (int b = 0; b < blocks; ++b) tables[static_cast<size_t>(i)].push_back(i * blocks + b);
  SamplingParams greedy, sampled;
  greedy.temperature = 0.0f;
  greedy.logprobs = 2;
  sampled.temperature = 0.9f;
  sampled.top_p = 0.9f;
  sampled.logprobs = 2;
  const auto state = SequenceSamplingState::create({}, static_cast<int32_t>(m.config().vocab_size)).value();
  Agreement a;
  std::vector<int32_t> prompt(20);
  for (int t = 0; t < 20; ++t) prompt[static_cast<size_t>(t)] = (t * 31 + 3) % 4000 + 5;
  for (int step = 0; step < 6; ++step) {
    ForwardBatch b;
    std::vector<int32_t> tok(n);
    for (int i = 0; i < n; ++i) {
      tok[static_cast<size_t>(i)] = (step * 13 + i + 1) % 4000 + 5;
      if (step == 0)
        b.add_sequence(i, 0, prompt.data(), 20, tables[static_cast<size_t>(i)], ForwardBatch::Logits::kLast);
      else
        b.add_sequence(i, 20 + step - 1, &tok[static_cast<size_t>(i)], 1, tables[static_cast<size_t>(i)], ForwardBatch::Logits::kLast);
    }
    auto t = m.forward_logits(b);
    ASSERT_TRUE(t) << t.error().message;
    std::vector<SamplingCase> cases;
    for (int i = 0; i < n; ++i)
      cases.push_back({"step " + std::to_string(step) + " row " + std::to_string(i),
                       i == 0 ? greedy : sampled,
                       state,
                       {},
                       {},
                       {42, static_cast<uint32_t>(i), static_cast<uint32_t>(step)}});
    std::vector<RowSampling> specs;
    for (const auto& c : cases) specs.push_back(c.row());
    std::vector<Result<SampleResult>> got;
    ASSERT_TRUE(gpu->sample_rows(t.value(), specs, got));
    std::vector<float> rows(static_cast<size_t>(t.value().rows * t.value().cols));
    ASSERT_TRUE(gpu->read(t.value(), rows.data()));
    for (int i = 0; i < n; ++i) {
      std::vector<float> row(rows.begin() + static_cast<std::ptrdiff_t>(i * t.value().cols),
                             rows.begin() + static_cast<std::ptrdiff_t>((i + 1) * t.value().cols));
      const auto want = sample_row(row, cases[static_cast<size_t>(i)].params, state, {}, {}, cases[static_cast<size_t>(i)].key);
      compare_row(got[static_cast<size_t>(i)], want, row, cases[static_cast<size_t>(i)], a);
    }
  }
  print_agreement("after eager, captured and replayed steps", a);
  EXPECT_EQ(a.mismatched, 0);
}

}  // namespace
}  // namespace deepinfer::testing
