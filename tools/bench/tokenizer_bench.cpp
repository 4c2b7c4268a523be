// Tokenizer encode speed on one thread, on the text make_golden.py times HF tokenizers with: the
// golden corpus joined by "\n", repeated to at least 4 MiB, encoded line by line; best of 3 runs.
// Usage: tokenizer_bench DIR   (DIR = tests/golden/tokenizer, holding tokenizer.json and corpus.jsonl)
#include "text/tokenizer.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

using deepinfer::text::EncodeMode;
using deepinfer::text::Tokenizer;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR (holding tokenizer.json and corpus.jsonl)\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const auto t_load = std::chrono::steady_clock::now();
  auto tok = Tokenizer::from_file(dir + "/tokenizer.json");
  if (!tok) {
    std::fprintf(stderr, "%s\n", tok.error().message.c_str());
    return 1;
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();

  std::string base;
  std::ifstream in(dir + "/corpus.jsonl");
  bool first = true;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (!first) base += '\n';
    base += nlohmann::json::parse(line)["text"].get<std::string>();
    first = false;
  }
  if (base.empty()) {
    std::fprintf(stderr, "no corpus in %s/corpus.jsonl\n", dir.c_str());
    return 1;
  }
  // Python: lines = (base + "\n").split("\n") * reps
  const std::size_t reps = (4u << 20) / base.size() + 1;
  std::vector<std::string> one;
  const std::string joined = base + "\n";
  for (std::size_t start = 0;;) {
    const std::size_t nl = joined.find('\n', start);
    one.push_back(joined.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  std::vector<std::string> lines;
  for (std::size_t r = 0; r < reps; ++r) lines.insert(lines.end(), one.begin(), one.end());
  std::size_t bytes = 0;
  for (const auto& l : lines) bytes += l.size() + 1;

  double best = 1e30;
  std::size_t tokens = 0;
  for (int run = 0; run < 3; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t n = 0;
    for (const auto& l : lines) {
      auto ids = tok.value().encode(l, EncodeMode::kRecognizeAddedTokens);
      if (!ids) {
        std::fprintf(stderr, "%s\n", ids.error().message.c_str());
        return 1;
      }
      n += ids.value().size();
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    tokens = n;
  }
  std::printf("{\"bytes\": %zu, \"lines\": %zu, \"tokens\": %zu, \"seconds\": %.4f, \"tokens_per_s\": %.0f, "
              "\"mb_per_s\": %.2f, \"load_seconds\": %.3f}\n",
              bytes, lines.size(), tokens, best, tokens / best, bytes / best / 1e6, load_s);
  return 0;
}
