// config.json values and model files built to hurt: values that size work beyond any shape or
// context, numbers that turn the forward into NaN, integers that wrap, deep values in error messages,
// FIFOs and devices in place of files, overlapping tensor data. Each is a clear error at load.
#include "../small_stack.h"
#include "model/config.h"
#include "model/deepseek_v4.h"
#include "model/safetensors.h"
#include "safetensors_writer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <future>

namespace deepinfer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json base_config() {
  return json{{"model_type", "deepseek_v4"}, {"vocab_size", 100},    {"hidden_size", 32},  {"num_hidden_layers", 4},
              {"num_attention_heads", 2},    {"head_dim", 16},       {"q_lora_rank", 8},   {"o_groups", 2},
              {"o_lora_rank", 8},            {"index_head_dim", 16}, {"n_routed_experts", 4},
              {"num_experts_per_tok", 2},    {"partial_rotary_factor", 0.5}, {"max_position_embeddings", 4096}};
}

Result<ModelConfig> parse_text(const std::string& text) { return ModelConfig::from_json(text, "config.json"); }

// The base config with `key` set to raw JSON text (which may be too deep for nlohmann's dump).
std::string with_raw(const std::string& key, const std::string& raw) {
  json j = base_config();
  j[key] = "@@RAW@@";
  std::string text = j.dump();
  const std::string marker = "\"@@RAW@@\"";
  text.replace(text.find(marker), marker.size(), raw);
  return text;
}

struct Case {
  std::function<void(json&)> edit;
  std::string message;  // part of the error
};

void expect_all_refused(const std::vector<Case>& cases) {
  for (const auto& tc : cases) {
    json j = base_config();
    tc.edit(j);
    auto c = parse_text(j.dump());
    ASSERT_FALSE(c) << "accepted: " << j.dump();
    EXPECT_EQ(c.error().code, Code::kModelFormat) << c.error().message;
    EXPECT_NE(c.error().message.find(tc.message), std::string::npos) << c.error().message;
  }
}

TEST(HostileConfig, ValuesThatSizeWorkAreBoundedByShapesAndContext) {
  expect_all_refused({
      // index_topk 2147483647 loaded, then the first forward threw bad_alloc on the engine thread.
      {[](json& j) { j["index_topk"] = 2147483647; }, "index_topk"},
      {[](json& j) { j["index_topk"] = 4096 / 4 + 1; }, "index_topk"},  // more than the longest context's entries
      {[](json& j) { j["sliding_window"] = 4097; }, "sliding_window"},
      {[](json& j) { j["sliding_window"] = 2147483647; }, "sliding_window"},
      {[](json& j) { j["compress_rates"] = {{"compressed_sparse_attention", 1 << 30}}; }, "compress"},
      {[](json& j) { j["compress_rate_hca"] = 65521; j["compress_rate_csa"] = 65519; j["max_position_embeddings"] = 1 << 24; }, "compress"},
      {[](json& j) { j["index_n_heads"] = 1 << 30; }, "index_n_heads"},
      {[](json& j) { j["index_head_dim"] = 1 << 30; }, "index_head_dim"},
      {[](json& j) { j["q_lora_rank"] = 1 << 30; }, "q_lora_rank"},
      {[](json& j) { j["o_lora_rank"] = 1 << 30; }, "o_lora_rank"},
      {[](json& j) { j["moe_intermediate_size"] = 1 << 30; }, "moe_intermediate_size"},
      {[](json& j) { j["max_position_embeddings"] = 2147483647; }, "max_position_embeddings"},
      {[](json& j) { j["quantization_config"] = {{"weight_block_size", {1 << 30, 128}}}; }, "weight_block_size"},
      // The layer lists are sized by it before the other checks: -4 made a resize throw (fuzz
      // finding), 2^31 - 1 would have listed that many layers.
      {[](json& j) { j["num_hidden_layers"] = -4; j["compress_ratios"] = {4, 128, 0, 4, 0}; }, "num_hidden_layers"},
      {[](json& j) { j["num_hidden_layers"] = 2147483647; }, "num_hidden_layers"},
      {[](json& j) { j["num_hidden_layers"] = 0; }, "num_hidden_layers"},
  });
  // The values of real models stay valid.
  json j = base_config();
  j["max_position_embeddings"] = 1048576;
  j["index_topk"] = 1024;
  j["sliding_window"] = 128;
  auto c = parse_text(j.dump());
  ASSERT_TRUE(c) << c.error().message;
}

