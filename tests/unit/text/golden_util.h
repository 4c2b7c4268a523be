// Shared by the text tests: the DeepSeek tokenizer from tests/golden (loaded once) and JSONL reading.
#pragma once

#include "text/tokenizer.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace deepinfer::text::testing {

inline std::string golden_path(const std::string& name) { return std::string(DI_GOLDEN_DIR) + "/tokenizer/" + name; }

inline const Tokenizer& deepseek() {
  static const Tokenizer tok = [] {
    auto t = Tokenizer::from_file(golden_path("tokenizer.json"));
    if (!t) throw std::runtime_error(t.error().message);
    return std::move(t).value();
  }();
  return tok;
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& name) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(golden_path(name));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

}  // namespace deepinfer::text::testing
