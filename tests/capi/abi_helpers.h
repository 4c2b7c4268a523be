// Helpers for the GoogleTest suites of the C ABI. They use deepinfer.h only (no engine header):
// RAII owners for handles, assertions on di_error*, and a runner that generates and collects every
// event of a generation.
#pragma once

#include "deepinfer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace abitest {

// An owned di_error*: the code and message of a call's result.
struct Status {
  di_code code = DI_OK;
  std::string message;
};

inline Status status(di_error* err) {
  Status s{di_error_code(err), di_error_message(err)};
  di_error_free(err);
  return s;
}

inline ::testing::AssertionResult is_ok(const char* expr, di_error* err) {
  if (!err) return ::testing::AssertionSuccess();
  Status s = status(err);
  return ::testing::AssertionFailure() << expr << " failed: " << di_code_name(s.code) << ": " << s.message;
}

inline ::testing::AssertionResult has_code(const char* expr, const char*, di_error* err, di_code code) {
  if (!err) return ::testing::AssertionFailure() << expr << " succeeded, expected " << di_code_name(code);
  Status s = status(err);
  if (s.code != code)
    return ::testing::AssertionFailure() << expr << ": got " << di_code_name(s.code) << " (" << s.message << "), expected "
                                         << di_code_name(code);
  if (s.message.empty()) return ::testing::AssertionFailure() << expr << ": error without a message";
  return ::testing::AssertionSuccess();
}

#define ASSERT_DI_OK(call) ASSERT_PRED_FORMAT1(::abitest::is_ok, call)
#define EXPECT_DI_OK(call) EXPECT_PRED_FORMAT1(::abitest::is_ok, call)
#define EXPECT_DI_CODE(call, code) EXPECT_PRED_FORMAT2(::abitest::has_code, call, code)
#define ASSERT_DI_CODE(call, code) ASSERT_PRED_FORMAT2(::abitest::has_code, call, code)

struct ConfigFree { void operator()(di_engine_config* c) const { di_engine_config_free(c); } };
struct EngineFree { void operator()(di_engine* e) const { di_engine_free(e); } };
struct SamplingFree { void operator()(di_sampling* s) const { di_sampling_free(s); } };
struct SessionFree { void operator()(di_session* s) const { di_session_free(s); } };
struct EventFree { void operator()(di_event* e) const { di_event_free(e); } };
using Config = std::unique_ptr<di_engine_config, ConfigFree>;
using Engine = std::unique_ptr<di_engine, EngineFree>;
using Sampling = std::unique_ptr<di_sampling, SamplingFree>;
using Session = std::unique_ptr<di_session, SessionFree>;
using Event = std::unique_ptr<di_event, EventFree>;

struct EngineOptions {
  int32_t threads = 2;
  int32_t max_sequences = 32;
  int64_t max_context = 1024;
  int32_t max_batched_tokens = 512;
  uint64_t state_memory = 0;
  bool has_seed = false;  // seed the engine's own generator
  uint64_t seed = 0;
};

// An engine on `model_dir`; check with EXPECT_DI_OK on the returned status.
inline Engine open_engine(const std::string& model_dir, const EngineOptions& o = {}, Status* st = nullptr) {
  di_engine_config* raw = nullptr;
  di_error* err = di_engine_config_create(&raw);
  Config cfg(raw);
  di_engine* engine = nullptr;
  if (!err) err = di_engine_config_set_model_path(cfg.get(), model_dir.data(), model_dir.size());
  if (!err) err = di_engine_config_set_device(cfg.get(), DI_DEVICE_CPU);
  if (!err) err = di_engine_config_set_threads(cfg.get(), o.threads);
  if (!err) err = di_engine_config_set_max_sequences(cfg.get(), o.max_sequences);
  if (!err) err = di_engine_config_set_max_context(cfg.get(), o.max_context);
  if (!err) err = di_engine_config_set_max_batched_tokens(cfg.get(), o.max_batched_tokens);
  if (!err) err = di_engine_config_set_state_memory(cfg.get(), o.state_memory);
  if (!err && o.has_seed) err = di_engine_config_set_seed(cfg.get(), o.seed);
  if (!err) err = di_engine_create(cfg.get(), &engine);
  Status s = status(err);
  if (st) *st = s;
  else if (s.code != DI_OK) ADD_FAILURE() << "engine on " << model_dir << ": " << di_code_name(s.code) << ": " << s.message;
  return Engine(engine);
}