TEST(HostileConfig, NumbersThatMakeTheForwardNanAreRefused) {
  expect_all_refused({
      {[](json& j) { j["rope_theta"] = 0; }, "rope_theta"},
      {[](json& j) { j["rope_theta"] = -10000; }, "rope_theta"},
      {[](json& j) { j["compress_rope_theta"] = 1; }, "rope_theta"},
      {[](json& j) { j["routed_scaling_factor"] = 1e308; }, "routed_scaling_factor"},
      {[](json& j) { j["swiglu_limit"] = 1e308; }, "swiglu_limit"},
      {[](json& j) { j["rms_norm_eps"] = 1e308; }, "rms_norm_eps"},
      {[](json& j) { j["hc_eps"] = 1e308; }, "hc_eps"},
      {[](json& j) { j["partial_rotary_factor"] = 1e308; }, "partial_rotary_factor"},
      {[](json& j) { j["rope_parameters"] = {{"main", {{"rope_theta", 0}}}, {"compress", {{"rope_theta", 160000}}}}; }, "rope_theta"},
      {[](json& j) { j["rope_scaling"] = {{"type", "yarn"}, {"factor", 1e308}, {"original_max_position_embeddings", 1024}}; }, "factor"},
      {[](json& j) { j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4}, {"beta_fast", -1}}; }, "beta"},
      // A denormal beta made the ramp's bounds infinite and every frequency NaN (fuzz finding).
      {[](json& j) { j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4}, {"beta_fast", 1e-310}}; }, "non-finite frequencies"},
      {[](json& j) { j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4}, {"attention_factor", 1e30}}; }, "attention_factor"},
  });
  // JSON numbers too large for a double parse as infinity.
  for (const char* key : {"rope_theta", "routed_scaling_factor", "rms_norm_eps"}) {
    auto c = parse_text(with_raw(key, "1e999"));
    ASSERT_FALSE(c) << key;
    EXPECT_EQ(c.error().code, Code::kModelFormat) << c.error().message;
  }
}

TEST(HostileConfig, IntegersThatWouldWrapAreRefused) {
  expect_all_refused({
      // 2^40 became id 0 (a valid id) through get<int>().
      {[](json& j) { j["eos_token_id"] = int64_t{1} << 40; }, "eos_token_id"},
      {[](json& j) { j["eos_token_id"] = {1, int64_t{1} << 40}; }, "eos_token_id"},
      {[](json& j) { j["compress_ratios"] = {4, (int64_t{1} << 32) + 4, 0, 0}; }, "compress_ratios"},
      {[](json& j) { j["quantization_config"] = {{"weight_block_size", {(int64_t{1} << 32) + 128, 128}}}; }, "weight_block_size"},
      {[](json& j) { j["qk_rope_head_dim"] = int64_t{1} << 40; j.erase("partial_rotary_factor"); }, "qk_rope_head_dim"},
  });
}

TEST(HostileConfig, DeepValuesInErrorMessagesAreCutOnASmallStack) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  testing::run_on_small_stack([&] {
    for (const char* key : {"hidden_size", "rope_theta", "compress_ratios", "mlp_layer_types", "eos_token_id"}) {
      auto c = parse_text(with_raw(key, deep));
      ASSERT_FALSE(c) << key;
      EXPECT_EQ(c.error().code, Code::kModelFormat) << c.error().message;
      EXPECT_LT(c.error().message.size(), 400u) << c.error().message;
    }
    // A deep value under a key nobody reads loads: parsing and freeing it use no recursion.
    auto c = parse_text(with_raw("some_extension", deep));
    EXPECT_TRUE(c) << c.error().message;
  });
}

