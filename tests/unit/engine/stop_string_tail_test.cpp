// A stop string completed by a token that ends in the middle of a UTF-8 character: nothing after
// the stop reaches the output (the detokenizer's held-back bytes were flushed at the finish as
// U+FFFD, past the stop matcher).
#include "engine_test_util.h"

namespace deepinfer {
namespace {

TEST(StopStringTail, NothingLeaksAfterAStopInsideAToken) {
  auto engine = testing::open_engine(testing::demo_config());
  ASSERT_TRUE(engine);
  auto tok = engine->tokenizer();
  ASSERT_TRUE(tok);
  const auto id = tok.value()->token_to_id("\xc4\xa0\xc3\xa2");  // " \xe2": a space, then a lead byte
  ASSERT_TRUE(id.has_value());
  ASSERT_EQ(tok.value()->token_bytes(*id), " \xe2");
  for (const bool include : {false, true}) {
    SamplingParams p;
    p.allowed_token_ids = {*id};
    p.stop = {" "};
    p.include_stop_str_in_output = include;
    p.max_tokens = 4;
    auto s = engine->create_session();
    ASSERT_TRUE(s);
    ASSERT_TRUE(s.value()->add_tokens(std::vector<int32_t>{5, 6, 7}));
    ASSERT_TRUE(s.value()->generate(p));
    std::string text;
    std::optional<FinishReason> reason;
    for (;;) {
      auto e = s.value()->poll(30000);
      if (!e || !e.value()) break;
      text += e.value()->text;
      if (e.value()->kind == Event::Kind::kFinished) reason = e.value()->reason;
    }
    EXPECT_EQ(reason, FinishReason::kStop);
    EXPECT_EQ(text, include ? " " : "") << "include_stop_str_in_output=" << include;
  }
}

}  // namespace
}  // namespace deepinfer
