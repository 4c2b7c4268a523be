// tokenizer.json files built to hurt: absurd ids, deep or long Sequences, huge or special files,
// huge whitespace runs. Each must fail with a clear error (or work), never crash, hang or balloon.
#include "../small_stack.h"
#include "golden_util.h"
#include "text/regex.h"
#include "text/tokenizer_limits.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <future>

namespace deepinfer::text {
namespace {

namespace fs = std::filesystem;
using deepinfer::testing::run_on_small_stack;
using testing::deepseek;
using testing::golden_path;

nlohmann::json small_spec() { return nlohmann::json::parse(std::ifstream(golden_path("small_tokenizer.json"))); }

// small_tokenizer.json with `key` replaced by raw JSON text (which may be nested far too deep for
// nlohmann's recursive dump, so it is spliced in as text).
std::string with_raw(const std::string& key, const std::string& raw) {
  nlohmann::json j = small_spec();
  j[key] = "@@RAW@@";
  std::string text = j.dump();
  const std::string marker = "\"@@RAW@@\"";
  text.replace(text.find(marker), marker.size(), raw);
  return text;
}

std::string repeat(std::string_view s, std::size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

// `depth` Sequences of the given kind around `inner`.
std::string nested(std::string_view type_list_key, std::size_t depth, std::string_view inner) {
  const std::string open = "{\"type\":\"Sequence\",\"" + std::string(type_list_key) + "\":[";
  return repeat(open, depth) + std::string(inner) + repeat("]}", depth);
}

constexpr std::string_view kByteLevel = R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":false})";
constexpr std::string_view kDigits = R"({"type":"Digits","individual_digits":false})";

void expect_error(const Result<Tokenizer>& r, Code code, std::string_view needle) {
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, code) << r.error().message;
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  EXPECT_LT(r.error().message.size(), 600u) << "an error message must not dump the file";
}

TEST(TextHostile, VocabularyIdsNearInt32MaxAreRefused) {
  for (const int64_t id : {int64_t{INT32_MAX}, int64_t{INT32_MAX} - 1}) {
    nlohmann::json j = small_spec();
    j["model"]["vocab"]["zz"] = id;
    expect_error(Tokenizer::from_json(j.dump()), Code::kModelFormat, std::to_string(id));
  }
}

TEST(TextHostile, SparseVocabularyIdsAreBoundedByTheFile) {
  // 274 tokens cannot use ids in the millions: the id table would cost gigabytes.
  for (const int64_t id : {int64_t{1} << 20, int64_t{1} << 26}) {
    nlohmann::json j = small_spec();
    j["model"]["vocab"]["zz"] = id;
    expect_error(Tokenizer::from_json(j.dump()), Code::kModelFormat, std::to_string(id));
  }
  // A modest gap stays valid (vocabularies padded to a multiple of 64 or 128 exist).
  nlohmann::json j = small_spec();
  j["model"]["vocab"]["zz"] = 4000;
  auto tok = Tokenizer::from_json(j.dump());
  ASSERT_TRUE(tok) << tok.error().message;
  EXPECT_EQ(tok.value().vocab_size(), 4001);
  EXPECT_EQ(tok.value().token_to_id("zz"), 4000);
}

TEST(TextHostile, SequencesAtTheDepthLimitWorkOnASmallStack) {
  const std::size_t depth = kMaxSequenceDepth;
  nlohmann::json j = small_spec();
  j["normalizer"] = "@N@";
  j["pre_tokenizer"] = "@P@";
  j["decoder"] = "@D@";
  std::string text = j.dump();
  auto splice = [&](const std::string& marker, const std::string& raw) {
    text.replace(text.find("\"" + marker + "\""), marker.size() + 2, raw);
  };
  splice("@N@", nested("normalizers", depth, R"({"type":"NFC"})"));
  // The deepest Sequence holds the most steps allowed: Digits steps, then ByteLevel.
  std::string steps = repeat(std::string(kDigits) + ",", kMaxPreTokenizerSteps - 1);
  splice("@P@", nested("pretokenizers", depth, steps + std::string(kByteLevel)));
  splice("@D@", nested("decoders", depth, R"({"type":"ByteLevel"})"));
  run_on_small_stack([&] {
    auto tok = Tokenizer::from_json(text);
    ASSERT_TRUE(tok) << tok.error().message;
    auto ids = tok.value().encode("ab 12 cd");
    ASSERT_TRUE(ids) << ids.error().message;
    EXPECT_EQ(tok.value().decode(ids.value()).value(), "ab 12 cd");
  });
}

TEST(TextHostile, SequencesNestedTooDeepAreRefused) {
  const std::size_t over = kMaxSequenceDepth + 1;
  for (const std::size_t depth : {over, std::size_t{100000}}) {
    run_on_small_stack([&] {
      expect_error(Tokenizer::from_json(with_raw("normalizer", nested("normalizers", depth, R"({"type":"NFC"})"))),
                   Code::kModelFormat, "nested");
      expect_error(Tokenizer::from_json(with_raw("pre_tokenizer", nested("pretokenizers", depth, kByteLevel))),
                   Code::kModelFormat, "nested");
      expect_error(Tokenizer::from_json(with_raw("decoder", nested("decoders", depth, R"({"type":"ByteLevel"})"))),
                   Code::kModelFormat, "nested");
    });
  }
}

TEST(TextHostile, TooManyStepsAreRefused) {
  // 300k pre-tokenizer steps once overflowed the stack at the first encode (a frame per step);
  // 300k NFC passes made every encode 300k passes over the text.
  for (const std::size_t n : {std::size_t{kMaxPreTokenizerSteps}, std::size_t{300000}}) {
    const std::string steps = repeat(std::string(kDigits) + ",", n) + std::string(kByteLevel);
    run_on_small_stack([&] {
      auto tok = Tokenizer::from_json(with_raw("pre_tokenizer", nested("pretokenizers", 1, steps)));
      expect_error(tok, Code::kModelFormat, "steps");
      if (tok) (void)tok.value().encode("1 2 3");
    });
  }
  const std::string forms = repeat(R"({"type":"NFC"},)", 300000) + R"({"type":"NFC"})";
  expect_error(Tokenizer::from_json(with_raw("normalizer", nested("normalizers", 1, forms))), Code::kModelFormat, "steps");
}

TEST(TextHostile, DeepValuesInErrorMessagesAreCut) {
  const std::string deep = repeat("[", 100000) + repeat("]", 100000);
  run_on_small_stack([&] {
    expect_error(Tokenizer::from_json(with_raw("version", deep)), Code::kUnsupported, "[[[");
  });
  nlohmann::json j = small_spec();
  j["version"] = std::string(1 << 20, 'v');
  expect_error(Tokenizer::from_json(j.dump()), Code::kUnsupported, "vvv");
}

// The split patterns of the DeepSeek tokenizer, in its order.
std::vector<std::string> deepseek_split_patterns() {
  std::vector<std::string> out;
  const auto spec = nlohmann::json::parse(std::ifstream(golden_path("tokenizer.json")));
  for (const auto& step : spec["pre_tokenizer"]["pretokenizers"]) {
    if (step["type"] == "Split") out.push_back(step["pattern"]["Regex"].get<std::string>());
  }
  return out;
}

TEST(TextHostile, AHugeWhitespaceRunSplits) {
  // ~10 MB of spaces once exceeded PCRE2's match limit: DI_ERR_INTERNAL for valid text. (The regex
  // alone is tested: BPE over one 10 MB piece takes seconds.)
  const auto patterns = deepseek_split_patterns();
  ASSERT_EQ(patterns.size(), 3u);
  for (const std::string_view unit : {" ", " \n"}) {
    const std::string text = "a" + repeat(unit, (10u << 20) / unit.size()) + "b";
    auto re = Regex::compile(patterns[2]);
    ASSERT_TRUE(re) << re.error().message;
    std::size_t covered = 0, matches = 0;
    auto r = re.value().for_each_match(text, [&](std::size_t s, std::size_t e) -> Result<void> {
      EXPECT_GE(s, covered);
      covered = e;
      ++matches;
      return ok();
    });
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(covered, text.size());
    EXPECT_GE(matches, 3u);
  }
  // The whole tokenizer on a run of a few megabytes.
  const std::string text = "x" + repeat(" ", 1u << 20) + "y\n";
  auto ids = deepseek().encode(text);
  ASSERT_TRUE(ids) << ids.error().message;
  EXPECT_TRUE(deepseek().decode(ids.value()).value() == text);
}

TEST(TextHostile, APatternOutOfBudgetIsACapacityError) {
  auto re = Regex::compile("(a|a)+$");  // exponential backtracking on a run of a's that does not end the line
  ASSERT_TRUE(re);
  auto r = re.value().for_each_match(repeat("a", 40) + "b", [](std::size_t, std::size_t) -> Result<void> { return ok(); });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kCapacity) << r.error().message;
}

// A scratch directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/di_tok_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TEST(TextHostile, SpecialFilesAreRefusedWithoutBlocking) {
  TempDir dir;
  const fs::path fifo = dir.path / "tokenizer.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto pending = std::async(std::launch::async, [&] { return Tokenizer::from_file(dir.path); });
  if (pending.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "opening a FIFO tokenizer.json blocks";
    close(open(fifo.c_str(), O_WRONLY));  // let the reader go
  }
  expect_error(pending.get(), Code::kIo, "FIFO");