inline Sampling make_sampling() {
  di_sampling* sp = nullptr;
  EXPECT_DI_OK(di_sampling_create(&sp));
  return Sampling(sp);
}

// Sampling parameters for short, reproducible runs.
inline Sampling seeded(uint64_t seed, int32_t max_tokens, int32_t n = 1) {
  Sampling sp = make_sampling();
  EXPECT_DI_OK(di_sampling_set_seed(sp.get(), seed));
  EXPECT_DI_OK(di_sampling_set_max_tokens(sp.get(), max_tokens));
  EXPECT_DI_OK(di_sampling_set_n(sp.get(), n));
  return sp;
}

inline Session make_session(di_engine* engine) {
  di_session* s = nullptr;
  EXPECT_DI_OK(di_session_create(engine, &s));
  return Session(s);
}

inline std::vector<int32_t> tokenize(di_engine* engine, std::string_view text, uint32_t flags = DI_TEXT_PLAIN) {
  size_t n = 0;
  di_error* err = di_engine_tokenize(engine, text.data(), text.size(), flags, nullptr, 0, &n);
  if (err && di_error_code(err) != DI_ERR_BUFFER_TOO_SMALL) {
    ADD_FAILURE() << "tokenize: " << di_error_message(err);
    di_error_free(err);
    return {};
  }
  di_error_free(err);
  std::vector<int32_t> ids(n);
  EXPECT_DI_OK(di_engine_tokenize(engine, text.data(), text.size(), flags, ids.data(), ids.size(), &n));
  ids.resize(n);
  return ids;
}

inline std::string detokenize(di_engine* engine, const std::vector<int32_t>& ids, uint32_t flags = 0) {
  std::string text(ids.size() * 64 + 16, '\0');
  size_t n = 0;
  EXPECT_DI_OK(di_engine_detokenize(engine, ids.data(), ids.size(), flags, text.data(), text.size(), &n));
  text.resize(n);
  return text;
}

inline std::vector<int32_t> context_tokens(di_session* s) {
  int64_t len = -1;
  EXPECT_DI_OK(di_session_context_length(s, &len));
  std::vector<int32_t> ids(static_cast<size_t>(len < 0 ? 0 : len));
  size_t n = 0;
  EXPECT_DI_OK(di_session_context_tokens(s, ids.data(), ids.size(), &n));
  ids.resize(n);
  return ids;
}

inline int64_t context_length(di_session* s) {
  int64_t len = -1;
  EXPECT_DI_OK(di_session_context_length(s, &len));
  return len;
}

struct TokenLogprobs {
  float logprob = 1.0f;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
};

inline TokenLogprobs read_logprobs(const di_event* ev, size_t i) {
  TokenLogprobs lp;
  size_t n = 0;
  di_error* err = di_event_logprobs(ev, i, &lp.logprob, nullptr, nullptr, 0, &n);
  if (err) {
    Status s = status(err);
    EXPECT_EQ(s.code, DI_ERR_BUFFER_TOO_SMALL) << s.message;
    lp.top_ids.resize(n);
    lp.top_logprobs.resize(n);
    EXPECT_DI_OK(di_event_logprobs(ev, i, &lp.logprob, lp.top_ids.data(), lp.top_logprobs.data(), n, &n));
  }
  return lp;
}

struct Completion {
  bool finished = false;
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprobs> logprobs;  // one per token when requested
  di_finish_reason reason = DI_FINISH_NONE;
  uint64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, seed = 0;
  Status error;
};

struct Output {
  std::vector<Completion> completions;
  std::vector<int32_t> prompt_tokens;  // of the PROMPT_LOGPROBS event
  std::vector<TokenLogprobs> prompt_logprobs;
  int prompt_logprobs_events = 0;
  int done_events = 0;
  size_t events = 0;
};

inline std::vector<int32_t> event_tokens(const di_event* ev) {
  size_t n = 0;
  di_error* err = di_event_tokens(ev, nullptr, 0, &n);
  if (err) {
    EXPECT_EQ(status(err).code, DI_ERR_BUFFER_TOO_SMALL);
  }
  std::vector<int32_t> ids(n);
  EXPECT_DI_OK(di_event_tokens(ev, ids.data(), ids.size(), &n));
  return ids;
}

