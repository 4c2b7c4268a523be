// Misuse of the C ABI, through deepinfer.h only: every bad call returns its documented error, never
// crashes, writes no out-parameter, and leaves the engine serving normal generations (checked after
// every test of the Misuse suite). Here: handles, pointers and buffers, invalid values; calls in
// the wrong state, engines and grammars are in abi_misuse_state_test.cpp.
#include "misuse_fixture.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <thread>

#include <unistd.h>

namespace {

using namespace abitest;
namespace fs = std::filesystem;

// One call of every function that takes a handle, given those handles (any of which may be NULL,
// freed or of another type). Other arguments are valid.
struct Handles {
  di_engine_config* config = nullptr;
  di_engine* engine = nullptr;
  di_sampling* sampling = nullptr;
  di_session* session = nullptr;
  di_event* event = nullptr;
};

std::vector<Call> config_calls(di_engine_config* c) {
  static const std::string path = DI_DEMO_MODEL_DIR;
  static di_engine* out_engine = nullptr;
  return {
      {"di_engine_config_set_model_path", [=] { return di_engine_config_set_model_path(c, path.data(), path.size()); }},
      {"di_engine_config_set_device", [=] { return di_engine_config_set_device(c, DI_DEVICE_CPU); }},
      {"di_engine_config_set_threads", [=] { return di_engine_config_set_threads(c, 1); }},
      {"di_engine_config_set_max_sequences", [=] { return di_engine_config_set_max_sequences(c, 4); }},
      {"di_engine_config_set_max_context", [=] { return di_engine_config_set_max_context(c, 128); }},
      {"di_engine_config_set_state_memory", [=] { return di_engine_config_set_state_memory(c, 0); }},
      {"di_engine_config_set_state_memory_fraction", [=] { return di_engine_config_set_state_memory_fraction(c, 0.5); }},
      {"di_engine_config_set_max_batched_tokens", [=] { return di_engine_config_set_max_batched_tokens(c, 64); }},
      {"di_engine_config_set_seed", [=] { return di_engine_config_set_seed(c, 1); }},
      {"di_engine_create", [=] { return di_engine_create(c, &out_engine); }},
  };
}

std::vector<Call> engine_calls(di_engine* e) {
  static int32_t i32;
  static int64_t i64;
  static int32_t ids[64];
  static char text[256];
  static size_t len;
  static di_sampling* sp;
  static di_session* s;
  static const int32_t one = 5;
  return {
      {"di_engine_vocab_size", [=] { return di_engine_vocab_size(e, &i32); }},
      {"di_engine_max_context", [=] { return di_engine_max_context(e, &i64); }},
      {"di_engine_capacity_tokens", [=] { return di_engine_capacity_tokens(e, &i64); }},
      {"di_engine_eos_tokens", [=] { return di_engine_eos_tokens(e, ids, 64, &len); }},
      {"di_engine_tokenize", [=] { return di_engine_tokenize(e, "hi", 2, DI_TEXT_PLAIN, ids, 64, &len); }},
      {"di_engine_detokenize", [=] { return di_engine_detokenize(e, &one, 1, 0, text, sizeof text, &len); }},
      {"di_engine_sampling_defaults", [=] { return di_engine_sampling_defaults(e, &sp); }},
      {"di_session_create", [=] { return di_session_create(e, &s); }},
  };
}

std::vector<Call> sampling_calls(di_sampling* p) {
  static di_sampling* out;
  static const int32_t id = 5;
  static const float bias = 1.0f;
  return {
      {"di_sampling_clone", [=] { return di_sampling_clone(p, &out); }},
      {"di_sampling_set_temperature", [=] { return di_sampling_set_temperature(p, 0.5f); }},
      {"di_sampling_set_top_k", [=] { return di_sampling_set_top_k(p, 5); }},
      {"di_sampling_set_top_p", [=] { return di_sampling_set_top_p(p, 0.5f); }},
      {"di_sampling_set_min_p", [=] { return di_sampling_set_min_p(p, 0.1f); }},
      {"di_sampling_set_repetition_penalty", [=] { return di_sampling_set_repetition_penalty(p, 1.1f); }},
      {"di_sampling_set_presence_penalty", [=] { return di_sampling_set_presence_penalty(p, 0.5f); }},
      {"di_sampling_set_frequency_penalty", [=] { return di_sampling_set_frequency_penalty(p, 0.5f); }},
      {"di_sampling_set_max_tokens", [=] { return di_sampling_set_max_tokens(p, 4); }},
      {"di_sampling_set_min_tokens", [=] { return di_sampling_set_min_tokens(p, 1); }},
      {"di_sampling_set_n", [=] { return di_sampling_set_n(p, 2); }},
      {"di_sampling_set_seed", [=] { return di_sampling_set_seed(p, 3); }},
      {"di_sampling_clear_seed", [=] { return di_sampling_clear_seed(p); }},
      {"di_sampling_set_ignore_eos", [=] { return di_sampling_set_ignore_eos(p, 1); }},
      {"di_sampling_set_logprobs", [=] { return di_sampling_set_logprobs(p, 2); }},
      {"di_sampling_set_prompt_logprobs", [=] { return di_sampling_set_prompt_logprobs(p, 2); }},
      {"di_sampling_set_logit_bias", [=] { return di_sampling_set_logit_bias(p, &id, &bias, 1); }},
      {"di_sampling_set_allowed_tokens", [=] { return di_sampling_set_allowed_tokens(p, &id, 1); }},
      {"di_sampling_set_stop_tokens", [=] { return di_sampling_set_stop_tokens(p, &id, 1); }},
      {"di_sampling_add_stop_string", [=] { return di_sampling_add_stop_string(p, "x", 1); }},
      {"di_sampling_clear_stop_strings", [=] { return di_sampling_clear_stop_strings(p); }},
      {"di_sampling_set_include_stop_string", [=] { return di_sampling_set_include_stop_string(p, 1); }},
      {"di_sampling_set_skip_special_tokens", [=] { return di_sampling_set_skip_special_tokens(p, 0); }},
  };
}

std::vector<Call> event_calls(di_event* e) {
  static di_event_type kind;
  static int32_t i32, ids[64];
  static char text[256];
  static size_t len;
  static float lp, lps[64];
  static di_finish_reason reason;
  static uint64_t u1, u2, u3;
  static di_error* err;
  return {
      {"di_event_kind", [=] { return di_event_kind(e, &kind); }},
      {"di_event_completion", [=] { return di_event_completion(e, &i32); }},
      {"di_event_tokens", [=] { return di_event_tokens(e, ids, 64, &len); }},
      {"di_event_text", [=] { return di_event_text(e, text, sizeof text, &len); }},
      {"di_event_logprobs", [=] { return di_event_logprobs(e, 0, &lp, ids, lps, 64, &len); }},
      {"di_event_finish_reason", [=] { return di_event_finish_reason(e, &reason); }},
      {"di_event_usage", [=] { return di_event_usage(e, &u1, &u2, &u3); }},
      {"di_event_seed", [=] { return di_event_seed(e, &u1); }},
      {"di_event_error", [=] { return di_event_error(e, &err); }},
  };
}

void expect_all(const std::vector<Call>& calls, di_code code, const std::string& what) {
  for (const auto& c : calls) EXPECT_DI_CODE(c.fn(), code) << c.name << " with " << what;
}


// ---------------------------------------------------------------------------------------------
// Handles: NULL, freed, of another type, made up

TEST_F(Misuse, NullHandlesAreInvalidHandles) {
  Sampling sp = seeded(1, 2);
  expect_all(config_calls(nullptr), DI_ERR_INVALID_HANDLE, "a NULL config");
  expect_all(engine_calls(nullptr), DI_ERR_INVALID_HANDLE, "a NULL engine");
  expect_all(sampling_calls(nullptr), DI_ERR_INVALID_HANDLE, "a NULL sampling");
  expect_all(session_calls(nullptr, sp.get()), DI_ERR_INVALID_HANDLE, "a NULL session");
  expect_all(event_calls(nullptr), DI_ERR_INVALID_HANDLE, "a NULL event");
  Session s = make_session(engine());
  ASSERT_DI_OK(di_session_add_tokens(s.get(), prompt().data(), prompt().size()));
  EXPECT_DI_CODE(di_session_generate(s.get(), nullptr), DI_ERR_INVALID_HANDLE);
  // Free functions accept NULL; the error accessors read NULL as success.
  di_engine_config_free(nullptr);
  di_engine_free(nullptr);
  di_sampling_free(nullptr);
  di_session_free(nullptr);
  di_event_free(nullptr);
  di_error_free(nullptr);
  EXPECT_EQ(di_error_code(nullptr), DI_OK);
  EXPECT_STREQ(di_error_message(nullptr), "");
}

TEST_F(Misuse, FreedHandlesAreInvalidAndFreeingTwiceIsHarmless) {
  di_engine_config* cfg = nullptr;
  ASSERT_DI_OK(di_engine_config_create(&cfg));
  di_engine_config_free(cfg);
  di_engine_config_free(cfg);
  expect_all(config_calls(cfg), DI_ERR_INVALID_HANDLE, "a freed config");

  Engine other = open_engine(DI_DEMO_MODEL_DIR);
  di_engine* e = other.release();
  di_engine_free(e);
  di_engine_free(e);
  expect_all(engine_calls(e), DI_ERR_INVALID_HANDLE, "a freed engine");

  di_sampling* sp = nullptr;
  ASSERT_DI_OK(di_sampling_create(&sp));
  di_sampling_free(sp);
  di_sampling_free(sp);
  expect_all(sampling_calls(sp), DI_ERR_INVALID_HANDLE, "a freed sampling");

  Sampling live = seeded(1, 2);
  di_session* s = nullptr;
  ASSERT_DI_OK(di_session_create(engine(), &s));
  di_session_free(s);
  di_session_free(s);
  expect_all(session_calls(s, live.get()), DI_ERR_INVALID_HANDLE, "a freed session");

  // A session given a freed sampling handle.
  Session ok = make_session(engine());
  ASSERT_DI_OK(di_session_add_tokens(ok.get(), prompt().data(), prompt().size()));
  EXPECT_DI_CODE(di_session_generate(ok.get(), sp), DI_ERR_INVALID_HANDLE);

  di_event* ev = some_event();
  ASSERT_NE(ev, nullptr);
  di_event_free(ev);
  di_event_free(ev);
  expect_all(event_calls(ev), DI_ERR_INVALID_HANDLE, "a freed event");
}

TEST_F(Misuse, HandlesOfAnotherTypeAreRejected) {
  di_engine_config* cfg = nullptr;
  ASSERT_DI_OK(di_engine_config_create(&cfg));
  Config cfg_owner(cfg);
  Sampling sp = seeded(1, 2);
  Session s = make_session(engine());
  ASSERT_DI_OK(di_session_add_tokens(s.get(), prompt().data(), prompt().size()));
  di_event* ev = some_event();
  ASSERT_NE(ev, nullptr);
  Event ev_owner(ev);

  expect_all(config_calls(reinterpret_cast<di_engine_config*>(engine())), DI_ERR_INVALID_HANDLE, "an engine as a config");
  expect_all(engine_calls(reinterpret_cast<di_engine*>(cfg)), DI_ERR_INVALID_HANDLE, "a config as an engine");
  expect_all(engine_calls(reinterpret_cast<di_engine*>(s.get())), DI_ERR_INVALID_HANDLE, "a session as an engine");
  expect_all(sampling_calls(reinterpret_cast<di_sampling*>(s.get())), DI_ERR_INVALID_HANDLE, "a session as a sampling");
  expect_all(session_calls(reinterpret_cast<di_session*>(sp.get()), sp.get()), DI_ERR_INVALID_HANDLE, "a sampling as a session");
  expect_all(session_calls(reinterpret_cast<di_session*>(ev), sp.get()), DI_ERR_INVALID_HANDLE, "an event as a session");
  expect_all(event_calls(reinterpret_cast<di_event*>(s.get())), DI_ERR_INVALID_HANDLE, "a session as an event");
  EXPECT_DI_CODE(di_session_generate(s.get(), reinterpret_cast<di_sampling*>(s.get())), DI_ERR_INVALID_HANDLE);
  EXPECT_DI_CODE(di_session_generate(s.get(), reinterpret_cast<di_sampling*>(ev)), DI_ERR_INVALID_HANDLE);

  // Made-up values, including a real address.
  int local = 0;
  for (uintptr_t v : {uintptr_t{1}, uintptr_t{0x10}, uintptr_t{0x7fffffff}, ~uintptr_t{0}, reinterpret_cast<uintptr_t>(&local)}) {
    const std::string what = "made-up handle " + std::to_string(v);
    expect_all(engine_calls(reinterpret_cast<di_engine*>(v)), DI_ERR_INVALID_HANDLE, what);
    expect_all(session_calls(reinterpret_cast<di_session*>(v), sp.get()), DI_ERR_INVALID_HANDLE, what);
    expect_all(event_calls(reinterpret_cast<di_event*>(v)), DI_ERR_INVALID_HANDLE, what);
    expect_all(sampling_calls(reinterpret_cast<di_sampling*>(v)), DI_ERR_INVALID_HANDLE, what);
    expect_all(config_calls(reinterpret_cast<di_engine_config*>(v)), DI_ERR_INVALID_HANDLE, what);
  }
  // Freeing a handle through the wrong free function frees nothing.
  di_session_free(reinterpret_cast<di_session*>(sp.get()));
  di_sampling_free(reinterpret_cast<di_sampling*>(s.get()));
  di_engine_free(reinterpret_cast<di_engine*>(s.get()));
  di_event_free(reinterpret_cast<di_event*>(s.get()));
  di_engine_config_free(reinterpret_cast<di_engine_config*>(engine()));
  EXPECT_DI_OK(di_sampling_set_n(sp.get(), 1));
  EXPECT_EQ(run(s.get(), sp.get()).completions.size(), 1u);
  di_event_type kind = 0;
  EXPECT_DI_OK(di_event_kind(ev, &kind));
}

// ---------------------------------------------------------------------------------------------
// Pointers and buffers

TEST_F(Misuse, NullOutPointersAreInvalidArguments) {
  Sampling sp = seeded(1, 2);
  Session s = make_session(engine());
  di_event* ev = some_event();
  ASSERT_NE(ev, nullptr);
  Event ev_owner(ev);
  int32_t ids[8];
  char text[8];
  float lp[8];
  di_engine_config* cfg = nullptr;
  ASSERT_DI_OK(di_engine_config_create(&cfg));
  Config cfg_owner(cfg);
  ASSERT_DI_OK(di_engine_config_set_model_path(cfg, DI_DEMO_MODEL_DIR, std::strlen(DI_DEMO_MODEL_DIR)));
  const int32_t one = 5;
  const std::vector<Call> calls = {
      {"di_engine_config_create", [&] { return di_engine_config_create(nullptr); }},
      {"di_engine_create", [&] { return di_engine_create(cfg, nullptr); }},
      {"di_engine_vocab_size", [&] { return di_engine_vocab_size(engine(), nullptr); }},
      {"di_engine_max_context", [&] { return di_engine_max_context(engine(), nullptr); }},
      {"di_engine_capacity_tokens", [&] { return di_engine_capacity_tokens(engine(), nullptr); }},
      {"di_engine_eos_tokens", [&] { return di_engine_eos_tokens(engine(), ids, 8, nullptr); }},
      {"di_engine_tokenize", [&] { return di_engine_tokenize(engine(), "hi", 2, 0, ids, 8, nullptr); }},
      {"di_engine_detokenize", [&] { return di_engine_detokenize(engine(), &one, 1, 0, text, 8, nullptr); }},
      {"di_sampling_create", [&] { return di_sampling_create(nullptr); }},
      {"di_engine_sampling_defaults", [&] { return di_engine_sampling_defaults(engine(), nullptr); }},
      {"di_sampling_clone", [&] { return di_sampling_clone(sp.get(), nullptr); }},
      {"di_session_create", [&] { return di_session_create(engine(), nullptr); }},
      {"di_session_context_length", [&] { return di_session_context_length(s.get(), nullptr); }},
      {"di_session_context_tokens", [&] { return di_session_context_tokens(s.get(), ids, 8, nullptr); }},
      {"di_session_poll", [&] { return di_session_poll(s.get(), 0, nullptr); }},
      {"di_event_kind", [&] { return di_event_kind(ev, nullptr); }},
      {"di_event_completion", [&] { return di_event_completion(ev, nullptr); }},
      {"di_event_tokens", [&] { return di_event_tokens(ev, ids, 8, nullptr); }},
      {"di_event_text", [&] { return di_event_text(ev, text, 8, nullptr); }},
      {"di_event_finish_reason", [&] { return di_event_finish_reason(ev, nullptr); }},
      {"di_event_seed", [&] { return di_event_seed(ev, nullptr); }},
      {"di_event_error", [&] { return di_event_error(ev, nullptr); }},
  };
  expect_all(calls, DI_ERR_INVALID_ARGUMENT, "a NULL out-pointer");
  // Logprobs: the out_len is required once logprobs exist; NULL arrays with room for entries fail.
  Session g = make_session(engine());
  ASSERT_DI_OK(di_session_add_tokens(g.get(), prompt().data(), prompt().size()));
  Sampling with_lp = seeded(1, 1);
  ASSERT_DI_OK(di_sampling_set_logprobs(with_lp.get(), 2));
  ASSERT_DI_OK(di_session_generate(g.get(), with_lp.get()));
  di_event* tok = nullptr;
  ASSERT_DI_OK(di_session_poll(g.get(), 60000, &tok));
  ASSERT_NE(tok, nullptr);
  Event tok_owner(tok);
  size_t n = 0;
  EXPECT_DI_CODE(di_event_logprobs(tok, 0, lp, ids, lp, 8, nullptr), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_event_logprobs(tok, 0, lp, nullptr, lp, 8, &n), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_event_logprobs(tok, 0, lp, ids, nullptr, 8, &n), DI_ERR_INVALID_ARGUMENT);
  discard(g.get());
}

TEST_F(Misuse, NullInputsWithALengthAreInvalidArguments) {
  Sampling sp = make_sampling();
  Session s = make_session(engine());
  di_engine_config* cfg = nullptr;
  ASSERT_DI_OK(di_engine_config_create(&cfg));
  Config cfg_owner(cfg);
  int32_t ids[8];
  char text[8];
  size_t n = 0;
  const float bias = 1.0f;
  const int32_t id = 5;
  const std::vector<Call> calls = {
      {"di_engine_config_set_model_path", [&] { return di_engine_config_set_model_path(cfg, nullptr, 4); }},
      {"di_engine_tokenize", [&] { return di_engine_tokenize(engine(), nullptr, 4, 0, ids, 8, &n); }},
      {"di_engine_detokenize", [&] { return di_engine_detokenize(engine(), nullptr, 4, 0, text, 8, &n); }},
      {"di_sampling_set_logit_bias ids", [&] { return di_sampling_set_logit_bias(sp.get(), nullptr, &bias, 1); }},
      {"di_sampling_set_logit_bias bias", [&] { return di_sampling_set_logit_bias(sp.get(), &id, nullptr, 1); }},
      {"di_sampling_set_allowed_tokens", [&] { return di_sampling_set_allowed_tokens(sp.get(), nullptr, 1); }},
      {"di_sampling_set_stop_tokens", [&] { return di_sampling_set_stop_tokens(sp.get(), nullptr, 1); }},
      {"di_sampling_add_stop_string", [&] { return di_sampling_add_stop_string(sp.get(), nullptr, 1); }},
      {"di_session_add_tokens", [&] { return di_session_add_tokens(s.get(), nullptr, 3); }},
      {"di_session_add_text", [&] { return di_session_add_text(s.get(), nullptr, 3, 0); }},
      {"di_session_add_message", [&] { return di_session_add_message(s.get(), DI_ROLE_USER, nullptr, 3); }},
      {"di_session_add_tool_call name", [&] { return di_session_add_tool_call(s.get(), nullptr, 3, "{}", 2); }},
      {"di_session_add_tool_call arguments", [&] { return di_session_add_tool_call(s.get(), "f", 1, nullptr, 2); }},
  };
  expect_all(calls, DI_ERR_INVALID_ARGUMENT, "NULL with a length");
  EXPECT_EQ(context_length(s.get()), 0);
  // NULL with length 0 is an empty input.
  EXPECT_DI_OK(di_engine_tokenize(engine(), nullptr, 0, 0, ids, 8, &n));
  EXPECT_EQ(n, 0u);
  EXPECT_DI_OK(di_session_add_tokens(s.get(), nullptr, 0));
  EXPECT_EQ(context_length(s.get()), 0);
}

TEST_F(Misuse, BufferTooSmallReportsTheSizeAndWritesNothing) {
  static constexpr int32_t kSentinel = -77;
  auto check_ids = [](const char* what, size_t needed, const std::function<di_error*(int32_t*, size_t, size_t*)>& f) {
    ASSERT_GT(needed, 0u) << what;
    std::vector<int32_t> buf(needed + 4, kSentinel);
    for (size_t cap : {size_t{0}, needed - 1}) {
      size_t out_len = 12345;
      EXPECT_DI_CODE(f(cap ? buf.data() : nullptr, cap, &out_len), DI_ERR_BUFFER_TOO_SMALL) << what << " cap " << cap;
      EXPECT_EQ(out_len, needed) << what << " cap " << cap;
      EXPECT_EQ(buf, std::vector<int32_t>(needed + 4, kSentinel)) << what << ": wrote into a buffer too small";
    }
    size_t out_len = 0;
    EXPECT_DI_OK(f(buf.data(), needed, &out_len)) << what;
    EXPECT_EQ(out_len, needed) << what;
    EXPECT_EQ(buf[needed], kSentinel) << what << ": wrote past out_len";
  };
  auto check_text = [](const char* what, size_t needed, const std::function<di_error*(char*, size_t, size_t*)>& f) {
    ASSERT_GT(needed, 0u) << what;
    std::string buf(needed + 4, '#');
    for (size_t cap : {size_t{0}, needed - 1}) {
      size_t out_len = 12345;
      EXPECT_DI_CODE(f(cap ? buf.data() : nullptr, cap, &out_len), DI_ERR_BUFFER_TOO_SMALL) << what << " cap " << cap;
      EXPECT_EQ(out_len, needed) << what;
      EXPECT_EQ(buf, std::string(needed + 4, '#')) << what << ": wrote into a buffer too small";
    }
    size_t out_len = 0;
    EXPECT_DI_OK(f(buf.data(), needed, &out_len)) << what;
    EXPECT_EQ(out_len, needed);
    EXPECT_EQ(buf[needed], '#') << what << ": wrote past out_len";
  };
  const std::string text = kPrompt;
  check_ids("di_engine_eos_tokens", 1, [&](int32_t* b, size_t c, size_t* n) { return di_engine_eos_tokens(engine(), b, c, n); });
  check_ids("di_engine_tokenize", prompt().size(),
            [&](int32_t* b, size_t c, size_t* n) { return di_engine_tokenize(engine(), text.data(), text.size(), 0, b, c, n); });
  check_text("di_engine_detokenize", text.size(), [&](char* b, size_t c, size_t* n) {
    return di_engine_detokenize(engine(), prompt().data(), prompt().size(), 0, b, c, n);
  });
  Session s = make_session(engine());
  ASSERT_DI_OK(di_session_add_tokens(s.get(), prompt().data(), prompt().size()));
  check_ids("di_session_context_tokens", prompt().size(),
            [&](int32_t* b, size_t c, size_t* n) { return di_session_context_tokens(s.get(), b, c, n); });

  // Event outputs: a token event with text and logprobs.
  Sampling sp = seeded(3, 4);
  ASSERT_DI_OK(di_sampling_set_logprobs(sp.get(), 5));
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  ASSERT_DI_OK(di_session_generate(s.get(), sp.get()));
  bool checked_text = false;
  for (;;) {
    di_event* raw = nullptr;
    ASSERT_DI_OK(di_session_poll(s.get(), 60000, &raw));
    ASSERT_NE(raw, nullptr);
    Event ev(raw);
    di_event_type kind = 0;
    ASSERT_DI_OK(di_event_kind(raw, &kind));
    if (kind == DI_EVENT_DONE) break;
    if (kind == DI_EVENT_FINISHED) continue;
    const auto ids = event_tokens(raw);
    const auto t = event_text(raw);
    check_ids("di_event_tokens", ids.size(), [&](int32_t* b, size_t c, size_t* n) { return di_event_tokens(raw, b, c, n); });
    if (!t.empty()) {
      check_text("di_event_text", t.size(), [&](char* b, size_t c, size_t* n) { return di_event_text(raw, b, c, n); });
      checked_text = true;
    }
    // Logprobs: the top list.
    float lp = 1.0f, top_lp[8] = {9, 9, 9, 9, 9, 9, 9, 9};
    int32_t top_ids[8] = {kSentinel, kSentinel, kSentinel, kSentinel, kSentinel, kSentinel, kSentinel, kSentinel};
    size_t n = 0;
    EXPECT_DI_CODE(di_event_logprobs(raw, 0, &lp, top_ids, top_lp, 4, &n), DI_ERR_BUFFER_TOO_SMALL);
    EXPECT_EQ(n, 5u);
    EXPECT_EQ(lp, 1.0f) << "logprob written on failure";
    for (int k = 0; k < 8; ++k) {
      EXPECT_EQ(top_ids[k], kSentinel);
      EXPECT_EQ(top_lp[k], 9.0f);
    }
    EXPECT_DI_OK(di_event_logprobs(raw, 0, &lp, top_ids, top_lp, 5, &n));
    EXPECT_EQ(top_ids[5], kSentinel);
    // Index past the event's tokens.
    EXPECT_DI_CODE(di_event_logprobs(raw, ids.size(), &lp, top_ids, top_lp, 8, &n), DI_ERR_INVALID_ARGUMENT);
  }
  EXPECT_TRUE(checked_text);
  di_event* none = nullptr;
  EXPECT_DI_CODE(di_session_poll(s.get(), 0, &none), DI_ERR_STATE);
}

// Out-parameters are written only on success (DI_ERR_BUFFER_TOO_SMALL's *out_len aside).
TEST_F(Misuse, FailedCallsWriteNoOutParameter) {
  int32_t i32 = -5;
  int64_t i64 = -5;
  size_t len = 777;
  int32_t ids[4] = {-9, -9, -9, -9};
  di_engine* e = reinterpret_cast<di_engine*>(0x1);
  di_session* s = reinterpret_cast<di_session*>(0x1);
  di_sampling* sp = reinterpret_cast<di_sampling*>(0x1);
  di_event* ev = reinterpret_cast<di_event*>(0x1);
  EXPECT_DI_CODE(di_engine_vocab_size(nullptr, &i32), DI_ERR_INVALID_HANDLE);
  EXPECT_DI_CODE(di_engine_max_context(nullptr, &i64), DI_ERR_INVALID_HANDLE);
  EXPECT_DI_CODE(di_session_create(nullptr, &s), DI_ERR_INVALID_HANDLE);
  EXPECT_DI_CODE(di_engine_sampling_defaults(nullptr, &sp), DI_ERR_INVALID_HANDLE);
  EXPECT_DI_CODE(di_sampling_clone(nullptr, &sp), DI_ERR_INVALID_HANDLE);
  EXPECT_DI_CODE(di_engine_tokenize(engine(), "\xff", 1, 0, ids, 4, &len), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_engine_eos_tokens(engine(), nullptr, 4, &len), DI_ERR_INVALID_ARGUMENT);  // NULL buf with room
  Session live = make_session(engine());
  EXPECT_DI_CODE(di_session_poll(live.get(), 0, &ev), DI_ERR_STATE);
  {
    di_engine_config* cfg = nullptr;
    ASSERT_DI_OK(di_engine_config_create(&cfg));
    Config owner(cfg);
    EXPECT_DI_CODE(di_engine_create(cfg, &e), DI_ERR_INVALID_ARGUMENT);
  }
  EXPECT_EQ(i32, -5);
  EXPECT_EQ(i64, -5);
  EXPECT_EQ(len, 777u);
  EXPECT_EQ(ids[0], -9);
  EXPECT_EQ(e, reinterpret_cast<di_engine*>(0x1));
  EXPECT_EQ(s, reinterpret_cast<di_session*>(0x1));
  EXPECT_EQ(sp, reinterpret_cast<di_sampling*>(0x1));
  EXPECT_EQ(ev, reinterpret_cast<di_event*>(0x1));
}

// ---------------------------------------------------------------------------------------------
// Invalid values

TEST_F(Misuse, InvalidSamplingValuesAreRejectedAndChangeNothing) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Sampling sp = make_sampling();
  di_sampling* p = sp.get();
  ASSERT_DI_OK(di_sampling_set_temperature(p, 0.0f));
  ASSERT_DI_OK(di_sampling_set_max_tokens(p, 6));
  const int32_t neg = -1, ok_id = 5;
  const float too_big = 101.0f, fine = 1.0f;
  const std::vector<Call> calls = {
      {"temperature -1", [=] { return di_sampling_set_temperature(p, -1.0f); }},
      {"temperature -0.001", [=] { return di_sampling_set_temperature(p, -0.001f); }},
      {"temperature NaN", [=] { return di_sampling_set_temperature(p, nan); }},
      {"temperature inf", [=] { return di_sampling_set_temperature(p, inf); }},
      {"top_k -2", [=] { return di_sampling_set_top_k(p, -2); }},
      {"top_p 2", [=] { return di_sampling_set_top_p(p, 2.0f); }},
      {"top_p 0", [=] { return di_sampling_set_top_p(p, 0.0f); }},
      {"top_p -0.5", [=] { return di_sampling_set_top_p(p, -0.5f); }},
      {"top_p NaN", [=] { return di_sampling_set_top_p(p, nan); }},
      {"min_p -0.1", [=] { return di_sampling_set_min_p(p, -0.1f); }},
      {"min_p 1.5", [=] { return di_sampling_set_min_p(p, 1.5f); }},
      {"min_p NaN", [=] { return di_sampling_set_min_p(p, nan); }},
      {"repetition_penalty 0", [=] { return di_sampling_set_repetition_penalty(p, 0.0f); }},
      {"repetition_penalty -1", [=] { return di_sampling_set_repetition_penalty(p, -1.0f); }},
      {"repetition_penalty NaN", [=] { return di_sampling_set_repetition_penalty(p, nan); }},
      {"repetition_penalty inf", [=] { return di_sampling_set_repetition_penalty(p, inf); }},
      {"presence_penalty 2.5", [=] { return di_sampling_set_presence_penalty(p, 2.5f); }},
      {"presence_penalty -2.5", [=] { return di_sampling_set_presence_penalty(p, -2.5f); }},
      {"presence_penalty NaN", [=] { return di_sampling_set_presence_penalty(p, nan); }},
      {"frequency_penalty 3", [=] { return di_sampling_set_frequency_penalty(p, 3.0f); }},
      {"frequency_penalty -3", [=] { return di_sampling_set_frequency_penalty(p, -3.0f); }},
      {"frequency_penalty NaN", [=] { return di_sampling_set_frequency_penalty(p, nan); }},
      {"max_tokens 0", [=] { return di_sampling_set_max_tokens(p, 0); }},
      {"max_tokens -1", [=] { return di_sampling_set_max_tokens(p, -1); }},
      {"min_tokens -1", [=] { return di_sampling_set_min_tokens(p, -1); }},
      {"n 0", [=] { return di_sampling_set_n(p, 0); }},
      {"n -1", [=] { return di_sampling_set_n(p, -1); }},
      {"n 129", [=] { return di_sampling_set_n(p, 129); }},
      {"logprobs 21", [=] { return di_sampling_set_logprobs(p, 21); }},
      {"logprobs -2", [=] { return di_sampling_set_logprobs(p, -2); }},
      {"prompt_logprobs 21", [=] { return di_sampling_set_prompt_logprobs(p, 21); }},
      {"prompt_logprobs -2", [=] { return di_sampling_set_prompt_logprobs(p, -2); }},
      {"logit_bias id -1", [=] { return di_sampling_set_logit_bias(p, &neg, &fine, 1); }},
      {"logit_bias 101", [=] { return di_sampling_set_logit_bias(p, &ok_id, &too_big, 1); }},
      {"logit_bias NaN", [=] { return di_sampling_set_logit_bias(p, &ok_id, &nan, 1); }},
      {"allowed_tokens -1", [=] { return di_sampling_set_allowed_tokens(p, &neg, 1); }},
      {"stop_tokens -1", [=] { return di_sampling_set_stop_tokens(p, &neg, 1); }},
      {"stop string empty", [=] { return di_sampling_add_stop_string(p, "", 0); }},
      {"stop string 0xff", [=] { return di_sampling_add_stop_string(p, "a\xff", 2); }},
      {"stop string truncated", [=] { return di_sampling_add_stop_string(p, "\xc3", 1); }},
      {"stop string overlong", [=] { return di_sampling_add_stop_string(p, "\xc0\xaf", 2); }},
      {"stop string surrogate", [=] { return di_sampling_add_stop_string(p, "\xed\xa0\x80", 3); }},
      {"stop string too long", [=] {
         const std::string s(1025, 'a');
         return di_sampling_add_stop_string(p, s.data(), s.size());
       }},
  };
  expect_all(calls, DI_ERR_INVALID_ARGUMENT, "an invalid value");