  fs::remove(fifo);
  fs::create_symlink("/dev/zero", fifo);
  expect_error(Tokenizer::from_file(fifo), Code::kIo, "character device");

  fs::remove(fifo);
  fs::create_symlink("tokenizer.json", fifo);  // a loop
  auto looped = Tokenizer::from_file(fifo);
  ASSERT_FALSE(looped);
  EXPECT_EQ(looped.error().code, Code::kIo) << looped.error().message;
  EXPECT_NE(looped.error().message.find("symbolic links"), std::string::npos) << looped.error().message;
  auto in_dir = Tokenizer::from_model_dir(dir.path);
  ASSERT_FALSE(in_dir) << "a looping tokenizer.json is not \"no tokenizer\"";
  EXPECT_NE(in_dir.error().message.find("symbolic links"), std::string::npos) << in_dir.error().message;

  fs::remove(fifo);
  auto none = Tokenizer::from_model_dir(dir.path);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none.value().has_value());
}

TEST(TextHostile, OversizedFilesAreRefusedBeforeReading) {
  TempDir dir;
  const fs::path big = dir.path / "tokenizer.json";
  {
    std::ofstream(big).put('{');
  }
  fs::resize_file(big, kMaxTokenizerFileBytes + 1);  // sparse: no disk, no read
  expect_error(Tokenizer::from_file(big), Code::kModelFormat, "MiB");
}

}  // namespace
}  // namespace deepinfer::text
