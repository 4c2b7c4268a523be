// Loading the HF reference fixtures of tests/golden/models (made by make_fixtures.py).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace deepinfer::testing {

struct GoldenFixture {
  std::string name;
  std::string checkpoint;     // model directory
  std::vector<int32_t> ids;
  std::vector<float> logits;  // [ids.size() x vocab]
  int64_t vocab = 0;
};

// tests/golden, or $DI_GOLDEN_DIR where set (test binaries run away from the source tree).
inline std::string golden_dir() {
  const char* env = std::getenv("DI_GOLDEN_DIR");
  return env && *env ? std::string(env) : std::string(DI_GOLDEN_DIR);
}

// The fixture names; none when the folder is missing (missing_test_data() says so).
inline std::vector<std::string> golden_fixture_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(golden_dir() + "/models", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    if (it->is_directory(ec)) names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The repository's demo model, found from the golden folder (binaries may run away from the tree).
inline std::string demo_model_dir() { return golden_dir() + "/../../models/demo"; }

// What is missing of the data the tests read (empty when nothing is): a message saying where it
// was looked for, instead of a crash at the first read.
inline std::string missing_test_data() {
  std::error_code ec;
  std::string missing;
  if (golden_fixture_names().empty())
    missing += "no golden fixtures in " + golden_dir() + "/models; ";
  if (!std::filesystem::is_regular_file(demo_model_dir() + "/config.json", ec))
    missing += "no demo model at " + demo_model_dir() + "; ";
  if (!missing.empty()) missing += "pack tests/golden and models/demo with the binary, or set DI_GOLDEN_DIR to tests/golden";
  return missing;
}

inline GoldenFixture load_golden_fixture(const std::string& name) {
  GoldenFixture f;
  f.name = name;
  const std::string dir = golden_dir() + "/models/" + name;
  f.checkpoint = dir + "/checkpoint";
  std::ifstream ids(dir + "/ids.txt");
  for (int32_t v; ids >> v;) f.ids.push_back(v);
  std::ifstream lg(dir + "/logits.f32", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(lg)), std::istreambuf_iterator<char>());
  f.logits.resize(bytes.size() / sizeof(float));
  std::memcpy(f.logits.data(), bytes.data(), f.logits.size() * sizeof(float));
  f.vocab = f.ids.empty() ? 0 : static_cast<int64_t>(f.logits.size() / f.ids.size());
  return f;
}

struct Deviation {
  double relative = 0;  // ||a - ref|| / ||ref||
  double max_abs = 0;
};

inline Deviation deviation(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0, mx = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double d = static_cast<double>(a[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
    mx = std::max(mx, std::abs(d));
  }
  return {std::sqrt(num / den), mx};
}

}  // namespace deepinfer::testing
