// Misuse of the C ABI in the wrong state, through deepinfer.h only: calls while generating or idle,
// sessions polled or freed at the wrong time, engines that fail to open or are freed under their
// sessions, and grammar, tokenizer and matcher handles. The Misuse fixture checks after every test
// that the engine still serves normal generations.
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

// ---------------------------------------------------------------------------------------------
// Calls in the wrong state

TEST_F(Misuse, PollWhenNothingIsGenerating) {
  Session s = make_session(engine());
  di_event* ev = nullptr;
  EXPECT_DI_CODE(di_session_poll(s.get(), 0, &ev), DI_ERR_STATE);
  EXPECT_DI_CODE(di_session_poll(s.get(), 10, &ev), DI_ERR_STATE);
  EXPECT_DI_CODE(di_session_poll(s.get(), -1, &ev), DI_ERR_STATE) << "no wait for ever when nothing runs";
  ASSERT_DI_OK(di_session_add_tokens(s.get(), prompt().data(), prompt().size()));
  Sampling sp = seeded(1, 2);
  run(s.get(), sp.get());  // drains, then checks DI_ERR_STATE
  EXPECT_DI_CODE(di_session_poll(s.get(), -1, &ev), DI_ERR_STATE);
  ASSERT_DI_OK(di_session_reset(s.get()));
  EXPECT_DI_CODE(di_session_poll(s.get(), 0, &ev), DI_ERR_STATE);
  EXPECT_EQ(ev, nullptr);
}

TEST_F(Misuse, GenerateWithAnEmptyContext) {
  Session s = make_session(engine());
  Sampling sp = seeded(1, 2);
  EXPECT_DI_CODE(di_session_generate(s.get(), sp.get()), DI_ERR_INVALID_ARGUMENT);
  di_event* ev = nullptr;
  EXPECT_DI_CODE(di_session_poll(s.get(), 0, &ev), DI_ERR_STATE);
}

TEST_F(Misuse, CallsWhileGeneratingAreStateErrors) {
  Session s = generating(2);
  Sampling sp = seeded(1, 2);
  const int32_t one = 5;
  EXPECT_DI_CODE(di_session_generate(s.get(), sp.get()), DI_ERR_STATE);
  EXPECT_DI_CODE(di_session_add_tokens(s.get(), &one, 1), DI_ERR_STATE);
  EXPECT_DI_CODE(di_session_add_text(s.get(), "hi", 2, 0), DI_ERR_STATE);
  EXPECT_DI_CODE(di_session_add_message(s.get(), DI_ROLE_USER, "hi", 2), DI_ERR_STATE);
  EXPECT_DI_CODE(di_session_reset(s.get()), DI_ERR_STATE);
  EXPECT_DI_CODE(di_session_set_callback(s.get(), [](void*, di_event* e) { di_event_free(e); }, nullptr), DI_ERR_STATE);
  // Reading the context is fine.
  EXPECT_EQ(context_tokens(s.get()), prompt());
  stop(s.get(), 2);
  EXPECT_EQ(context_tokens(s.get()), prompt());
}

TEST_F(Misuse, ChatAndTokenSessionsDoNotMix) {
  const int32_t one = 5;
  Session tokens = make_session(engine());
  ASSERT_DI_OK(di_session_add_tokens(tokens.get(), &one, 1));
  EXPECT_DI_CODE(di_session_add_message(tokens.get(), DI_ROLE_USER, "hi", 2), DI_ERR_STATE);
  EXPECT_DI_CODE(di_session_add_tool_call(tokens.get(), "f", 1, "{}", 2), DI_ERR_STATE);
  Session text = make_session(engine());
  ASSERT_DI_OK(di_session_add_text(text.get(), "hi", 2, 0));
  EXPECT_DI_CODE(di_session_add_message(text.get(), DI_ROLE_SYSTEM, "hi", 2), DI_ERR_STATE);
  Session chat = make_session(engine());
  ASSERT_DI_OK(di_session_add_message(chat.get(), DI_ROLE_USER, "hi", 2));
  EXPECT_DI_CODE(di_session_add_tokens(chat.get(), &one, 1), DI_ERR_STATE);
  EXPECT_DI_CODE(di_session_add_text(chat.get(), "hi", 2, 0), DI_ERR_STATE);
  Session calls = make_session(engine());
  ASSERT_DI_OK(di_session_add_tool_call(calls.get(), "f", 1, "{}", 2));
  EXPECT_DI_CODE(di_session_add_tokens(calls.get(), &one, 1), DI_ERR_STATE);
  // A reset session takes either again.
  ASSERT_DI_OK(di_session_reset(chat.get()));
  EXPECT_DI_OK(di_session_add_tokens(chat.get(), &one, 1));
  ASSERT_DI_OK(di_session_reset(tokens.get()));
  EXPECT_DI_OK(di_session_add_message(tokens.get(), DI_ROLE_USER, "hi", 2));
}