inline std::string event_text(const di_event* ev) {
  size_t n = 0;
  di_error* err = di_event_text(ev, nullptr, 0, &n);
  if (err) {
    EXPECT_EQ(status(err).code, DI_ERR_BUFFER_TOO_SMALL);
  }
  std::string text(n, '\0');
  EXPECT_DI_OK(di_event_text(ev, text.data(), text.size(), &n));
  return text;
}

// The borrowed views hold what the copying calls return.
inline void expect_views_match(const di_event* ev, bool with_logprobs) {
  const int32_t* ids = nullptr;
  const char* text = nullptr;
  size_t n_ids = 99, n_text = 99;
  ASSERT_DI_OK(di_event_tokens_view(ev, &ids, &n_ids));
  ASSERT_DI_OK(di_event_text_view(ev, &text, &n_text));
  ASSERT_NE(ids, nullptr);
  ASSERT_NE(text, nullptr);
  EXPECT_EQ(std::vector<int32_t>(ids, ids + n_ids), event_tokens(ev));
  EXPECT_EQ(std::string(text, n_text), event_text(ev));
  const float *lp = nullptr, *top_lp = nullptr;
  const int32_t *ranks = nullptr, *top_ids = nullptr;
  size_t n = 0, k = 0;
  di_error* err = di_event_logprobs_view(ev, &lp, &ranks, &top_ids, &top_lp, &n, &k);
  if (!with_logprobs) {
    EXPECT_EQ(status(err).code, DI_ERR_STATE);
    return;
  }
  ASSERT_PRED_FORMAT1(is_ok, err);
  EXPECT_EQ(n, n_ids);
  for (size_t i = 0; i < n; ++i) {
    TokenLogprobs copy = read_logprobs(ev, i);
    EXPECT_EQ(lp[i], copy.logprob);
    EXPECT_GE(ranks[i], 1);
    ASSERT_LE(copy.top_ids.size(), k);
    for (size_t j = 0; j < k; ++j) {
      if (j < copy.top_ids.size()) {
        EXPECT_EQ(top_ids[i * k + j], copy.top_ids[j]);
        EXPECT_EQ(top_lp[i * k + j], copy.top_logprobs[j]);
      } else {
        EXPECT_EQ(top_ids[i * k + j], -1);
      }
    }
    // The sampled token's rank agrees with the alternatives: rank r means r-1 tokens lie above it.
    if (!copy.top_ids.empty() && ranks[i] <= static_cast<int32_t>(copy.top_ids.size())) {
      EXPECT_EQ(copy.top_ids[static_cast<size_t>(ranks[i] - 1)], ids[i]);
    }
  }
}

// One logprob entry per token of the event: none past the last.
inline void expect_no_logprobs_at(const di_event* ev, size_t i) {
  float lp = 0;
  size_t n = 0;
  EXPECT_DI_CODE(di_event_logprobs(ev, i, &lp, nullptr, nullptr, 0, &n), DI_ERR_INVALID_ARGUMENT) << "logprobs past the event's tokens";
}

