// The fixture of the C ABI's behaviour suites (abi_test.cpp, abi_sessions_test.cpp): one engine on
// the demo model for the Demo suite, and the helpers both files use.
#pragma once

#include "abi_helpers.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace abitest {

inline constexpr const char* kPrompt = "Once upon a time, there was a little girl named Lily. She";
inline const std::vector<std::string> kOtherPrompts = {
    "The dog ran", "One day, Tom and his mom went to the park. They saw a big", "Ben had a red ball.", "Mia",
};

class Demo : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = open_engine(DI_DEMO_MODEL_DIR).release(); }
  static void TearDownTestSuite() {
    di_engine_free(engine_);
    engine_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(engine_, nullptr); }

  static di_engine* engine() { return engine_; }
  static std::vector<int32_t> prompt(std::string_view text = kPrompt) { return tokenize(engine_, text); }
  static int32_t eos() {
    int32_t ids[4];
    size_t n = 0;
    EXPECT_DI_OK(di_engine_eos_tokens(engine_, ids, 4, &n));
    return n ? ids[0] : -1;
  }

  static inline di_engine* engine_ = nullptr;
};

inline Sampling greedy(int32_t max_tokens) {
  Sampling sp = make_sampling();
  EXPECT_DI_OK(di_sampling_set_temperature(sp.get(), 0.0f));
  EXPECT_DI_OK(di_sampling_set_max_tokens(sp.get(), max_tokens));
  return sp;
}

inline void expect_same(const Completion& a, const Completion& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.text, b.text) << what;
  EXPECT_EQ(a.reason, b.reason) << what;
}

// The demo model's state blocks: tokens per block, and state_memory for a pool of `blocks` blocks.
struct BlockSize {
  int64_t tokens = 0;
  double bytes = 0;
  uint64_t memory_for(int blocks) const { return static_cast<uint64_t>(bytes * (blocks + 0.5)); }
};

inline BlockSize demo_block_size() {
  BlockSize b;
  EngineOptions o;
  o.state_memory = 1;  // rounds up to one block
  Engine one = open_engine(DI_DEMO_MODEL_DIR, o);
  EXPECT_DI_OK(di_engine_capacity_tokens(one.get(), &b.tokens));
  one.reset();
  o.state_memory = uint64_t{64} << 20;
  Engine many = open_engine(DI_DEMO_MODEL_DIR, o);
  int64_t cap = 0;
  EXPECT_DI_OK(di_engine_capacity_tokens(many.get(), &cap));
  if (b.tokens > 0 && cap >= b.tokens) b.bytes = static_cast<double>(o.state_memory) / static_cast<double>(cap / b.tokens);
  return b;
}

// A token's logprobs: finite, at most 0, the top list sorted, distinct and inside the vocabulary,
// the token's own value where it is in the list.
inline void expect_valid(const TokenLogprobs& lp, int32_t token, size_t top_n, int32_t vocab, const std::string& where) {
  EXPECT_TRUE(std::isfinite(lp.logprob)) << where;
  EXPECT_LE(lp.logprob, 0.0f) << where;
  ASSERT_EQ(lp.top_ids.size(), top_n) << where;
  ASSERT_EQ(lp.top_logprobs.size(), top_n) << where;
  double mass = 0;
  for (size_t k = 0; k < top_n; ++k) {
    EXPECT_LE(lp.top_logprobs[k], 0.0f) << where;
    EXPECT_GE(lp.top_ids[k], 0) << where;
    EXPECT_LT(lp.top_ids[k], vocab) << where;
    if (k) {
      EXPECT_GE(lp.top_logprobs[k - 1], lp.top_logprobs[k]) << where << ": top not sorted";
    }
    mass += std::exp(static_cast<double>(lp.top_logprobs[k]));
  }
  EXPECT_LE(mass, 1.0 + 1e-4) << where;
  EXPECT_EQ(std::set<int32_t>(lp.top_ids.begin(), lp.top_ids.end()).size(), top_n) << where;
  auto it = std::find(lp.top_ids.begin(), lp.top_ids.end(), token);
  if (it != lp.top_ids.end()) {
    EXPECT_EQ(lp.top_logprobs[it - lp.top_ids.begin()], lp.logprob) << where << ": token's own logprob";
  } else if (top_n) {
    EXPECT_LE(lp.logprob, lp.top_logprobs.back()) << where << ": a token outside the top list";
  }
}

}  // namespace abitest
