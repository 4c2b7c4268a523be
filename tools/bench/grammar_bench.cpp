// Grammar engine benchmark on the DeepSeek vocabulary (129,280 entries), one thread.
//
// For each schema of tools/bench/grammar_schemas.json (real-world-like schemas with realistic example
// instances) it measures compile time and the time of every fill_mask() in two workloads:
//  - replay: each example, compact and pretty-printed, tokenized greedily (longest vocabulary
//    token first) and fed token by token, as a model writing that text would;
//  - sampled: outputs generated with random weights (a stress test: random token choices reach
//    states real text rarely does).
// One GrammarCompiler serves all schemas, as in the engine; the first pass over a schema runs on
// cold caches.
//
// With --suite DIR (tests/golden/json-schema-test-suite/draft2020-12) it instead compiles every
// schema of the JSON-Schema-Test-Suite with one warm compiler (the vocabulary built once) and
// walks each valid instance that compiles, token by token (the accepted compact text, tokenized
// greedily): compile time per schema and the time of every fill_mask, first visits included.
//
//   grammar_bench [--passes N] [--samples N] [--repeats N] [--seed S] [--schemas FILE] [--print-outputs]
//   grammar_bench --suite DIR [--repeats N]
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "instance_acceptance.h"
#include "random_generation.h"
#include "test_vocabularies.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using namespace deepinfer;
using namespace deepinfer::grammar;

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

std::string stats(const std::vector<double>& v) {
  return fmt::format("p50 {:8.1f}  p99 {:8.1f}  max {:9.1f}  ({} masks)", percentile(v, 50), percentile(v, 99), percentile(v, 100), v.size());
}

struct Options {
  int passes = 3;
  int samples = 3;
  int repeats = 3;
  uint64_t seed = 1;
  std::string schemas = DI_BENCH_DIR "/grammar_schemas.json";
  std::string suite;
  int slowest = 0;  // --suite: list the N slowest masks
  bool print_outputs = false;
};

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char* name) { return std::strcmp(argv[i], name) == 0 && i + 1 < argc; };
    if (arg("--passes")) {
      o.passes = std::max(1, std::atoi(argv[++i]));
    } else if (arg("--repeats")) {
      o.repeats = std::max(1, std::atoi(argv[++i]));
    } else if (arg("--samples")) {
      o.samples = std::atoi(argv[++i]);
    } else if (arg("--seed")) {
      o.seed = static_cast<uint64_t>(std::atoll(argv[++i]));
    } else if (arg("--schemas")) {
      o.schemas = argv[++i];
    } else if (arg("--suite")) {
      o.suite = argv[++i];
    } else if (arg("--slowest")) {
      o.slowest = std::max(0, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--print-outputs") == 0) {
      o.print_outputs = true;
    } else {
      fmt::print(stderr,
                 "usage: {} [--passes N] [--samples N] [--repeats N] [--seed S] [--schemas FILE] [--print-outputs]\n"
                 "       {} --suite DIR [--repeats N] [--slowest N]\n",
                 argv[0], argv[0]);
      std::exit(2);
    }
  }
  return o;
}

// Longest-match tokenization: at each position the longest token that is a prefix of the rest.
std::vector<int32_t> tokenize(const TokenVocabulary& vocab, const std::string& text) {
  const TokenTrie& trie = vocab.trie();
  std::vector<int32_t> out;
  size_t pos = 0;
  while (pos < text.size()) {
    int32_t best = -1;
    size_t best_len = 0;
    uint32_t node = 0;
    for (size_t len = 1; pos + len <= text.size(); ++len) {
      // Find the child of `node` with the next byte (children are contiguous in preorder).
      uint32_t child = node + 1, end = trie.subtree_end(node), found = 0;
      while (child < end) {
        if (trie.byte(child) == static_cast<uint8_t>(text[pos + len - 1])) {
          found = child;
          break;
        }
        child = trie.subtree_end(child);
      }
      if (!found) break;
      node = found;
      if (!trie.tokens(node).empty()) {
        best = trie.tokens(node)[0];
        best_len = len;
      }
    }
    if (best < 0) return {};
    out.push_back(best);
    pos += best_len;
  }
  return out;
}

// One pass of the whole workload with fresh caches. Deterministic (seeded), so repeats measure
// the same masks in the same order.
struct Measurements {
  std::vector<double> replay_cold, replay_warm, sampled, advance, compile;
  std::vector<std::string> rows;
  size_t unfinished = 0;
};