// Adds one event to `out` (checks the order: prompt logprobs first, nothing after FINISHED).
inline void collect(const di_event* ev, Output& out, bool with_logprobs) {
  ++out.events;
  di_event_type kind = 0;
  int32_t idx = -1;
  ASSERT_DI_OK(di_event_kind(ev, &kind));
  ASSERT_DI_OK(di_event_completion(ev, &idx));
  ASSERT_GE(idx, 0);
  {
    size_t n_ids = 0;
    const int32_t* ids = nullptr;
    ASSERT_DI_OK(di_event_tokens_view(ev, &ids, &n_ids));
    expect_views_match(ev, kind == DI_EVENT_PROMPT_LOGPROBS || (with_logprobs && kind == DI_EVENT_TOKENS && n_ids > 0));
  }
  if (kind == DI_EVENT_DONE) {
    ++out.done_events;
    for (size_t i = 0; i < out.completions.size(); ++i) EXPECT_TRUE(out.completions[i].finished) << "DONE before completion " << i;
    return;
  }
  ASSERT_EQ(out.done_events, 0) << "an event after DONE";
  if (static_cast<size_t>(idx) >= out.completions.size()) out.completions.resize(idx + 1);
  Completion& c = out.completions[idx];
  ASSERT_FALSE(c.finished) << "an event after completion " << idx << " finished";
  di_finish_reason reason = -1;
  EXPECT_DI_OK(di_event_finish_reason(ev, &reason));
  if (kind == DI_EVENT_PROMPT_LOGPROBS) {
    EXPECT_EQ(idx, 0);
    EXPECT_TRUE(c.tokens.empty()) << "prompt logprobs after output";
    EXPECT_EQ(reason, DI_FINISH_NONE);
    ++out.prompt_logprobs_events;
    out.prompt_tokens = event_tokens(ev);
    for (size_t i = 0; i < out.prompt_tokens.size(); ++i) out.prompt_logprobs.push_back(read_logprobs(ev, i));
    expect_no_logprobs_at(ev, out.prompt_tokens.size());
    return;
  }
  if (kind == DI_EVENT_TOKENS) {
    EXPECT_EQ(reason, DI_FINISH_NONE);
    auto ids = event_tokens(ev);
    c.tokens.insert(c.tokens.end(), ids.begin(), ids.end());
    c.text += event_text(ev);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (with_logprobs) {
        c.logprobs.push_back(read_logprobs(ev, i));
        if (i + 1 == ids.size()) expect_no_logprobs_at(ev, ids.size());
      } else {
        float lp = 0;
        size_t n = 0;
        EXPECT_DI_CODE(di_event_logprobs(ev, i, &lp, nullptr, nullptr, 0, &n), DI_ERR_STATE);
      }
    }
    return;
  }
  ASSERT_EQ(kind, DI_EVENT_FINISHED);
  EXPECT_TRUE(event_tokens(ev).empty());
  c.text += event_text(ev);  // FINISHED events carry no text, but take it if they did
  c.finished = true;
  c.reason = reason;
  EXPECT_NE(reason, DI_FINISH_NONE);
  EXPECT_DI_OK(di_event_usage(ev, &c.prompt_tokens, &c.completion_tokens, &c.cached_tokens));
  EXPECT_DI_OK(di_event_seed(ev, &c.seed));
  di_error* err = nullptr;
  EXPECT_DI_OK(di_event_error(ev, &err));
  c.error = status(err);
  EXPECT_EQ(c.error.code != DI_OK, reason == DI_FINISH_ERROR) << c.error.message;
  EXPECT_EQ(c.completion_tokens, c.tokens.size());
}

// Polls the running generation of `s` until its DONE event (after its n completions finished).
inline Output drain(di_session* s, int n, bool with_logprobs = false) {
  Output out;
  out.completions.resize(n);
  while (out.done_events == 0) {
    di_event* raw = nullptr;
    di_error* err = di_session_poll(s, 60000, &raw);
    if (err) {
      ADD_FAILURE() << "poll: " << di_error_message(err);
      di_error_free(err);
      break;
    }
    if (!raw) {
      ADD_FAILURE() << "no event for 60 s";
      break;
    }
    Event ev(raw);
    collect(ev.get(), out, with_logprobs);
  }
  di_event* none = nullptr;
  EXPECT_DI_CODE(di_session_poll(s, 0, &none), DI_ERR_STATE);
  EXPECT_EQ(none, nullptr);
  return out;
}

// Reads and drops events until the session has none left (the generation is over).
inline void discard(di_session* s) {
  for (;;) {
    di_event* ev = nullptr;
    di_error* err = di_session_poll(s, 60000, &ev);
    if (err) {
      EXPECT_EQ(status(err).code, DI_ERR_STATE);
      return;
    }
    if (!ev) {
      ADD_FAILURE() << "no event for 60 s";
      return;
    }
    di_event_free(ev);
  }
}

// Generates with `sp` and collects everything.
inline Output run(di_session* s, const di_sampling* sp, int n = 1, bool with_logprobs = false) {
  di_error* err = di_session_generate(s, sp);
  if (err) {
    Status st = status(err);
    ADD_FAILURE() << "generate: " << di_code_name(st.code) << ": " << st.message;
    Output none;
    none.completions.resize(n);
    return none;
  }
  return drain(s, n, with_logprobs);
}

// A fresh session on `prompt` (token ids), one generation.
inline Output run_prompt(di_engine* engine, const std::vector<int32_t>& prompt, const di_sampling* sp, int n = 1,
                         bool with_logprobs = false) {
  Session s = make_session(engine);
  EXPECT_DI_OK(di_session_add_tokens(s.get(), prompt.data(), prompt.size()));
  return run(s.get(), sp, n, with_logprobs);
}

}  // namespace abitest