  // Nothing changed: still greedy, 6 tokens, no stop string, no bias.
  Sampling ref = make_sampling();
  ASSERT_DI_OK(di_sampling_set_temperature(ref.get(), 0.0f));
  ASSERT_DI_OK(di_sampling_set_max_tokens(ref.get(), 6));
  Output a = run_prompt(engine(), prompt(), p);
  Output b = run_prompt(engine(), prompt(), ref.get());
  EXPECT_EQ(a.completions[0].tokens, b.completions[0].tokens);
  EXPECT_EQ(a.completions[0].text, b.completions[0].text);

  // Limits that are valid.
  EXPECT_DI_OK(di_sampling_set_top_p(p, 1.0f));
  EXPECT_DI_OK(di_sampling_set_min_p(p, 1.0f));
  EXPECT_DI_OK(di_sampling_set_min_p(p, 0.0f));
  EXPECT_DI_OK(di_sampling_set_logprobs(p, 20));
  EXPECT_DI_OK(di_sampling_set_logprobs(p, -1));
  EXPECT_DI_OK(di_sampling_set_n(p, 128));
  EXPECT_DI_OK(di_sampling_set_n(p, 1));
  EXPECT_DI_OK(di_sampling_set_top_k(p, 1 << 30));  // above the vocabulary: off
  EXPECT_DI_OK(di_sampling_set_top_k(p, 0));
  const std::string longest(1024, 'a');
  EXPECT_DI_OK(di_sampling_add_stop_string(p, longest.data(), longest.size()));
  ASSERT_DI_OK(di_sampling_clear_stop_strings(p));
  for (int i = 0; i < 64; ++i) {
    const std::string s = "stop" + std::to_string(i);
    ASSERT_DI_OK(di_sampling_add_stop_string(p, s.data(), s.size()));
  }
  EXPECT_DI_CODE(di_sampling_add_stop_string(p, "one too many", 12), DI_ERR_INVALID_ARGUMENT);
  ASSERT_DI_OK(di_sampling_clear_stop_strings(p));
}

