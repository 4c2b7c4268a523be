// Randomized end-to-end check: generate with random weights on the DeepSeek vocabulary under many
// schemas (random and hand-written), then every finished output must parse as JSON and validate
// with an independent validator (Debian's python3-jsonschema, draft 2020-12).
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "random_generation.h"
#include "random_schema.h"
#include "test_vocabularies.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace deepinfer::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Longest whitespace run outside string literals.
size_t max_whitespace_run(const std::string& text) {
  size_t best = 0, run = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    bool ws = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    run = ws ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

std::string run_validator(const std::string& jsonl, int* status) {
  std::string cmd = fmt::format("/usr/bin/python3 {}/validate_outputs.py {} 2>&1", DI_GRAMMAR_TEST_DIR, jsonl);
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  *status = p ? pclose(p) : -1;
  return out;
}

TEST(RandomGeneration, JsonSchemaOutputsValidate) {
  if (std::system("/usr/bin/python3 -c 'import jsonschema' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-jsonschema is not installed (apt-get install python3-jsonschema)";
  }
  std::vector<Json> schemas;
  std::ifstream bench(std::string(DI_BENCH_DIR) + "/grammar_schemas.json");
  for (const auto& s : Json::parse(bench)) schemas.push_back(s["schema"]);
  std::mt19937_64 rng(2024);
  for (int i = 0; i < 150; ++i) schemas.push_back(testing::random_schema(rng));

  GrammarCompiler compiler(testing::deepseek_vocabulary());
  std::filesystem::path jsonl = std::filesystem::temp_directory_path() / fmt::format("di_grammar_outputs_{}.jsonl", getpid());
  std::ofstream out(jsonl);
  size_t outputs = 0, unfinished = 0, refused = 0;
  const GrammarOptions layouts[] = {{Whitespace::kAny, 0}, {Whitespace::kCompact, 0}, {Whitespace::kAny, 2}};
  for (size_t i = 0; i < schemas.size(); ++i) {
    const GrammarOptions& opts = layouts[i % 3];
    auto g = compiler.compile(GrammarKind::kJsonSchema, schemas[i].dump(), opts);
    if (!g) {  // e.g. a random schema with no instance; must stay rare
      ++refused;
      continue;
    }
    for (int run = 0; run < 3; ++run) {
      Matcher m(g.value());
      auto gen = testing::generate(m, rng, 300);
      ASSERT_EQ(gen.text.find("<advance failed"), std::string::npos) << gen.text;
      if (!gen.terminated) {
        ++unfinished;
        continue;
      }
      ++outputs;
      Matcher fresh(g.value());
      EXPECT_TRUE(fresh.accepts_string(gen.text)) << gen.text;
      size_t run_len = max_whitespace_run(gen.text);
      if (opts.whitespace == Whitespace::kCompact) {
        EXPECT_EQ(run_len, 0u) << gen.text;
      }
      if (opts.max_whitespace_run) {
        EXPECT_LE(run_len, opts.max_whitespace_run) << gen.text;
      }
      out << Json{{"schema", schemas[i]}, {"output", gen.text}}.dump() << "\n";
    }
  }
  out.close();
  int status = 0;
  std::string report = run_validator(jsonl.string(), &status);
  std::filesystem::remove(jsonl);
  EXPECT_EQ(status, 0) << report;
  std::cout << fmt::format("{} schemas ({} refused at compile), {} outputs validated, {} hit the token limit\n", schemas.size(),
                           refused, outputs, unfinished);
  EXPECT_LE(refused * 10, schemas.size());
  EXPECT_GE(outputs, unfinished * 4);
}

}  // namespace
}  // namespace deepinfer::grammar
