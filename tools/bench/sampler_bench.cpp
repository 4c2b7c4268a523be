// Host sampling cost per row at DeepSeek's vocabulary (129280), for the
// parameter sets servers use: the time sample_row takes on one thread, and a
// batch of rows sampled the way the engine does it. Logits are synthetic:
// peaked rows like a trained model's, and flat rows like a random model's.
// With --device cuda, also Backend::sample_rows on the GPU (the CUDA module)
// for batches of 1 and --rows rows: the whole op (upload of the specs, the
// kernels, the results back), per row, beside the host's time.
// Usage: sampler_bench [--vocab N] [--rows N] [--threads N] [--device cpu|cuda]
#include "backend/backend.h"
#include "sample/sampler.h"
#include "sample/sampling_rng.h"
#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace deepinfer;

namespace {

struct Case {
  const char *name;
  SamplingParams params;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  out.push_back({"greedy", greedy});
  SamplingParams plain;
  plain.temperature = 0.8f;
  out.push_back({"temperature 0.8", plain});
  SamplingParams top_p = plain;
  top_p.top_p = 0.95f;
  out.push_back({"temperature 0.8, top_p 0.95", top_p});
  SamplingParams top_k = plain;
  top_k.top_k = 50;
  out.push_back({"temperature 0.8, top_k 50", top_k});
  SamplingParams all = top_p;
  all.top_k = 50;
  all.min_p = 0.05f;
  all.repetition_penalty = 1.1f;
  out.push_back({"top_k 50, top_p 0.95, min_p 0.05, repetition 1.1", all});
  SamplingParams logprobs = top_p;
  logprobs.logprobs = 5;
  out.push_back({"temperature 0.8, top_p 0.95, logprobs 5", logprobs});
  return out;
}

// A trained model's row: a Gaussian bulk (sd 2) and a few tokens far above it,
// which hold most of the mass. A flat row (random weights, as --dummy-weights
// models give): the bulk alone (sd 3).
std::vector<float> make_row(int vocab, uint32_t seed, bool peaked) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, peaked ? 2.0f : 3.0f);
  std::vector<float> row(vocab);
  for (float &x : row)
    x = normal(gen);
  if (peaked)
    for (int i = 0; i < 8; ++i)
      row[gen() % vocab] = 16.0f - i;
  return row;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

// Best of 5 (after one warm-up) of sample_rows over `batch` copies of the
// case's rows, in seconds per row; -1 where it failed (printed).
double device_seconds_per_row(Backend &gpu, const Case &c,
                              const std::vector<std::vector<float>> &source,
                              int batch, const SequenceSamplingState &state) {
  const auto vocab = static_cast<int64_t>(source[0].size());
  std::vector<float> flat;
  std::vector<RowSampling> specs;
  for (int r = 0; r < batch; ++r) {
    const auto &row = source[static_cast<size_t>(r) % source.size()];
    flat.insert(flat.end(), row.begin(), row.end());
    specs.push_back({&c.params, &state, {}, {},
                     SampleKey{7, 0, static_cast<uint32_t>(r)}});
  }
  const ScratchMark mark = gpu.scratch_mark();
  Tensor x = gpu.scratch_uninit(batch, vocab);
  std::vector<Result<SampleResult>> out;
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {
    // (the op may leave the logits changed: written again, untimed)
    if (auto w = gpu.write(x, flat.data()); !w) {
      std::fprintf(stderr, "%s\n", w.error().message.c_str());
      gpu.scratch_release(mark);
      return -1;
    }
    const auto t = std::chrono::steady_clock::now();
    auto r = gpu.sample_rows(x, specs, out);
    const double s = seconds_since(t);
    if (!r || out.empty() || !out[0]) {
      std::fprintf(stderr, "%s: %s\n", c.name,
                   !r ? r.error().message.c_str()
                      : out.empty() ? "no result"
                                    : out[0].error().message.c_str());
      gpu.scratch_release(mark);
      return -1;
    }
    if (rep > 0)
      best = std::min(best, s);
  }
  gpu.scratch_release(mark);
  return best / batch;
}