Measurements measure(const Json& schemas, const std::shared_ptr<const TokenVocabulary>& vocab, const Options& opt) {
  Measurements r;
  GrammarCompiler compiler(vocab);
  std::mt19937_64 rng(opt.seed);
  for (const auto& s : schemas) {
    std::string name = s["name"].get<std::string>();
    auto start = Clock::now();
    auto g = compiler.compile(GrammarKind::kJsonSchema, s["schema"].dump()).value();
    r.compile.push_back(micros(Clock::now() - start));
    std::vector<double> cold, warm, mine_sampled;
    size_t tokens = 0;
    for (int pass = 0; pass < opt.passes; ++pass) {
      for (const auto& example : s["examples"]) {
        for (int indent : {-1, 2}) {
          std::string text = example.dump(indent);
          std::vector<int32_t> ids = tokenize(*vocab, text);
          ids.push_back(vocab->eos_ids()[0]);
          Matcher m(g);
          std::vector<uint32_t> mask(vocab->mask_words());
          for (int32_t id : ids) {
            auto a = Clock::now();
            m.fill_mask(mask.data());
            (pass == 0 ? cold : warm).push_back(micros(Clock::now() - a));
            auto b = Clock::now();
            bool ok = ((mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u) && m.advance(id);
            r.advance.push_back(micros(Clock::now() - b));
            if (!ok) {
              fmt::print(stderr, "{}: token {} of the example is refused\n", name, id);
              std::exit(1);
            }
          }
          if (pass == 0) tokens += ids.size();
        }
      }
    }
    for (int k = 0; k < opt.samples; ++k) {
      Matcher m(g);
      auto out = testing::generate(m, rng, 400);
      mine_sampled.insert(mine_sampled.end(), out.mask_us.begin(), out.mask_us.end());
      r.unfinished += !out.terminated;
      if (opt.print_outputs) fmt::print("  {}\n", out.text);
    }
    r.replay_cold.insert(r.replay_cold.end(), cold.begin(), cold.end());
    r.replay_warm.insert(r.replay_warm.end(), warm.begin(), warm.end());
    r.sampled.insert(r.sampled.end(), mine_sampled.begin(), mine_sampled.end());
    r.rows.push_back(fmt::format("{:<26} {:>7} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f}", name, tokens, percentile(cold, 99),
                                 percentile(cold, 100), percentile(warm, 99), percentile(mine_sampled, 99)));
  }
  return r;
}

// Elementwise minimum: a mask's time without the preemptions one repeat happened to suffer.
void keep_min(std::vector<double>& acc, const std::vector<double>& v) {
  if (acc.empty()) {
    acc = v;
    return;
  }
  for (size_t i = 0; i < acc.size() && i < v.size(); ++i) acc[i] = std::min(acc[i], v[i]);
}

// The JSON-Schema-Test-Suite walk (see the header comment). Deterministic: repeats time the same
// compiles and masks in the same order.
struct SuiteRun {
  std::vector<double> compile, mask;
  std::vector<std::string> where;  // per mask: the schema and the text before it (for --slowest)
  size_t cases = 0, compiled = 0, instances = 0, refused = 0;
};

SuiteRun run_suite(const std::vector<Json>& files, const std::shared_ptr<const TokenVocabulary>& vocab, bool list_slow) {
  SuiteRun r;
  GrammarCompiler compiler(vocab, 0);
  std::vector<uint32_t> mask(vocab->mask_words());
  for (const auto& cases : files) {
    for (const auto& c : cases) {
      ++r.cases;
      auto start = Clock::now();
      auto g = compiler.compile(GrammarKind::kJsonSchema, c["schema"].dump());
      double us = micros(Clock::now() - start);
      if (!g) continue;
      ++r.compiled;
      r.compile.push_back(us);
      for (const auto& t : c["tests"]) {
        if (!t["valid"].get<bool>()) continue;
        Matcher probe(g.value());
        auto text = testing::accepted_text(probe, t["data"], testing::Layout::kCompact);
        if (!text) continue;
        std::vector<int32_t> ids = tokenize(*vocab, *text);
        ids.push_back(vocab->eos_ids()[0]);
        ++r.instances;
        Matcher m(g.value());
        std::string before;
        for (int32_t id : ids) {
          auto a = Clock::now();
          m.fill_mask(mask.data());
          r.mask.push_back(micros(Clock::now() - a));
          if (list_slow) r.where.push_back(fmt::format("{} | {}", c["schema"].dump(), before));
          if (list_slow) before += vocab->bytes(id);
          if (!((mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u) || !m.advance(id)) {
            ++r.refused;
            break;
          }
        }
      }
    }
  }
  return r;
}

int suite_main(const Options& opt) {
  namespace fs = std::filesystem;
  std::vector<fs::path> paths;
  for (const auto& e : fs::recursive_directory_iterator(opt.suite)) {
    if (e.path().extension() == ".json") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<Json> files;
  for (const auto& p : paths) files.push_back(Json::parse(std::ifstream(p)));
  auto t0 = Clock::now();
  auto vocab = testing::deepseek_vocabulary();
  fmt::print("vocabulary: {} entries, loaded in {:.0f} ms\n", vocab->size(), micros(Clock::now() - t0) / 1000);
  SuiteRun best;
  for (int rep = 0; rep < opt.repeats; ++rep) {
    SuiteRun run = run_suite(files, vocab, opt.slowest > 0);
    if (rep == 0) {
      best = std::move(run);
      continue;
    }
    keep_min(best.compile, run.compile);
    keep_min(best.mask, run.mask);
  }
  fmt::print("JSON-Schema-Test-Suite: {} files, {} schemas, {} compiled; {} valid instances walked ({} refused)\n", files.size(),
             best.cases, best.compiled, best.instances, best.refused);
  fmt::print("mask (us, first visits included)  {}\n", stats(best.mask));
  fmt::print("compile (us, warm tokenizer)      p50 {:8.0f}  p99 {:8.0f}  max {:9.0f}  ({} schemas)\n", percentile(best.compile, 50),
             percentile(best.compile, 99), percentile(best.compile, 100), best.compile.size());
  fmt::print("(per mask and per compile: the minimum over {} repeats of the whole walk)\n", opt.repeats);
  if (opt.slowest > 0) {
    std::vector<size_t> order(best.mask.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    const size_t n = std::min(order.size(), static_cast<size_t>(opt.slowest));
    std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(n), order.end(),
                      [&](size_t a, size_t b) { return best.mask[a] > best.mask[b]; });
    for (size_t i = 0; i < n; ++i) fmt::print("{:9.1f} us  {}\n", best.mask[order[i]], best.where[order[i]].substr(0, 400));
  }
  return best.refused == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse_args(argc, argv);
  if (!opt.suite.empty()) return suite_main(opt);
  std::ifstream in(opt.schemas);
  if (!in) {
    fmt::print(stderr, "cannot open {}\n", opt.schemas);
    return 1;
  }
  Json schemas = Json::parse(in);
  auto t0 = Clock::now();
  auto vocab = testing::deepseek_vocabulary();
  fmt::print("vocabulary: {} entries, {} trie nodes, loaded in {:.0f} ms\n", vocab->size(), vocab->trie().num_nodes(),
             micros(Clock::now() - t0) / 1000);

  // Compile time per schema: the minimum of 10 compiles by compilers without cache (the machine
  // is shared; the minimum is the time without preemption).
  std::vector<double> compile_us;
  for (const auto& s : schemas) {
    double best = 1e18;
    for (int r = 0; r < 10; ++r) {
      GrammarCompiler fresh(vocab, 0);
      auto start = Clock::now();
      auto g = fresh.compile(GrammarKind::kJsonSchema, s["schema"].dump());
      best = std::min(best, micros(Clock::now() - start));
      if (!g) {
        fmt::print(stderr, "{}: {}\n", s["name"].get<std::string>(), g.error().message);
        return 1;
      }
    }
    compile_us.push_back(best);
  }

  Measurements best;
  for (int rep = 0; rep < opt.repeats; ++rep) {
    Measurements m = measure(schemas, vocab, opt);
    keep_min(best.replay_cold, m.replay_cold);
    keep_min(best.replay_warm, m.replay_warm);
    keep_min(best.sampled, m.sampled);
    keep_min(best.advance, m.advance);
    if (rep == 0) {
      best.rows = m.rows;
      best.unfinished = m.unfinished;
    }
  }
  fmt::print("\n{:<26} {:>7} {:>10} {:>10} {:>10} {:>10}   (first repeat)\n", "schema", "tokens", "cold p99", "cold max",
             "warm p99", "sampled p99");
  for (const auto& row : best.rows) fmt::print("{}\n", row);
  const auto& replay_cold = best.replay_cold;
  const auto& replay_warm = best.replay_warm;
  const auto& sampled = best.sampled;
  const auto& advance_us = best.advance;
  size_t unfinished = best.unfinished;
  std::vector<double> all = replay_cold;
  all.insert(all.end(), replay_warm.begin(), replay_warm.end());
  all.insert(all.end(), sampled.begin(), sampled.end());
  fmt::print("\nmask time per token (us)\n");
  fmt::print("  replay, first pass (cold)   {}\n", stats(replay_cold));
  fmt::print("  replay, later passes (warm) {}\n", stats(replay_warm));
  fmt::print("  sampled                     {}  ({} of {} hit 400 tokens)\n", stats(sampled), unfinished, schemas.size() * static_cast<size_t>(opt.samples));
  fmt::print("  all                         {}\n", stats(all));
  fmt::print("advance per token (us)        {}\n", stats(advance_us));
  fmt::print("compile (us)                  p50 {:8.0f}  p99 {:8.0f}  max {:9.0f}  ({} schemas)\n", percentile(compile_us, 50),
             percentile(compile_us, 99), percentile(compile_us, 100), compile_us.size());
  fmt::print("(mask and advance times: per mask, the minimum over {} repeats of the whole workload)\n", opt.repeats);
  return 0;
}
