// Offline throughput of the engine with continuous batching: C concurrent requests (prompt P
// tokens, G generated tokens each), for C in 1, 4, 16, 64. Prints tokens/s and the share of each
// step spent planning it (scheduler and bookkeeping) rather than in the forward.
//
//   engine_bench [--model DIR] [--device cpu|cuda] [--prompt 64] [--gen 32] [--threads 0]
//                [--temperature 0] [--top-p 1] [--top-k 0] [--repetition-penalty 1]
//                                   (temperature 0: greedy)
//                [--dummy-weights]  (--model is then a config.json: random weights of that shape)
//                [--host-sampling]  (sample on the host where the backend would sample: the
//                                    engine option host_sampling)
//                [--batch-invariant] (the backend option batch_invariant)
//                [--concurrency 1,4,16,64]
#include "engine/engine.h"
#include "engine/session.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace deepinfer;

int main(int argc, char** argv) {
  std::string model = DEEPINFER_DEFAULT_MODEL, device = "cpu";
  int prompt = 64, gen = 32, threads = 0;
  float temperature = 0.0f, top_p = 1.0f, repetition = 1.0f;
  int top_k = 0;
  bool dummy_weights = false, host_sampling = false, batch_invariant = false;
  std::vector<int> concurrency = {1, 4, 16, 64};
  for (int i = 1; i < argc; i += 2) {
    if (!std::strcmp(argv[i], "--dummy-weights") || !std::strcmp(argv[i], "--host-sampling") ||
        !std::strcmp(argv[i], "--batch-invariant")) {
      (argv[i][2] == 'd' ? dummy_weights : argv[i][2] == 'h' ? host_sampling : batch_invariant) = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", argv[i]);
      return 2;
    }
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--device")) device = argv[i + 1];
    else if (!std::strcmp(argv[i], "--prompt")) prompt = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--gen")) gen = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--temperature")) temperature = std::strtof(argv[i + 1], nullptr);
    else if (!std::strcmp(argv[i], "--top-p")) top_p = std::strtof(argv[i + 1], nullptr);
    else if (!std::strcmp(argv[i], "--top-k")) top_k = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repetition-penalty")) repetition = std::strtof(argv[i + 1], nullptr);
    else if (!std::strcmp(argv[i], "--concurrency")) {
      concurrency.clear();
      for (const char* p = argv[i + 1]; *p;) {
        char* end = nullptr;
        concurrency.push_back(static_cast<int>(std::strtol(p, &end, 10)));
        if (end == p || concurrency.back() <= 0) {
          std::fprintf(stderr, "--concurrency takes positive integers separated by commas\n");
          return 2;
        }
        p = *end == ',' ? end + 1 : end;
      }
    }
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  std::printf("model %s, device %s, prompt %d tokens, %d generated per request, temperature %g, top_p %g, top_k %d, repetition %g%s%s\n\n",
              model.c_str(), device.c_str(), prompt, gen, temperature, top_p, top_k, repetition,
              host_sampling ? ", sampled on the host" : "", batch_invariant ? ", batch-invariant" : "");
  std::printf("| concurrent | requests/s | generated tok/s | total tok/s | steps | planning share of step |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|\n");
  for (int concurrent : concurrency) {
    EngineConfig cfg;
    cfg.model_path = model;
    cfg.device = device == "cuda" ? Device::kCuda : Device::kCpu;
    cfg.threads = threads;
    cfg.dummy_weights = dummy_weights;
    cfg.host_sampling = host_sampling;
    cfg.backend.batch_invariant = batch_invariant;
    cfg.max_sequences = concurrent;
    cfg.max_batched_tokens = 2048;
    auto engine = Engine::create(cfg);
    if (!engine) {
      std::fprintf(stderr, "%s\n", engine.error().message.c_str());
      return 1;
    }
    std::mt19937 rng(concurrent);
    {  // warm-up, untimed: first launches (lazy module loading, library handles), graph captures
      auto s = engine.value()->create_session().value();
      std::vector<int32_t> ids(prompt, 3);
      SamplingParams w;
      w.max_tokens = 4;
      w.ignore_eos = true;
      if (!s->add_tokens(ids) || !s->generate(w)) return 1;
      while (s->poll(-1)) {
      }
    }
    std::vector<std::shared_ptr<Session>> sessions;
    for (int i = 0; i < concurrent; ++i) {
      auto s = engine.value()->create_session().value();
      std::vector<int32_t> ids(prompt);
      for (auto& t : ids) t = 3 + static_cast<int32_t>(rng() % (engine.value()->vocab_size() - 3));
      if (!s->add_tokens(ids)) return 1;
      sessions.push_back(s);
    }
    SamplingParams p;
    p.max_tokens = gen;
    p.ignore_eos = true;
    p.temperature = temperature;
    p.top_p = top_p;
    p.top_k = top_k;
    p.repetition_penalty = repetition;
    p.seed = 1;
    const auto before = engine.value()->stats();
    auto t0 = std::chrono::steady_clock::now();
    for (auto& s : sessions)
      if (!s->generate(p)) return 1;
    for (auto& s : sessions)
      while (s->poll(-1)) {
      }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto after = engine.value()->stats();
    const double steps = static_cast<double>(after.steps - before.steps);
    const double share = (after.schedule_seconds - before.schedule_seconds) / (after.step_seconds - before.step_seconds);
    std::printf("| %d | %.1f | %.0f | %.0f | %.0f | %.2f%% |\n", concurrent, concurrent / seconds, concurrent * gen / seconds,
                concurrent * (gen + prompt) / seconds, steps, 100.0 * share);
    std::fflush(stdout);
    engine.value()->shutdown();
  }
  return 0;
}
