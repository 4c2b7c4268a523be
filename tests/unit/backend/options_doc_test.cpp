// docs/options.md lists the backend options as the one table of backend_options.h defines them: the
// rows between its markers are what backend_option_infos() gives, in order.
#include "backend/backend_options.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace deepinfer {
namespace {

constexpr const char* kBegin = "<!-- backend options: begin -->";
constexpr const char* kEnd = "<!-- backend options: end -->";

// The docs' table as the option table makes it.
std::string options_table() {
  std::string t = "| option | type | default | what it does |\n|---|---|---|---|\n";
  for (const OptionInfo& o : backend_option_infos())
    t += "| `" + std::string(o.key) + "` | " + std::string(o.type) + " | " + std::string(o.default_value) + " | " + std::string(o.help) + " |\n";
  return t;
}

TEST(BackendOptionsDoc, ListsEveryOptionOfTheTable) {
  const std::string path = std::string(DI_GOLDEN_DIR) + "/../../docs/options.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const size_t b = doc.find(kBegin), e = doc.find(kEnd);
  ASSERT_NE(b, std::string::npos) << path << " lacks " << kBegin;
  ASSERT_NE(e, std::string::npos) << path << " lacks " << kEnd;
  ASSERT_LT(b, e);
  const size_t first = doc.find('\n', b) + 1;
  EXPECT_EQ(doc.substr(first, e - first), options_table()) << "docs/options.md is out of date; its table should read:\n"
                                                           << options_table();
}

// Every row names a key the parser takes, with its listed default.
TEST(BackendOptionsDoc, EveryRowParsesWithItsDefault) {
  for (const OptionInfo& o : backend_option_infos()) {
    BackendOptions opts;
    EXPECT_TRUE(set_backend_option(opts, o.key, o.default_value)) << o.key;
  }
  BackendOptions opts;
  auto r = set_backend_option(opts, "no_such_option", "1");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kNotFound);
}

}  // namespace
}  // namespace deepinfer
