#include "util/result.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return make_error(Code::kInvalidArgument, "{} is not positive", v);
  return v;
}

Result<int> doubled(int v) {
  DI_TRY(x, parse_positive(v));
  return 2 * x;
}

TEST(Result, PropagatesErrorsWithCodeAndMessage) {
  auto good = doubled(21);
  ASSERT_TRUE(good);
  EXPECT_EQ(good.value(), 42);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Code::kInvalidArgument);
  EXPECT_EQ(bad.error().message, "-1 is not positive");
  EXPECT_STREQ(code_name(Code::kBufferTooSmall), "buffer too small");
}

}  // namespace
}  // namespace deepinfer
