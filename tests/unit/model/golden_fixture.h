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

inline std::vector<std::string> golden_fixture_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(golden_dir() + "/models"))
    if (e.is_directory()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
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
