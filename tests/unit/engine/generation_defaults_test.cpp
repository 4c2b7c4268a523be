// generation_config.json: defaults that no request could use are a load error naming the key (they
// were accepted, and every default generation then failed blaming the caller); ids that do not fit
// an int32 are refused instead of wrapping.
#include "engine/generation_defaults.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/di_gen_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& text) const { std::ofstream(path / "generation_config.json") << text; }
};

TEST(GenerationDefaults, ValidFileAndNoFile) {
  TempDir dir;
  auto none = load_generation_defaults(dir.path.string());
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none.value().eos_ids.empty());
  dir.write(R"({"temperature": 0.8, "top_p": 0.95, "top_k": 0, "max_new_tokens": 128, "eos_token_id": [1, 7],
               "repetition_penalty": 1.1, "do_sample": true})");
  auto d = load_generation_defaults(dir.path.string());
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_FLOAT_EQ(d.value().params.temperature, 0.8f);
  EXPECT_FLOAT_EQ(d.value().params.top_p, 0.95f);
  EXPECT_EQ(d.value().params.max_tokens, 128);
  EXPECT_EQ(d.value().eos_ids, (std::vector<int32_t>{1, 7}));
  dir.write(R"({"temperature": 0.8, "do_sample": false})");
  EXPECT_EQ(load_generation_defaults(dir.path.string()).value().params.temperature, 0.0f);
}

TEST(GenerationDefaults, ValuesNoRequestCouldUseAreRefusedAtLoad) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"temperature": -5})", "temperature"},
      {R"({"temperature": 1e300})", "temperature"},
      {R"({"top_p": 5})", "top_p"},
      {R"({"top_p": 0})", "top_p"},
      {R"({"repetition_penalty": 0})", "repetition_penalty"},
      {R"({"max_new_tokens": 0})", "max_new_tokens"},
      {R"({"max_new_tokens": 1e12})", "max_new_tokens"},
      {R"({"max_new_tokens": 2.5})", "max_new_tokens"},
      {R"({"top_k": 4294967296})", "top_k"},
      {R"({"eos_token_id": 1099511627776})", "eos_token_id"},  // 2^40 became id 0
      {R"({"eos_token_id": [1, 1099511627776]})", "eos_token_id"},
      {R"({"eos_token_id": -1})", "eos_token_id"},
      {R"({"eos_token_id": ["</s>"]})", "eos_token_id"},
  };
  TempDir dir;
  for (const auto& [text, key] : cases) {
    dir.write(text);
    auto d = load_generation_defaults(dir.path.string());
    ASSERT_FALSE(d) << "accepted " << text;
    EXPECT_EQ(d.error().code, Code::kModelFormat) << d.error().message;
    EXPECT_NE(d.error().message.find(key), std::string::npos) << d.error().message;
  }
}

TEST(GenerationDefaults, SpecialFilesAreRefusedWithoutBlocking) {
  TempDir dir;
  const fs::path fifo = dir.path / "generation_config.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto pending = std::async(std::launch::async, [&] { return load_generation_defaults(dir.path.string()); });
  if (pending.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "opening a FIFO generation_config.json blocks";
    close(open(fifo.c_str(), O_WRONLY));
  }
  auto d = pending.get();
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("FIFO"), std::string::npos) << d.error().message;
}

}  // namespace
}  // namespace deepinfer