// One rule per field: every limit the setters take, the engine takes when the generation starts
// (they once disagreed on top_k -1 and on the temperature cap), and one step past it the setters refuse.
TEST_F(Misuse, SamplingLimitsOfTheSettersAreTheEngines) {
  const float cap = 1e6f;  // deepinfer.h: temperature in [0, 1e6]
  struct Limit {
    const char* name;
    std::function<di_error*(di_sampling*)> set, past;
    bool logprobs = false;  // the events carry logprobs
  };
  const std::vector<Limit> limits = {
      {"top_k -1", [](di_sampling* p) { return di_sampling_set_top_k(p, -1); },
       [](di_sampling* p) { return di_sampling_set_top_k(p, -2); }},
      {"temperature 1e6", [=](di_sampling* p) { return di_sampling_set_temperature(p, cap); },
       [=](di_sampling* p) { return di_sampling_set_temperature(p, std::nextafter(cap, 2 * cap)); }},
      {"top_p 1", [](di_sampling* p) { return di_sampling_set_top_p(p, 1.0f); },
       [](di_sampling* p) { return di_sampling_set_top_p(p, std::nextafter(1.0f, 2.0f)); }},
      {"min_p 1", [](di_sampling* p) { return di_sampling_set_min_p(p, 1.0f); },
       [](di_sampling* p) { return di_sampling_set_min_p(p, std::nextafter(1.0f, 2.0f)); }},
      {"repetition_penalty 100", [](di_sampling* p) { return di_sampling_set_repetition_penalty(p, 100.0f); },
       [](di_sampling* p) { return di_sampling_set_repetition_penalty(p, std::nextafter(100.0f, 200.0f)); }},
      {"repetition_penalty 0.01", [](di_sampling* p) { return di_sampling_set_repetition_penalty(p, 0.01f); },
       [](di_sampling* p) { return di_sampling_set_repetition_penalty(p, std::nextafter(0.01f, 0.0f)); }},
      {"presence_penalty -2", [](di_sampling* p) { return di_sampling_set_presence_penalty(p, -2.0f); },
       [](di_sampling* p) { return di_sampling_set_presence_penalty(p, std::nextafter(-2.0f, -3.0f)); }},
      {"frequency_penalty 2", [](di_sampling* p) { return di_sampling_set_frequency_penalty(p, 2.0f); },
       [](di_sampling* p) { return di_sampling_set_frequency_penalty(p, std::nextafter(2.0f, 3.0f)); }},
      {"logprobs 20", [](di_sampling* p) { return di_sampling_set_logprobs(p, 20); },
       [](di_sampling* p) { return di_sampling_set_logprobs(p, 21); }, true},
  };
  for (const Limit& l : limits) {
    Sampling sp = seeded(7, 2);
    ASSERT_DI_OK(l.set(sp.get())) << l.name;
    Output out = run_prompt(engine(), prompt(), sp.get(), 1, l.logprobs);
    ASSERT_EQ(out.completions.size(), 1u) << l.name;
    EXPECT_EQ(out.completions[0].error.code, DI_OK) << l.name << ": " << out.completions[0].error.message;
    EXPECT_EQ(out.completions[0].tokens.size(), 2u) << l.name;
    EXPECT_DI_CODE(l.past(sp.get()), DI_ERR_INVALID_ARGUMENT) << l.name;
  }
}