// A scratch directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/di_model_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Runs `load`, which must return without blocking on the FIFO at `fifo`.
template <class F>
auto without_blocking(const fs::path& fifo, F load) {
  auto pending = std::async(std::launch::async, load);
  if (pending.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "opening the FIFO " << fifo << " blocks";
    close(open(fifo.c_str(), O_WRONLY));  // let the reader go
  }
  return pending.get();
}

TEST(HostileModelFiles, SpecialFilesAsConfigJsonAreRefused) {
  TempDir dir;
  const fs::path config = dir.path / "config.json";
  ASSERT_EQ(mkfifo(config.c_str(), 0600), 0);
  auto c = without_blocking(config, [&] { return DeepseekV4::read_config(dir.path.string()); });
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, Code::kIo) << c.error().message;
  EXPECT_NE(c.error().message.find("FIFO"), std::string::npos) << c.error().message;

  fs::remove(config);
  fs::create_symlink("/dev/zero", config);
  c = ModelConfig::from_file(config.string());
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("character device"), std::string::npos) << c.error().message;

  fs::remove(config);
  std::ofstream(config).put('{');
  fs::resize_file(config, (64ull << 20) + 1);  // sparse
  c = ModelConfig::from_file(config.string());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, Code::kModelFormat) << c.error().message;
  EXPECT_NE(c.error().message.find("MiB"), std::string::npos) << c.error().message;
}

TEST(HostileModelFiles, FifoShardsAndIndexesAreRefused) {
  TempDir dir;
  const fs::path shard = dir.path / "model.safetensors";
  ASSERT_EQ(mkfifo(shard.c_str(), 0600), 0);
  auto ck = without_blocking(shard, [&] { return Checkpoint::open_dir(dir.path.string()); });
  ASSERT_FALSE(ck);
  EXPECT_NE(ck.error().message.find("not a regular file"), std::string::npos) << ck.error().message;

  const fs::path index = dir.path / "model.safetensors.index.json";
  ASSERT_EQ(mkfifo(index.c_str(), 0600), 0);
  ck = without_blocking(index, [&] { return Checkpoint::open_dir(dir.path.string()); });
  ASSERT_FALSE(ck);
  EXPECT_NE(ck.error().message.find("FIFO"), std::string::npos) << ck.error().message;
}

TEST(HostileModelFiles, OverlappingTensorDataIsRefused) {
  TempDir dir;
  const std::string path = (dir.path / "model.safetensors").string();
  auto with_offsets = [&](std::pair<int, int> a, std::pair<int, int> b) {
    json header = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {a.first, a.second}}}},
                   {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {b.first, b.second}}}}};
    const std::string h = header.dump();
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
    testing::write_file(path, bytes + h + std::string(16, '\0'));
    return SafetensorsFile::open(path);
  };
  for (const auto& [a, b] : std::vector<std::pair<std::pair<int, int>, std::pair<int, int>>>{
           {{0, 8}, {4, 12}}, {{0, 8}, {0, 8}}, {{8, 16}, {4, 12}}}) {
    auto f = with_offsets(a, b);
    ASSERT_FALSE(f) << "overlapping [" << a.first << ", " << a.second << ") and [" << b.first << ", " << b.second << ")";
    EXPECT_EQ(f.error().code, Code::kModelFormat);
    EXPECT_NE(f.error().message.find("overlap"), std::string::npos) << f.error().message;
  }
  auto f = with_offsets({0, 8}, {8, 16});
  EXPECT_TRUE(f) << f.error().message;
}

}  // namespace
}  // namespace deepinfer
