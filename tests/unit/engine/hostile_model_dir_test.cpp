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
  // Makes every value of `tensor` NaN in a copy of its shard (broken weights with a valid config).
  void poison(const std::string& tensor) const {
    const auto index = nlohmann::json::parse(std::ifstream(fs::path(DI_DEMO_MODEL) / "model.safetensors.index.json"));
    const std::string shard = index["weight_map"][tensor];
    std::ifstream in(fs::path(DI_DEMO_MODEL) / shard, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = header_len << 8 | static_cast<unsigned char>(bytes[i]);
    const auto entry = nlohmann::json::parse(bytes.substr(8, header_len))[tensor];
    const std::string nan = entry["dtype"] == "F32" ? std::string("\x00\x00\xc0\x7f", 4) : std::string("\xc0\x7f", 2);
    ASSERT_TRUE(entry["dtype"] == "F32" || entry["dtype"] == "BF16") << entry.dump();
    for (size_t at = 8 + header_len + entry["data_offsets"][0].get<size_t>(); at < 8 + header_len + entry["data_offsets"][1].get<size_t>();
         at += nan.size())
      bytes.replace(at, nan.size(), nan);
    fs::remove(path / shard);
    std::ofstream(path / shard, std::ios::binary) << bytes;
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

TEST(HostileModelDir, NonFiniteLogitsAreAModelError) {
  DemoCopy dir;
  dir.poison("model.norm.weight");
  auto e = dir.open();
  ASSERT_TRUE(e) << e.error().message;
  // Greedy rows take the backend's argmax; sampled rows (and logprobs) the host sampler.
  for (const float temperature : {0.0f, 1.0f}) {
    SamplingParams p;
    p.temperature = temperature;
    p.max_tokens = 2;
    const auto out = testing::generate_alone(*e.value(), {5, 6, 7}, p);
    ASSERT_EQ(out.finished.count(0), 1u);
    const Event& done = out.finished.at(0);
    EXPECT_EQ(done.reason, FinishReason::kError);
    ASSERT_TRUE(done.error.has_value());
    EXPECT_EQ(done.error->code, Code::kModelFormat) << done.error->message;  // was kInternal
    EXPECT_NE(done.error->message.find("the model produced"), std::string::npos) << done.error->message;
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
