// The fixture of the C ABI's misuse suites (abi_misuse_test.cpp, abi_misuse_state_test.cpp): one
// engine on the demo model for the suite, checked after every test to still serve a normal
// generation with the same output as before.
#pragma once

#include "abi_helpers.h"

#include <functional>
#include <string>
#include <vector>

namespace abitest {

constexpr const char* kPrompt = "Once upon a time, there was a little girl named Lily. She";

// A named call, for tables of calls that must all fail the same way.
struct Call {
  std::string name;
  std::function<di_error*()> fn;
};

// Every call that takes a session, with valid other arguments.
inline std::vector<Call> session_calls(di_session* s, di_sampling* sp) {
  static const int32_t one = 5;
  static int64_t i64;
  static int32_t ids[64];
  static size_t len;
  static di_event* ev;
  return {
      {"di_session_add_tokens", [=] { return di_session_add_tokens(s, &one, 1); }},
      {"di_session_add_text", [=] { return di_session_add_text(s, "hi", 2, DI_TEXT_PLAIN); }},
      {"di_session_add_message", [=] { return di_session_add_message(s, DI_ROLE_USER, "hi", 2); }},
      {"di_session_add_tool_call", [=] { return di_session_add_tool_call(s, "f", 1, "{}", 2); }},
      {"di_session_context_length", [=] { return di_session_context_length(s, &i64); }},
      {"di_session_context_tokens", [=] { return di_session_context_tokens(s, ids, 64, &len); }},
      {"di_session_reset", [=] { return di_session_reset(s); }},
      {"di_session_generate", [=] { return di_session_generate(s, sp); }},
      {"di_session_cancel", [=] { return di_session_cancel(s); }},
      {"di_session_poll", [=] { return di_session_poll(s, 0, &ev); }},
      {"di_session_set_callback", [=] { return di_session_set_callback(s, nullptr, nullptr); }},
  };
}

class Misuse : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine_ = open_engine(DI_DEMO_MODEL_DIR).release();
    if (!engine_) return;
    prompt_ = new std::vector<int32_t>(tokenize(engine_, kPrompt));
    reference_ = new Completion(serve());
  }
  static void TearDownTestSuite() {
    di_engine_free(engine_);
    engine_ = nullptr;
    delete prompt_;
    delete reference_;
  }
  void SetUp() override { ASSERT_NE(engine_, nullptr); }
  // After every test: the engine still serves a normal generation, with the same output as before.
  void TearDown() override {
    if (!engine_) return;
    const Completion c = serve();
    EXPECT_TRUE(c.finished);
    EXPECT_EQ(c.tokens, reference_->tokens) << "the engine serves normally after the misuse";
    EXPECT_EQ(c.text, reference_->text);
  }

  static Completion serve() {
    Sampling sp = seeded(2718, 6);
    Output out = run_prompt(engine_, *prompt_, sp.get());
    return out.completions.empty() ? Completion{} : out.completions[0];
  }
  static di_engine* engine() { return engine_; }
  static const std::vector<int32_t>& prompt() { return *prompt_; }
  static int32_t vocab() {
    int32_t v = 0;
    EXPECT_DI_OK(di_engine_vocab_size(engine_, &v));
    return v;
  }
  // A session generating (long enough to be still running) from the prompt.
  static Session generating(int32_t n = 1) {
    Session s = make_session(engine_);
    EXPECT_DI_OK(di_session_add_tokens(s.get(), prompt_->data(), prompt_->size()));
    Sampling sp = seeded(1, 1000, n);
    EXPECT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
    EXPECT_DI_OK(di_session_generate(s.get(), sp.get()));
    return s;
  }
  // Cancels and drains a generation.
  static void stop(di_session* s, int n = 1) {
    EXPECT_DI_OK(di_session_cancel(s));
    Output out = drain(s, n);
    for (const auto& c : out.completions) EXPECT_EQ(c.reason, DI_FINISH_CANCELLED);
  }
  // One event of a finished generation (the caller frees it).
  static di_event* some_event() {
    Session s = make_session(engine_);
    EXPECT_DI_OK(di_session_add_tokens(s.get(), prompt_->data(), prompt_->size()));
    Sampling sp = seeded(1, 2);
    EXPECT_DI_OK(di_session_generate(s.get(), sp.get()));
    di_event* ev = nullptr;
    EXPECT_DI_OK(di_session_poll(s.get(), 60000, &ev));
    discard(s.get());
    return ev;
  }

  static inline di_engine* engine_ = nullptr;
  static inline std::vector<int32_t>* prompt_ = nullptr;
  static inline Completion* reference_ = nullptr;
};

}  // namespace abitest