// Cross-field checks happen when the generation starts, and adding a valid stop string does not
// fail because of another field.
TEST_F(Misuse, MinTokensAboveMaxTokensIsRejectedAtGenerate) {
  Sampling sp = seeded(1, 5);
  ASSERT_DI_OK(di_sampling_set_min_tokens(sp.get(), 10));
  EXPECT_DI_OK(di_sampling_add_stop_string(sp.get(), "x", 1));
  Session s = make_session(engine());
  ASSERT_DI_OK(di_session_add_tokens(s.get(), prompt().data(), prompt().size()));
  EXPECT_DI_CODE(di_session_generate(s.get(), sp.get()), DI_ERR_INVALID_ARGUMENT);
  di_event* ev = nullptr;
  EXPECT_DI_CODE(di_session_poll(s.get(), 0, &ev), DI_ERR_STATE) << "a refused generation does not run";
  ASSERT_DI_OK(di_sampling_set_min_tokens(sp.get(), 5));
  EXPECT_EQ(run(s.get(), sp.get()).completions[0].tokens.size(), 5u);
}

TEST_F(Misuse, TokenIdsOutOfRange) {
  const int32_t v = vocab();
  Session s = make_session(engine());
  ASSERT_DI_OK(di_session_add_tokens(s.get(), prompt().data(), prompt().size()));
  for (std::vector<int32_t> bad : {std::vector<int32_t>{-1}, {v}, {5, v}, {5, -1, 6}, {std::numeric_limits<int32_t>::max()},
                                   {std::numeric_limits<int32_t>::min()}}) {
    EXPECT_DI_CODE(di_session_add_tokens(s.get(), bad.data(), bad.size()), DI_ERR_INVALID_ARGUMENT) << bad.back();
    char text[64];
    size_t n = 0;
    EXPECT_DI_CODE(di_engine_detokenize(engine(), bad.data(), bad.size(), 0, text, sizeof text, &n), DI_ERR_INVALID_ARGUMENT);
  }
  EXPECT_EQ(context_tokens(s.get()), prompt()) << "a refused call appends nothing";

  // Ids in sampling parameters are checked against the vocabulary when the generation starts.
  const float bias = 1.0f;
  for (int32_t id : {v, v + 1000, std::numeric_limits<int32_t>::max()}) {
    Sampling a = seeded(1, 2), b = seeded(1, 2), c = seeded(1, 2);
    ASSERT_DI_OK(di_sampling_set_logit_bias(a.get(), &id, &bias, 1));
    ASSERT_DI_OK(di_sampling_set_allowed_tokens(b.get(), &id, 1));
    ASSERT_DI_OK(di_sampling_set_stop_tokens(c.get(), &id, 1));
    for (di_sampling* sp : {a.get(), b.get(), c.get()}) {
      EXPECT_DI_CODE(di_session_generate(s.get(), sp), DI_ERR_INVALID_ARGUMENT) << id;
      di_event* ev = nullptr;
      EXPECT_DI_CODE(di_session_poll(s.get(), 0, &ev), DI_ERR_STATE);
    }
  }
  Sampling ok = seeded(1, 2);
  EXPECT_EQ(run(s.get(), ok.get()).completions[0].tokens.size(), 2u);
}

