// Bad checkpoints get a clear error naming the file and tensor, never a crash: truncated or corrupt
// files, oversized headers, missing / extra / misshapen / mistyped tensors, broken shard indexes.
#include "backend/backend.h"
#include "golden_fixture.h"
#include "model/deepseek_v4.h"
#include "model/safetensors.h"
#include "safetensors_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

namespace deepinfer {
namespace {

namespace fs = std::filesystem;
using testing::RawTensor;

// A scratch copy of a fixture checkpoint whose tensors a test edits.
class CheckpointErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = std::string(DI_GOLDEN_DIR) + "/models/hc4_fp8_mxfp4_native/checkpoint";
    dir_ = fs::temp_directory_path() / ("di_ckpt_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(src_ + "/config.json", dir_ / "config.json");
    auto file = SafetensorsFile::open(src_ + "/model.safetensors");
    ASSERT_TRUE(file) << file.error().message;
    for (const auto& t : file.value()->tensors())
      tensors_.push_back({t.name, dtype_name(t.dtype), t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
  }
  void TearDown() override { fs::remove_all(dir_); }

  RawTensor& tensor(const std::string& name) {
    for (auto& t : tensors_)
      if (t.name == name) return t;
    ADD_FAILURE() << "no tensor " << name;
    return tensors_[0];
  }
  void write() { testing::write_file((dir_ / "model.safetensors").string(), testing::safetensors_bytes(tensors_)); }

  // Loads the scratch checkpoint and expects an error with `code` whose message contains each of `parts`.
  void expect_error(Code code, std::initializer_list<std::string> parts) {
    auto backend = make_cpu_backend(1).value();
    auto model = DeepseekV4::load(dir_.string(), *backend);
    ASSERT_FALSE(model) << "loaded a broken checkpoint";
    EXPECT_EQ(model.error().code, code) << model.error().message;
    for (const auto& p : parts) EXPECT_NE(model.error().message.find(p), std::string::npos) << model.error().message;
  }

  std::string src_;
  fs::path dir_;
  std::vector<RawTensor> tensors_;
};

TEST_F(CheckpointErrors, UnmodifiedCopyLoads) {
  write();
  auto backend = make_cpu_backend(1).value();
  auto model = DeepseekV4::load(dir_.string(), *backend);
  EXPECT_TRUE(model) << model.error().message;
}

TEST_F(CheckpointErrors, MissingTensor) {
  tensors_.erase(std::remove_if(tensors_.begin(), tensors_.end(), [](const RawTensor& t) { return t.name == "layers.1.attn.wkv.weight"; }),
                 tensors_.end());
  write();
  expect_error(Code::kModelFormat, {"missing tensor \"layers.1.attn.wkv.weight\""});
}

TEST_F(CheckpointErrors, ExtraTensor) {
  tensors_.push_back({"layers.9.attn.wq_a.weight", "F32", {2}, std::vector<uint8_t>(8)});
  write();
  expect_error(Code::kModelFormat, {"unexpected tensor \"layers.9.attn.wq_a.weight\"", "model.safetensors"});
}

TEST_F(CheckpointErrors, MtpTensorsAreIgnored) {
  tensors_.push_back({"mtp.0.attn.wq_a.weight", "F32", {2}, std::vector<uint8_t>(8)});
  write();
  auto backend = make_cpu_backend(1).value();
  EXPECT_TRUE(DeepseekV4::load(dir_.string(), *backend));
}

TEST_F(CheckpointErrors, WrongShape) {
  RawTensor& t = tensor("layers.0.attn_norm.weight");
  t.shape = {32};
  t.bytes.resize(64);
  write();
  expect_error(Code::kModelFormat, {"layers.0.attn_norm.weight", "[32]", "[1, 64] was expected"});
}

TEST_F(CheckpointErrors, WrongDtype) {
  RawTensor& t = tensor("layers.0.attn_norm.weight");  // BF16 [64] -> I16-sized I32 [32]
  t.dtype = "I32";
  t.shape = {32};
  write();
  expect_error(Code::kModelFormat, {"layers.0.attn_norm.weight", "dtype I32"});
}

TEST_F(CheckpointErrors, Fp8WithoutScale) {
  tensors_.erase(std::remove_if(tensors_.begin(), tensors_.end(), [](const RawTensor& t) { return t.name == "layers.0.attn.wq_a.scale"; }),
                 tensors_.end());
  write();
  expect_error(Code::kModelFormat, {"fp8 tensor \"layers.0.attn.wq_a.weight\"", "no .scale"});
}

TEST_F(CheckpointErrors, TidToExpertOutOfRange) {
  RawTensor& t = tensor("layers.0.ffn.gate.tid2eid");
  t.bytes[0] = 99;
  write();
  expect_error(Code::kModelFormat, {"tid2eid", "expert 99"});
}

TEST_F(CheckpointErrors, TruncatedFile) {
  std::string bytes = testing::safetensors_bytes(tensors_);
  testing::write_file((dir_ / "model.safetensors").string(), bytes.substr(0, bytes.size() - 100));
  expect_error(Code::kModelFormat, {"model.safetensors", "truncated"});
}

TEST_F(CheckpointErrors, TruncatedInsideHeader) {
  std::string bytes = testing::safetensors_bytes(tensors_);
  testing::write_file((dir_ / "model.safetensors").string(), bytes.substr(0, 200));
  expect_error(Code::kModelFormat, {"model.safetensors", "runs past the end"});
}

TEST_F(CheckpointErrors, ShorterThanTheLengthPrefix) {
  testing::write_file((dir_ / "model.safetensors").string(), "abc");
  expect_error(Code::kModelFormat, {"too short"});
}

TEST_F(CheckpointErrors, HeaderTooLarge) {
  std::string bytes(16, '\0');
  uint64_t n = 200ull << 20;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  testing::write_file((dir_ / "model.safetensors").string(), bytes);
  expect_error(Code::kModelFormat, {"exceeds the", "limit"});
}

TEST_F(CheckpointErrors, CorruptHeaderJson) {
  std::string bytes = testing::safetensors_bytes(tensors_);
  bytes[9] = '}';
  testing::write_file((dir_ / "model.safetensors").string(), bytes);
  expect_error(Code::kModelFormat, {"not a JSON object"});
}

TEST_F(CheckpointErrors, ByteCountDisagreesWithShape) {
  RawTensor& t = tensor("norm.weight");
  t.shape = {65};
  write();
  expect_error(Code::kModelFormat, {"norm.weight", "bytes stored for 65 elements"});
}

TEST_F(CheckpointErrors, UnknownDtype) {
  tensor("norm.weight").dtype = "F4_WEIRD";
  write();
  expect_error(Code::kUnsupported, {"norm.weight", "F4_WEIRD"});
}

TEST_F(CheckpointErrors, IndexNamesAMissingShard) {
  write();
  testing::write_file((dir_ / "model.safetensors.index.json").string(),
                      R"({"weight_map": {"norm.weight": "model-00002-of-00002.safetensors"}})");
  expect_error(Code::kNotFound, {"model-00002-of-00002.safetensors"});
}

TEST_F(CheckpointErrors, IndexPointsAtTheWrongShard) {
  write();
  testing::write_file((dir_ / "other.safetensors").string(), testing::safetensors_bytes({{"x", "F32", {1}, std::vector<uint8_t>(4)}}));
  testing::write_file((dir_ / "model.safetensors.index.json").string(),
                      R"({"weight_map": {"norm.weight": "other.safetensors", "x": "model.safetensors"}})");
  expect_error(Code::kModelFormat, {"index lists tensor"});
}

TEST_F(CheckpointErrors, NoWeightsAndNoConfig) {
  expect_error(Code::kNotFound, {"no *.safetensors"});
  fs::remove(dir_ / "config.json");
  expect_error(Code::kNotFound, {"config.json"});
  auto backend = make_cpu_backend(1).value();
  auto model = DeepseekV4::load((dir_ / "does-not-exist").string(), *backend);
  ASSERT_FALSE(model);
  EXPECT_EQ(model.error().code, Code::kNotFound);
}

TEST_F(CheckpointErrors, BadConfigValue) {
  write();
  testing::write_file((dir_ / "config.json").string(), R"({"model_type": "deepseek_v4", "hidden_size": 0})");
  expect_error(Code::kModelFormat, {"config.json", "\"hidden_size\" = 0"});
}

}  // namespace
}  // namespace deepinfer