TEST_F(Misuse, CancelWhenIdleHasNoEffect) {
  Session s = make_session(engine());
  EXPECT_DI_OK(di_session_cancel(s.get()));
  ASSERT_DI_OK(di_session_add_tokens(s.get(), prompt().data(), prompt().size()));
  EXPECT_DI_OK(di_session_cancel(s.get()));
  Sampling sp = seeded(2718, 6);
  Output out = run(s.get(), sp.get());
  EXPECT_EQ(out.completions[0].reason, reference_->reason) << "an earlier cancel does not end a later generation";
  EXPECT_EQ(out.completions[0].tokens, reference_->tokens);
}

TEST_F(Misuse, PollWithACallbackIsAStateError) {
  Session s = make_session(engine());
  ASSERT_DI_OK(di_session_set_callback(s.get(), [](void*, di_event* e) { di_event_free(e); }, nullptr));
  di_event* ev = nullptr;
  EXPECT_DI_CODE(di_session_poll(s.get(), 0, &ev), DI_ERR_STATE);
  ASSERT_DI_OK(di_session_set_callback(s.get(), nullptr, nullptr));
}

TEST_F(Misuse, SessionPolledAfterFree) {
  Session s = generating(2);
  di_session* raw = s.release();
  di_event* ev = nullptr;
  ASSERT_DI_OK(di_session_poll(raw, 60000, &ev));
  di_event_free(ev);
  di_session_free(raw);  // cancels the running generation
  EXPECT_DI_CODE(di_session_poll(raw, 0, &ev), DI_ERR_INVALID_HANDLE);
  EXPECT_DI_CODE(di_session_poll(raw, -1, &ev), DI_ERR_INVALID_HANDLE);
  EXPECT_DI_CODE(di_session_cancel(raw), DI_ERR_INVALID_HANDLE);
  di_session_free(raw);
  // Events taken before the free stay valid until freed.
  Session t = generating();
  ASSERT_DI_OK(di_session_poll(t.get(), 60000, &ev));
  ASSERT_NE(ev, nullptr);
  t.reset();
  di_event_type kind = 0;
  EXPECT_DI_OK(di_event_kind(ev, &kind));
  EXPECT_EQ(event_tokens(ev).size(), 1u);
  di_event_free(ev);
}