TEST_F(Misuse, UnknownEnumsAndFlags) {
  Session s = make_session(engine());
  for (di_role role : {-1, 4, 100}) {
    EXPECT_DI_CODE(di_session_add_message(s.get(), role, "hi", 2), DI_ERR_INVALID_ARGUMENT) << role;
  }
  EXPECT_EQ(context_length(s.get()), 0);
  di_engine_config* cfg = nullptr;
  ASSERT_DI_OK(di_engine_config_create(&cfg));
  Config owner(cfg);
  for (di_device d : {-1, 3, 99}) EXPECT_DI_CODE(di_engine_config_set_device(cfg, d), DI_ERR_INVALID_ARGUMENT) << d;
  int32_t ids[16];
  char text[16];
  size_t n = 0;
  const int32_t one = 5;
  for (uint32_t flags : {2u, 4u, 0x80000000u}) {
    EXPECT_DI_CODE(di_engine_tokenize(engine(), "hi", 2, flags, ids, 16, &n), DI_ERR_INVALID_ARGUMENT) << flags;
    EXPECT_DI_CODE(di_session_add_text(s.get(), "hi", 2, flags), DI_ERR_INVALID_ARGUMENT) << flags;
  }
  for (uint32_t flags : {2u, 0x80000000u})
    EXPECT_DI_CODE(di_engine_detokenize(engine(), &one, 1, flags, text, 16, &n), DI_ERR_INVALID_ARGUMENT) << flags;
  for (int32_t level : {-1, 5, 1000}) EXPECT_DI_CODE(di_set_log_level(level), DI_ERR_INVALID_ARGUMENT) << level;
  // Configuration values.
  EXPECT_DI_CODE(di_engine_config_set_model_path(cfg, "", 0), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_engine_config_set_threads(cfg, -1), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_engine_config_set_max_sequences(cfg, 0), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_engine_config_set_max_sequences(cfg, -3), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_engine_config_set_max_context(cfg, -1), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_engine_config_set_max_batched_tokens(cfg, 0), DI_ERR_INVALID_ARGUMENT);
  // Text that is not UTF-8, and a tool call without a name.
  EXPECT_DI_CODE(di_engine_tokenize(engine(), "a\xff", 2, 0, ids, 16, &n), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_session_add_text(s.get(), "a\xff", 2, 0), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_session_add_message(s.get(), DI_ROLE_USER, "a\xff", 2), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_session_add_tool_call(s.get(), "", 0, "{}", 2), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_session_add_tool_call(s.get(), "f\xff", 2, "{}", 2), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_session_add_tool_call(s.get(), "f", 1, "{\xff}", 3), DI_ERR_INVALID_ARGUMENT);
  // None of them changed the session: it is still empty and takes chat messages.
  EXPECT_EQ(context_length(s.get()), 0);
  ASSERT_DI_OK(di_session_add_message(s.get(), DI_ROLE_USER, "hi", 2));
  Sampling sp = seeded(1, 2);
  EXPECT_TRUE(run(s.get(), sp.get()).completions[0].finished);
}

}  // namespace