// The device table: host (one thread) against the GPU at batch 1 and `rows`.
int device_table(int vocab, int rows, const SequenceSamplingState &state) {
  auto gpu = make_cuda_backend();
  if (!gpu) {
    std::fprintf(stderr, "%s\n", gpu.error().message.c_str());
    return 1;
  }
  std::printf("\n## Device sampling (%s): Backend::sample_rows, per row\n",
              gpu.value()->name().c_str());
  for (bool peaked : {true, false}) {
    std::vector<std::vector<float>> source;
    for (int r = 0; r < rows; ++r)
      source.push_back(make_row(vocab, 1000 + r, peaked));
    std::printf("\n### %s rows\n\n", peaked ? "Peaked (a trained model's)"
                                            : "Flat (a random model's)");
    std::printf("| parameters | host, 1 thread (us) | device, batch 1 (us) "
                "| device, batch %d (us) |\n",
                rows);
    std::printf("|---|---:|---:|---:|\n");
    for (const Case &c : cases()) {
      double host = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        std::vector<float> work = source[0];
        const auto t = std::chrono::steady_clock::now();
        if (!sample_row(work, c.params, state, {}, {}, SampleKey{7, 0, 0})) {
          std::fprintf(stderr, "%s: the host sampler failed\n", c.name);
          return 1;
        }
        host = std::min(host, seconds_since(t));
      }
      const double one = device_seconds_per_row(*gpu.value(), c, source, 1, state);
      const double many = device_seconds_per_row(*gpu.value(), c, source, rows, state);
      if (one < 0 || many < 0)
        return 1;
      std::printf("| %s | %.1f | %.1f | %.2f |\n", c.name, host * 1e6, one * 1e6,
                  many * 1e6);
    }
  }
  std::printf("\nDevice figures: the best of 5 calls (after a warm-up), from "
              "the call to its results on the host.\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  int vocab = 129280, rows = 64;
  size_t threads = 0;
  std::string device = "cpu";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--vocab")
      vocab = std::atoi(argv[i + 1]);
    else if (flag == "--rows")
      rows = std::atoi(argv[i + 1]);
    else if (flag == "--threads")
      threads = static_cast<size_t>(std::atoi(argv[i + 1]));
    else if (flag == "--device")
      device = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: %s [--vocab N] [--rows N] [--threads N] "
                   "[--device cpu|cuda]\n",
                   argv[0]);
      return 2;
    }
  }
  if (device != "cpu" && device != "cuda") {
    std::fprintf(stderr, "--device must be cpu or cuda\n");
    return 2;
  }
  if (vocab < 64 || rows < 1) {
    std::fprintf(stderr, "--vocab must be >= 64 and --rows >= 1\n");
    return 2;
  }
  auto created = ThreadPool::create(threads);
  if (!created) {
    std::fprintf(stderr, "%s\n", created.error().message.c_str());
    return 1;
  }
  ThreadPool& pool = *created.value();
  std::vector<int32_t> prompt{1, 2, 3, 17, 4000, 5};
  auto state = SequenceSamplingState::create(prompt, vocab);
  if (!state) {
    std::fprintf(stderr, "%s\n", state.error().message.c_str());
    return 1;
  }

  std::printf("## sampler_bench: vocabulary %d, %d rows, pool of %zu threads\n",
              vocab, rows, pool.size());
  for (bool peaked : {true, false}) {
    std::vector<std::vector<float>> source;
    for (int r = 0; r < rows; ++r)
      source.push_back(make_row(vocab, 1000 + r, peaked));
    std::printf("\n### %s rows\n\n", peaked ? "Peaked (a trained model's)"
                                            : "Flat (a random model's)");
    std::printf("| parameters | one row, 1 thread (us) | %d rows, 1 thread "
                "(ms) | %d rows, pool (ms) |\n",
                rows, rows);
    std::printf("|---|---:|---:|---:|\n");
    for (const Case &c : cases()) {
      if (auto v = validate(c.params, vocab); !v) {
        std::fprintf(stderr, "%s: %s\n", c.name, v.error().message.c_str());
        return 1;
      }
      std::vector<std::vector<float>> work = source;
      std::vector<int32_t> tokens(rows);
      auto run = [&](size_t r) {
        std::copy(source[r].begin(), source[r].end(), work[r].begin());
        auto s = sample_row(work[r], c.params, state.value(), {}, {},
                            SampleKey{7, 0, static_cast<uint32_t>(r)});
        if (!s) {
          std::fprintf(stderr, "%s: %s\n", c.name, s.error().message.c_str());
          std::exit(1);
        }
        tokens[r] = s.value().token;
      };
      double serial = 1e30, parallel = 1e30;
      for (int rep = 0; rep < 5; ++rep) {
        auto t = std::chrono::steady_clock::now();
        for (int r = 0; r < rows; ++r)
          run(r);
        serial = std::min(serial, seconds_since(t));
        const std::vector<int32_t> one_thread = tokens;
        t = std::chrono::steady_clock::now();
        pool.parallel_for(rows, 1, [&](size_t b, size_t e) {
          for (size_t r = b; r < e; ++r)
            run(r);
        });
        parallel = std::min(parallel, seconds_since(t));
        if (tokens != one_thread) {
          std::fprintf(stderr,
                       "%s: the pool sampled other tokens than one thread\n",
                       c.name);
          return 1;
        }
      }
      std::printf("| %s | %.1f | %.2f | %.2f |\n", c.name, serial / rows * 1e6,
                  serial * 1e3, parallel * 1e3);
    }
  }
  std::printf("\nEach figure is the best of 5 runs; a row's time includes "
              "restoring its logits (one copy).\n");
  return device == "cuda" ? device_table(vocab, rows, state.value()) : 0;
}