TEST_F(Misuse, SessionFreedFromACallback) {
  // A callback may only cancel; the session is freed from the test's thread while events arrive.
  std::atomic<int> events{0};
  Session s = make_session(engine());
  ASSERT_DI_OK(di_session_add_tokens(s.get(), prompt().data(), prompt().size()));
  ASSERT_DI_OK(di_session_set_callback(s.get(), [](void* user, di_event* e) {
    ++*static_cast<std::atomic<int>*>(user);
    di_event_free(e);
  }, &events));
  Sampling sp = seeded(1, 1000);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  ASSERT_DI_OK(di_session_generate(s.get(), sp.get()));
  while (events.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  s.reset();
}

// ---------------------------------------------------------------------------------------------
// Engines: creation failures, and sessions that outlive their engine

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("deepinfer_abi_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  void write(const std::string& name, const std::string& content) const {
    std::ofstream(path_ / name, std::ios::binary) << content;
  }
  // The demo model's files, except those in `skip`.
  void copy_demo(std::initializer_list<std::string> skip = {}) const {
    for (const auto& entry : fs::directory_iterator(DI_DEMO_MODEL_DIR)) {
      const std::string name = entry.path().filename().string();
      if (std::find(skip.begin(), skip.end(), name) == skip.end()) fs::copy_file(entry.path(), path_ / name);
    }
  }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

di_code create_code(const std::string& dir, di_device device = DI_DEVICE_CPU) {
  di_engine_config* cfg = nullptr;
  EXPECT_DI_OK(di_engine_config_create(&cfg));
  Config owner(cfg);
  EXPECT_DI_OK(di_engine_config_set_model_path(cfg, dir.data(), dir.size()));
  EXPECT_DI_OK(di_engine_config_set_device(cfg, device));
  di_engine* e = reinterpret_cast<di_engine*>(0x5);
  Status st = status(di_engine_create(cfg, &e));
  if (st.code == DI_OK) {
    di_engine_free(e);
  } else {
    EXPECT_EQ(e, reinterpret_cast<di_engine*>(0x5)) << "out written on failure";
    EXPECT_FALSE(st.message.empty());
  }
  return st.code;
}

TEST_F(Misuse, EngineCreateFailures) {
  {
    di_engine_config* cfg = nullptr;
    ASSERT_DI_OK(di_engine_config_create(&cfg));
    Config owner(cfg);
    di_engine* e = nullptr;
    EXPECT_DI_CODE(di_engine_create(cfg, &e), DI_ERR_INVALID_ARGUMENT) << "no model path";
    EXPECT_EQ(e, nullptr);
  }
  TempDir empty;
  EXPECT_EQ(create_code((empty.path() / "missing").string()), DI_ERR_NOT_FOUND);
  EXPECT_EQ(create_code(empty.path().string()), DI_ERR_NOT_FOUND);
  {
    TempDir d;  // a file, not a directory
    d.write("file", "x");
    EXPECT_EQ(create_code((d.path() / "file").string()), DI_ERR_NOT_FOUND);
  }
  {
    TempDir d;
    d.copy_demo({"config.json"});
    EXPECT_EQ(create_code(d.path().string()), DI_ERR_NOT_FOUND) << "no config.json";
    d.write("config.json", "{ this is not json");
    EXPECT_EQ(create_code(d.path().string()), DI_ERR_MODEL_FORMAT) << "broken config.json";
    d.write("config.json", "[1, 2, 3]");
    EXPECT_EQ(create_code(d.path().string()), DI_ERR_MODEL_FORMAT) << "config.json not an object";
  }
  {
    TempDir d;
    d.copy_demo({"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json"});
    EXPECT_EQ(create_code(d.path().string()), DI_ERR_NOT_FOUND) << "no weights";
    d.write("model.safetensors", "garbage");
    EXPECT_EQ(create_code(d.path().string()), DI_ERR_MODEL_FORMAT) << "weights too short";
    d.write("model.safetensors", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}");
    EXPECT_EQ(create_code(d.path().string()), DI_ERR_MODEL_FORMAT) << "header length past the end";
    d.write("model.safetensors", std::string("\x02\0\0\0\0\0\0\0{}", 10));
    EXPECT_EQ(create_code(d.path().string()), DI_ERR_MODEL_FORMAT) << "no tensors";
  }
  {
    TempDir d;
    d.copy_demo({"model-00002-of-00002.safetensors"});
    EXPECT_EQ(create_code(d.path().string()), DI_ERR_NOT_FOUND) << "a shard listed in the index is missing";
  }
  {
    TempDir d;
    d.copy_demo({"tokenizer.json"});
    d.write("tokenizer.json", "{\"model\": ");
    EXPECT_EQ(create_code(d.path().string()), DI_ERR_MODEL_FORMAT) << "broken tokenizer.json";
    d.write("tokenizer.json", "{}");
    EXPECT_EQ(create_code(d.path().string()), DI_ERR_MODEL_FORMAT) << "tokenizer.json without a model";
  }
  {
    TempDir d;
    d.copy_demo({"generation_config.json"});
    d.write("generation_config.json", "not json");
    EXPECT_EQ(create_code(d.path().string()), DI_ERR_MODEL_FORMAT) << "broken generation_config.json";
    d.write("generation_config.json", "{\"eos_token_id\": 999999}");
    EXPECT_EQ(create_code(d.path().string()), DI_ERR_MODEL_FORMAT) << "EOS outside the vocabulary";
  }
  // CUDA where this build or machine has none: refused with a reason, or served.
  const di_code cuda = create_code(DI_DEMO_MODEL_DIR, DI_DEVICE_CUDA);
  EXPECT_TRUE(cuda == DI_OK || cuda == DI_ERR_UNSUPPORTED || cuda == DI_ERR_BACKEND) << di_code_name(cuda);
}

TEST_F(Misuse, SessionsOfAFreedEngineAreClosed) {
  Engine other = open_engine(DI_DEMO_MODEL_DIR);
  ASSERT_TRUE(other);
  const auto p = tokenize(other.get(), kPrompt);
  Session idle = make_session(other.get());
  ASSERT_DI_OK(di_session_add_tokens(idle.get(), p.data(), p.size()));
  Session chat = make_session(other.get());
  ASSERT_DI_OK(di_session_add_message(chat.get(), DI_ROLE_USER, "hi", 2));
  Session busy = make_session(other.get());
  ASSERT_DI_OK(di_session_add_tokens(busy.get(), p.data(), p.size()));
  Sampling sp = seeded(1, 1000, 3);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  ASSERT_DI_OK(di_session_generate(busy.get(), sp.get()));

  other.reset();  // di_engine_free

  // The running generation ended: every completion finishes as cancelled, then DI_ERR_CLOSED.
  Output out;
  out.completions.resize(3);
  while (out.done_events == 0) {
    di_event* raw = nullptr;
    ASSERT_DI_OK(di_session_poll(busy.get(), 60000, &raw));
    ASSERT_NE(raw, nullptr);
    Event ev(raw);
    collect(raw, out, false);
  }
  for (const auto& c : out.completions) EXPECT_EQ(c.reason, DI_FINISH_CANCELLED);
  di_event* ev = nullptr;
  EXPECT_DI_CODE(di_session_poll(busy.get(), 0, &ev), DI_ERR_CLOSED);
  EXPECT_DI_CODE(di_session_poll(busy.get(), -1, &ev), DI_ERR_CLOSED);

  // Every call of an idle session reports DI_ERR_CLOSED (cancel has nothing to do).
  for (di_session* s : {idle.get(), chat.get(), busy.get()}) {
    std::vector<Call> calls = session_calls(s, sp.get());
    for (const auto& c : calls) {
      if (c.name == "di_session_cancel") {
        EXPECT_DI_OK(c.fn());
      } else {
        EXPECT_DI_CODE(c.fn(), DI_ERR_CLOSED) << c.name;
      }
    }
  }
  // New sessions cannot be made on the freed engine handle.
  di_session* s = nullptr;
  EXPECT_DI_CODE(di_session_create(nullptr, &s), DI_ERR_INVALID_HANDLE);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Structured outputs: grammar, tokenizer and matcher handles

std::vector<Call> grammar_family_calls(di_engine* e, di_tokenizer* t, di_grammar* g, di_matcher* m, di_sampling* sp) {
  static di_grammar* out_g;
  static di_tokenizer* out_t;
  static di_matcher* out_m;
  static int32_t i32, ids[64];
  static char text[256];
  static size_t len;
  static uint32_t words[256];
  static const int32_t one = 5, eos = 1;
  return {
      {"di_grammar_compile", [=] { return di_grammar_compile(e, DI_GRAMMAR_REGEX, "a+", 2, &out_g); }},
      {"di_grammar_compile_options", [=] { return di_grammar_compile_options(e, DI_GRAMMAR_REGEX, "a+", 2, 0, 0, &out_g); }},
      {"di_engine_tokenizer", [=] { return di_engine_tokenizer(e, &out_t); }},
      {"di_tokenizer_vocab_size", [=] { return di_tokenizer_vocab_size(t, &i32); }},
      {"di_tokenizer_encode", [=] { return di_tokenizer_encode(t, "hi", 2, DI_TEXT_PLAIN, ids, 64, &len); }},
      {"di_tokenizer_decode", [=] { return di_tokenizer_decode(t, &one, 1, 0, text, sizeof text, &len); }},
      {"di_grammar_compile_for_tokenizer",
       [=] { return di_grammar_compile_for_tokenizer(t, 0, &eos, 1, DI_GRAMMAR_REGEX, "a+", 2, 0, 0, &out_g); }},
      {"di_sampling_set_grammar", [=] { return di_sampling_set_grammar(sp, g); }},
      {"di_matcher_create", [=] { return di_matcher_create(g, &out_m); }},
      {"di_matcher_accept_token", [=] { return di_matcher_accept_token(m, one); }},
      {"di_matcher_accept_string", [=] { return di_matcher_accept_string(m, "a", 1); }},
      {"di_matcher_rollback", [=] { return di_matcher_rollback(m, 0); }},
      {"di_matcher_reset", [=] { return di_matcher_reset(m); }},
      {"di_matcher_fill_mask", [=] { return di_matcher_fill_mask(m, words, 256, &len); }},
      {"di_matcher_can_end", [=] { return di_matcher_can_end(m, &i32); }},
      {"di_matcher_is_terminated", [=] { return di_matcher_is_terminated(m, &i32); }},
  };
}

TEST_F(Misuse, GrammarTokenizerAndMatcherHandles) {
  Sampling sp = seeded(1, 2);
  // Every call that takes one of these handles rejects NULL...
  for (const auto& c : grammar_family_calls(nullptr, nullptr, nullptr, nullptr, nullptr))
    EXPECT_DI_CODE(c.fn(), DI_ERR_INVALID_HANDLE) << c.name << " with NULL handles";
  // ...and freed ones, while freeing twice is harmless.
  di_grammar* g = nullptr;
  di_tokenizer* t = nullptr;
  di_matcher* m = nullptr;
  ASSERT_DI_OK(di_grammar_compile(engine(), DI_GRAMMAR_REGEX, "[a-z]+", 6, &g));
  ASSERT_DI_OK(di_engine_tokenizer(engine(), &t));
  ASSERT_DI_OK(di_matcher_create(g, &m));
  di_grammar_free(g);
  di_tokenizer_free(t);
  di_matcher_free(m);
  di_grammar_free(g);
  di_tokenizer_free(t);
  di_matcher_free(m);
  di_grammar_free(nullptr);
  di_tokenizer_free(nullptr);
  di_matcher_free(nullptr);
  for (const auto& c : grammar_family_calls(engine(), t, g, m, sp.get())) {
    if (c.name == "di_grammar_compile" || c.name == "di_grammar_compile_options" || c.name == "di_engine_tokenizer") continue;
    EXPECT_DI_CODE(c.fn(), DI_ERR_INVALID_HANDLE) << c.name << " with freed handles";
  }
  // A handle of another type.
  EXPECT_DI_CODE(di_matcher_create(reinterpret_cast<di_grammar*>(sp.get()), &m), DI_ERR_INVALID_HANDLE);
  int32_t size = 0;
  EXPECT_DI_CODE(di_tokenizer_vocab_size(reinterpret_cast<di_tokenizer*>(engine()), &size), DI_ERR_INVALID_HANDLE);
}

TEST_F(Misuse, BadGrammarsFailAtCompileAndNameTheProblem) {
  di_grammar* g = nullptr;
  struct Bad {
    di_grammar_kind kind;
    std::string spec;
    di_code code;
    std::string mention;
  };
  for (const Bad& b : std::vector<Bad>{
           {DI_GRAMMAR_REGEX, "(ab", DI_ERR_GRAMMAR, ""},
           {DI_GRAMMAR_JSON_SCHEMA, "{not json", DI_ERR_GRAMMAR, ""},
           {DI_GRAMMAR_JSON_SCHEMA, R"({"type": "array", "contains": {}, "maxContains": 2})", DI_ERR_GRAMMAR, "maxContains"},
           {DI_GRAMMAR_EBNF, "root ::= undefined", DI_ERR_GRAMMAR, "undefined"},
       }) {
    di_error* err = di_grammar_compile(engine(), b.kind, b.spec.data(), b.spec.size(), &g);
    ASSERT_NE(err, nullptr) << b.spec;
    EXPECT_EQ(di_error_code(err), b.code) << di_error_message(err);
    EXPECT_NE(std::string(di_error_message(err)).find(b.mention), std::string::npos) << di_error_message(err);
    di_error_free(err);
  }
  EXPECT_DI_CODE(di_grammar_compile(engine(), 42, "a", 1, &g), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_grammar_compile_options(engine(), DI_GRAMMAR_REGEX, "a", 1, 0x80, 0, &g), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_grammar_compile(engine(), DI_GRAMMAR_REGEX, nullptr, 3, &g), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_grammar_compile(engine(), DI_GRAMMAR_REGEX, "a", 1, nullptr), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_tokenizer_create("/nonexistent/tokenizer.json", 27, nullptr), DI_ERR_INVALID_ARGUMENT);
  di_tokenizer* t = nullptr;
  EXPECT_DI_CODE(di_tokenizer_create("/nonexistent/tokenizer.json", 27, &t), DI_ERR_NOT_FOUND);
  // A matcher refuses what the grammar does not allow, and keeps its state.
  ASSERT_DI_OK(di_grammar_compile(engine(), DI_GRAMMAR_REGEX, "ab", 2, &g));
  di_matcher* m = nullptr;
  ASSERT_DI_OK(di_matcher_create(g, &m));
  EXPECT_DI_CODE(di_matcher_accept_string(m, "b", 1), DI_ERR_INVALID_ARGUMENT);
  ASSERT_DI_OK(di_matcher_accept_string(m, "a", 1));
  EXPECT_DI_CODE(di_matcher_rollback(m, 2), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_matcher_accept_token(m, -1), DI_ERR_INVALID_ARGUMENT);
  ASSERT_DI_OK(di_matcher_accept_string(m, "b", 1));
  di_matcher_free(m);
  di_grammar_free(g);
}
