// Engines on model directories built to hurt: absurd config values fail at load (they loaded, then
// the first forward aborted the process or produced NaN), and a tokenizer.json that cannot be read
// is an error rather than "no tokenizer".
#include "engine_test_util.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

// The demo model's files as symlinks in a scratch directory, except those a test replaces.
struct DemoCopy {
  fs::path path;
  DemoCopy() {
    char tmpl[] = "/tmp/di_demo_XXXXXX";
    path = mkdtemp(tmpl);
    for (const auto& e : fs::directory_iterator(DI_DEMO_MODEL)) fs::create_symlink(e.path(), path / e.path().filename());
  }
  ~DemoCopy() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void set_config(const std::string& pointer, const nlohmann::json& value) const {
    auto config = nlohmann::json::parse(std::ifstream(fs::path(DI_DEMO_MODEL) / "config.json"));
    config[nlohmann::json::json_pointer(pointer)] = value;
    fs::remove(path / "config.json");
    std::ofstream(path / "config.json") << config.dump();
  }
  Result<std::shared_ptr<Engine>> open() const {
    EngineConfig c = testing::demo_config();
    c.model_path = path.string();
    return Engine::create(c);
  }
};

TEST(HostileModelDir, AbsurdConfigValuesFailAtLoad) {
  const std::tuple<const char*, nlohmann::json, const char*> cases[] = {
      {"/index_topk", 2147483647, "index_topk"},  // loaded; the first forward threw bad_alloc on the step thread
      {"/rope_parameters/main/rope_theta", 0, "rope_theta"},  // loaded; every logit NaN
      {"/routed_scaling_factor", 1e308, "routed_scaling_factor"},
  };
  for (const auto& [pointer, value, key] : cases) {
    DemoCopy dir;
    dir.set_config(pointer, value);
    auto e = dir.open();
    ASSERT_FALSE(e) << key << " = " << value.dump() << " loaded";
    EXPECT_EQ(e.error().code, Code::kModelFormat) << e.error().message;
    EXPECT_NE(e.error().message.find(key), std::string::npos) << e.error().message;
  }
}

TEST(HostileModelDir, AnUnreadableTokenizerIsAnError) {
  DemoCopy dir;
  fs::remove(dir.path / "tokenizer.json");
  fs::create_symlink("tokenizer.json", dir.path / "tokenizer.json");  // a loop
  auto e = dir.open();
  ASSERT_FALSE(e) << "a looping tokenizer.json read as no tokenizer";
  EXPECT_NE(e.error().message.find("symbolic links"), std::string::npos) << e.error().message;
}

}  // namespace
}  // namespace deepinfer
