// Grammar engine benchmark on the DeepSeek vocabulary (129,280 entries), one thread:
// compile time per schema, and the time of every fill_mask() while generating JSON with random
// weights for a set of real-world-like schemas (bench/grammar_schemas.json).
//
//   grammar_bench [--runs N] [--max-tokens N] [--seed S] [--schemas FILE] [--print-outputs]
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "random_generation.h"
#include "test_vocabularies.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using namespace deepinfer;
using namespace deepinfer::grammar;

namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct Options {
  int runs = 5;
  size_t max_tokens = 400;
  uint64_t seed = 1;
  std::string schemas = DI_BENCH_DIR "/grammar_schemas.json";
  bool print_outputs = false;
};

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char* name) { return std::strcmp(argv[i], name) == 0 && i + 1 < argc; };
    if (arg("--runs")) {
      o.runs = std::atoi(argv[++i]);
    } else if (arg("--max-tokens")) {
      o.max_tokens = static_cast<size_t>(std::atol(argv[++i]));
    } else if (arg("--seed")) {
      o.seed = static_cast<uint64_t>(std::atoll(argv[++i]));
    } else if (arg("--schemas")) {
      o.schemas = argv[++i];
    } else if (std::strcmp(argv[i], "--print-outputs") == 0) {
      o.print_outputs = true;
    } else {
      fmt::print(stderr, "usage: {} [--runs N] [--max-tokens N] [--seed S] [--schemas FILE] [--print-outputs]\n", argv[0]);
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse_args(argc, argv);
  std::ifstream in(opt.schemas);
  if (!in) {
    fmt::print(stderr, "cannot open {}\n", opt.schemas);
    return 1;
  }
  auto schemas = nlohmann::json::parse(in);
  auto t0 = Clock::now();
  auto vocab = testing::deepseek_vocabulary();
  fmt::print("vocabulary: {} entries, {} trie nodes, loaded in {:.0f} ms\n", vocab->size(), vocab->trie().num_nodes(),
             micros(Clock::now() - t0) / 1000);

  // Compile time: every schema compiled `runs` times by a compiler with no cache.
  std::vector<double> compile_us;
  for (int r = 0; r < std::max(opt.runs, 5); ++r) {
    for (const auto& s : schemas) {
      GrammarCompiler fresh(vocab, 0);
      auto start = Clock::now();
      auto g = fresh.compile(GrammarKind::kJsonSchema, s["schema"].dump());
      compile_us.push_back(micros(Clock::now() - start));
      if (!g) {
        fmt::print(stderr, "{}: {}\n", s["name"].get<std::string>(), g.error().message);
        return 1;
      }
    }
  }

  // Masks: one long-lived compiler (as in the engine); each schema generates `runs` outputs.
  GrammarCompiler compiler(vocab);
  std::vector<double> all, first_run, later_runs, advance_us;
  size_t tokens = 0, unfinished = 0;
  fmt::print("\n{:<26} {:>7} {:>7} {:>9} {:>9} {:>9}\n", "schema", "compile", "masks", "p50 us", "p99 us", "max us");
  std::mt19937_64 rng(opt.seed);
  for (const auto& s : schemas) {
    std::string name = s["name"].get<std::string>();
    auto start = Clock::now();
    auto g = compiler.compile(GrammarKind::kJsonSchema, s["schema"].dump()).value();
    double compile_ms = micros(Clock::now() - start) / 1000;
    std::vector<double> mine;
    for (int r = 0; r < opt.runs; ++r) {
      Matcher m(g);
      std::vector<uint32_t> mask(vocab->mask_words());
      auto out = Clock::now();
      Clock::time_point before_mask;
      // Time fill_mask alone: the generator calls on_mask right after it; advance is timed apart.
      std::vector<int32_t> steps;
      std::string text;
      for (size_t step = 0; step < opt.max_tokens && !m.is_terminated(); ++step) {
        auto a = Clock::now();
        m.fill_mask(mask.data());
        double us = micros(Clock::now() - a);
        all.push_back(us);
        mine.push_back(us);
        (r == 0 ? first_run : later_runs).push_back(us);
        // Sample like testing::generate (random weights, EOS pull growing with length).
        std::vector<int32_t> allowed;
        for (size_t w = 0; w < mask.size(); ++w) {
          for (uint32_t b = mask[w]; b; b &= b - 1) allowed.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(b))));
        }
        if (allowed.empty()) break;
        std::exponential_distribution<double> weight(1.0);
        std::vector<double> wts(allowed.size());
        double total = 0;
        for (size_t i = 0; i < allowed.size(); ++i) {
          size_t len = vocab->bytes(allowed[i]).size();
          wts[i] = vocab->is_eos(allowed[i]) ? 0.02 * static_cast<double>(step * step + 1) * static_cast<double>(allowed.size())
                                             : weight(rng) / static_cast<double>(1 + len);
          total += wts[i];
        }
        double x = std::uniform_real_distribution<double>(0, total)(rng);
        size_t pick = 0;
        while (pick + 1 < allowed.size() && x >= wts[pick]) x -= wts[pick++];
        auto b = Clock::now();
        if (!m.advance(allowed[pick])) {
          fmt::print(stderr, "{}: advance refused an allowed token\n", name);
          return 1;
        }
        advance_us.push_back(micros(Clock::now() - b));
        ++tokens;
        if (!vocab->is_eos(allowed[pick])) text += vocab->bytes(allowed[pick]);
      }
      (void)out;
      (void)before_mask;
      if (!m.is_terminated()) ++unfinished;
      if (opt.print_outputs) fmt::print("  {}\n", text);
    }
    fmt::print("{:<26} {:>5.2f}ms {:>7} {:>9.1f} {:>9.1f} {:>9.1f}\n", name, compile_ms, mine.size(), percentile(mine, 50),
               percentile(mine, 99), percentile(mine, 100));
  }
  fmt::print("\nmask time per token (us), {} masks, {} tokens, {} generations hit --max-tokens:\n", all.size(), tokens, unfinished);
  fmt::print("  all          p50 {:8.1f}  p99 {:8.1f}  max {:9.1f}\n", percentile(all, 50), percentile(all, 99), percentile(all, 100));
  fmt::print("  first run    p50 {:8.1f}  p99 {:8.1f}  max {:9.1f}   (cold caches for the schema)\n", percentile(first_run, 50),
             percentile(first_run, 99), percentile(first_run, 100));
  fmt::print("  later runs   p50 {:8.1f}  p99 {:8.1f}  max {:9.1f}\n", percentile(later_runs, 50), percentile(later_runs, 99),
             percentile(later_runs, 100));
  fmt::print("advance per token (us): p50 {:.1f}  p99 {:.1f}  max {:.1f}\n", percentile(advance_us, 50), percentile(advance_us, 99),
             percentile(advance_us, 100));
  fmt::print("compile (us), {} compiles: p50 {:.0f}  p99 {:.0f}  max {:.0f}\n", compile_us.size(), percentile(compile_us, 50),
             percentile(compile_us, 99), percentile(compile_us, 100));
  return 0;
}
