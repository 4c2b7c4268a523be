// The library inside someone else's process: fork(), many threads reading shared objects, options,
// the load progress callback, the run-time loaded CUDA backend, engine facts and statistics.
#include "abi_helpers.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace {

using namespace abitest;

Config make_config(const char* model = DI_DEMO_MODEL_DIR) {
  di_engine_config* raw = nullptr;
  EXPECT_DI_OK(di_engine_config_create(&raw));
  EXPECT_DI_OK(di_engine_config_set_model_path(raw, model, std::strlen(model)));
  EXPECT_DI_OK(di_engine_config_set_threads(raw, 2));
  EXPECT_DI_OK(di_engine_config_set_max_context(raw, 1024));
  return Config(raw);
}

std::string first_text(di_engine* e, const di_sampling* sp, const char* prompt) {
  Session s = make_session(e);
  EXPECT_DI_OK(di_session_add_text(s.get(), prompt, std::strlen(prompt), DI_TEXT_PLAIN));
  return run(s.get(), sp).completions[0].text;
}

// After fork() the child's engine is closed (its threads are the parent's): every call says so,
// nothing hangs, and the parent goes on generating.
TEST(Fork, ChildSeesClosedEngineParentKeepsServing) {
  Engine e = open_engine(DI_DEMO_MODEL_DIR);
  ASSERT_TRUE(e);
  Sampling sp = seeded(5, 6);
  const std::string before = first_text(e.get(), sp.get(), "import sys");
  Session busy = make_session(e.get());
  ASSERT_DI_OK(di_session_add_text(busy.get(), "def main():", 11, DI_TEXT_PLAIN));
  Sampling slow = seeded(6, 2000);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(slow.get(), 1));
  ASSERT_DI_OK(di_session_generate(busy.get(), slow.get()));  // running while we fork
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child: report through the exit status only (no gtest machinery here).
    int failures = 0;
    auto expect_closed = [&](di_error* err) {
      failures += di_error_code(err) != DI_ERR_CLOSED;
      di_error_free(err);
    };
    di_session* s = nullptr;
    int32_t vocab = 0;
    di_event* ev = nullptr;
    expect_closed(di_session_create(e.get(), &s));
    expect_closed(di_engine_vocab_size(e.get(), &vocab));
    expect_closed(di_session_poll(busy.get(), -1, &ev));  // would wait for ever for the parent's thread
    expect_closed(di_session_generate(busy.get(), slow.get()));
    // Objects without an engine work in the child.
    di_sampling* sp2 = nullptr;
    failures += di_sampling_clone(sp.get(), &sp2) != nullptr;
    di_sampling_free(sp2);
    di_session_free(busy.get());
    di_engine_free(e.get());  // returns: nothing to join here
    _exit(failures == 0 ? 0 : 10 + failures);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died with signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ASSERT_DI_OK(di_session_cancel(busy.get()));
  discard(busy.get());
  EXPECT_EQ(first_text(e.get(), sp.get(), "import sys"), before);
}

// Calls on const handles may run at once from many threads: one sampling object, one event, one
// grammar and one tokenizer shared by 8 threads (run under the sanitizers in CI).
TEST(Threads, ConstObjectsAreSharedByManyThreads) {
  Engine e = open_engine(DI_DEMO_MODEL_DIR);
  ASSERT_TRUE(e);
  Sampling sp = seeded(11, 5);
  di_grammar* g = nullptr;
  ASSERT_DI_OK(di_grammar_compile(e.get(), DI_GRAMMAR_REGEX, "[a-z]+", 6, &g));
  di_tokenizer* tok = nullptr;
  ASSERT_DI_OK(di_engine_tokenizer(e.get(), &tok));
  Session first = make_session(e.get());
  ASSERT_DI_OK(di_session_add_text(first.get(), "x = ", 4, DI_TEXT_PLAIN));
  ASSERT_DI_OK(di_sampling_set_logprobs(sp.get(), 2));
  ASSERT_DI_OK(di_session_generate(first.get(), sp.get()));
  di_event* shared_event = nullptr;
  ASSERT_DI_OK(di_session_poll(first.get(), 60000, &shared_event));
  ASSERT_NE(shared_event, nullptr);
  std::atomic<int> failures{0};
  auto worker = [&](int t) {
    for (int i = 0; i < 20; ++i) {
      float temp = 0;
      int32_t n = 0;
      size_t len = 0;
      const char* text = nullptr;
      const int32_t* ids = nullptr;
      const float *lp = nullptr, *top = nullptr;
      const int32_t *ranks = nullptr, *top_ids = nullptr;
      size_t k = 0;
      failures += di_sampling_get_temperature(sp.get(), &temp) != nullptr;
      failures += di_sampling_get_n(sp.get(), &n) != nullptr;
      failures += di_event_text_view(shared_event, &text, &len) != nullptr;
      failures += di_event_tokens_view(shared_event, &ids, &len) != nullptr;
      failures += di_event_logprobs_view(shared_event, &lp, &ranks, &top_ids, &top, &len, &k) != nullptr;
      int32_t enc[32];
      failures += di_tokenizer_encode(tok, "hello world", 11, DI_TEXT_PLAIN, enc, 32, &len) != nullptr;
      di_matcher* m = nullptr;
      failures += di_matcher_create(g, &m) != nullptr;
      failures += di_matcher_accept_string(m, "abc", 3) != nullptr;
      di_matcher_free(m);
      if (i % 5 == t % 5) {  // and generations that read the same parameters
        Session s = make_session(e.get());
        failures += di_session_add_text(s.get(), "y = ", 4, DI_TEXT_PLAIN) != nullptr;
        failures += !run(s.get(), sp.get(), 1, true).completions[0].finished;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  di_event_free(shared_event);
  discard(first.get());
  di_grammar_free(g);
  di_tokenizer_free(tok);
}

TEST(Options, BelongToTheirEngineAndNameBadKeys) {
  Config cfg = make_config();
  EXPECT_DI_CODE(di_engine_config_set_option(cfg.get(), "no_such_key", 11, "1", 1), DI_ERR_INVALID_ARGUMENT);
  Status st = status(di_engine_config_set_option(cfg.get(), "no_such_key", 11, "1", 1));
  EXPECT_NE(st.message.find("no_such_key"), std::string::npos) << st.message;
  EXPECT_DI_CODE(di_engine_config_set_option(cfg.get(), "graphs", 6, "sometimes", 9), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_engine_config_set_option(cfg.get(), "cuda_device", 11, "-1", 2), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_engine_config_set_option(cfg.get(), nullptr, 3, "1", 1), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_engine_config_set_option(nullptr, "pdl", 3, "1", 1), DI_ERR_INVALID_HANDLE);
  for (const char* kv : {"graphs=0", "pdl=off", "zero_scratch=true", "fp32_weights=1", "cuda_device=0", "batch_invariant=1"}) {
    const std::string s(kv);
    const size_t eq = s.find('=');
    EXPECT_DI_OK(di_engine_config_set_option(cfg.get(), s.data(), eq, s.data() + eq + 1, s.size() - eq - 1)) << kv;
  }
  // CUDA options do not affect a CPU engine; dummy weights build the model from config.json alone.
  ASSERT_DI_OK(di_engine_config_set_device(cfg.get(), DI_DEVICE_CPU));
  ASSERT_DI_OK(di_engine_config_set_option(cfg.get(), "dummy_weights", 13, "1", 1));
  di_engine* e = nullptr;
  ASSERT_DI_OK(di_engine_create(cfg.get(), &e));
  Engine held(e);
  Sampling sp = seeded(1, 4);
  Session s = make_session(e);
  ASSERT_DI_OK(di_session_add_text(s.get(), "a", 1, DI_TEXT_PLAIN));
  EXPECT_TRUE(run(s.get(), sp.get()).completions[0].finished);
}

// The CUDA backend is a module: asking for it where it cannot load names what is missing.
TEST(CudaModule, MissingPiecesAreUnsupportedWithTheirName) {
  Config cfg = make_config();
  ASSERT_DI_OK(di_engine_config_set_device(cfg.get(), DI_DEVICE_CUDA));
  const std::string missing = "/nonexistent/libdeepinfer-cuda.so.0";
  ASSERT_DI_OK(di_engine_config_set_option(cfg.get(), "cuda_module", 11, missing.data(), missing.size()));
  di_engine* e = nullptr;
  Status st = status(di_engine_create(cfg.get(), &e));
  EXPECT_EQ(st.code, DI_ERR_UNSUPPORTED) << st.message;
  EXPECT_NE(st.message.find(missing), std::string::npos) << st.message;
  EXPECT_EQ(e, nullptr);
  // AUTO falls back to the CPU with the same configuration.
  ASSERT_DI_OK(di_engine_config_set_device(cfg.get(), DI_DEVICE_AUTO));
  ASSERT_DI_OK(di_engine_create(cfg.get(), &e));
  di_device device = -1;
  EXPECT_DI_OK(di_engine_device(e, &device));
  EXPECT_EQ(device, DI_DEVICE_CPU);
  di_engine_free(e);
  // The default module (built beside the library when CUDA is) on a machine without a GPU, or no
  // module at all: DI_ERR_UNSUPPORTED naming CUDA, never a crash. (On a GPU machine this loads.)
  Config plain = make_config();
  ASSERT_DI_OK(di_engine_config_set_device(plain.get(), DI_DEVICE_CUDA));
  e = nullptr;
  di_error* err = di_engine_create(plain.get(), &e);
  if (err) {
    Status s = status(err);
    EXPECT_EQ(s.code, DI_ERR_UNSUPPORTED) << s.message;
    EXPECT_NE(s.message.find("CUDA"), std::string::npos) << s.message;
  } else {
    EXPECT_DI_OK(di_engine_device(e, &device));
    EXPECT_EQ(device, DI_DEVICE_CUDA);
    di_engine_free(e);
  }
}

TEST(Progress, ReportsBytesAndCanAbortTheLoad) {
  struct Seen {
    int calls = 0;
    uint64_t last = 0, total = 0;
    bool monotone = true;
    int abort_after = -1;
  };
  auto fn = [](void* user, uint64_t done, uint64_t total) -> int32_t {
    auto* s = static_cast<Seen*>(user);
    s->monotone &= done >= s->last && done <= total;
    s->last = done;
    s->total = total;
    ++s->calls;
    return s->abort_after >= 0 && s->calls > s->abort_after ? 1 : 0;
  };
  Seen seen;
  Config cfg = make_config();
  ASSERT_DI_OK(di_engine_config_set_device(cfg.get(), DI_DEVICE_CPU));
  ASSERT_DI_OK(di_engine_config_set_progress_callback(cfg.get(), fn, &seen));
  di_engine* e = nullptr;
  ASSERT_DI_OK(di_engine_create(cfg.get(), &e));
  di_engine_free(e);
  EXPECT_GT(seen.calls, 10);
  EXPECT_TRUE(seen.monotone);
  EXPECT_GT(seen.total, 1000000u);
  EXPECT_EQ(seen.last, seen.total);  // the last report is the whole checkpoint
  Seen aborting;
  aborting.abort_after = 3;
  ASSERT_DI_OK(di_engine_config_set_progress_callback(cfg.get(), fn, &aborting));
  e = nullptr;
  EXPECT_DI_CODE(di_engine_create(cfg.get(), &e), DI_ERR_CANCELLED);
  EXPECT_EQ(e, nullptr);
  EXPECT_EQ(aborting.calls, 4);
  ASSERT_DI_OK(di_engine_config_set_progress_callback(cfg.get(), nullptr, nullptr));
  ASSERT_DI_OK(di_engine_create(cfg.get(), &e));
  di_engine_free(e);
}

TEST(Facts, ModelInfoStatsAndTheirMisuse) {
  Engine e = open_engine(DI_DEMO_MODEL_DIR);
  ASSERT_TRUE(e);
  int64_t layers = 0, vocab = 0, params = 0, bytes = 0;
  ASSERT_DI_OK(di_engine_model_info(e.get(), DI_MODEL_LAYERS, &layers));
  ASSERT_DI_OK(di_engine_model_info(e.get(), DI_MODEL_VOCAB_SIZE, &vocab));
  ASSERT_DI_OK(di_engine_model_info(e.get(), DI_MODEL_PARAMETERS, &params));
  ASSERT_DI_OK(di_engine_model_info(e.get(), DI_MODEL_WEIGHT_BYTES, &bytes));
  EXPECT_EQ(layers, 6);
  EXPECT_EQ(vocab, 4096);
  EXPECT_GT(params, 9000000);  // the 9.2 M parameter demo model
  EXPECT_LT(params, 12000000);
  EXPECT_EQ(bytes, params * 4);  // fp32 on the CPU
  EXPECT_DI_CODE(di_engine_model_info(e.get(), DI_MODEL_LAYERS, nullptr), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_engine_model_info(e.get(), 0, &layers), DI_ERR_INVALID_ARGUMENT);
  int32_t has = -1;
  EXPECT_DI_OK(di_engine_has_tokenizer(e.get(), &has));
  EXPECT_EQ(has, 1);
  Engine tiny = open_engine(DI_TINY_MODEL_DIR);
  ASSERT_TRUE(tiny);
  EXPECT_DI_OK(di_engine_has_tokenizer(tiny.get(), &has));
  EXPECT_EQ(has, 0);

  auto stat = [&](di_stat key) {
    di_stats* st = nullptr;
    EXPECT_DI_OK(di_engine_stats(e.get(), &st));
    uint64_t v = 0;
    EXPECT_DI_OK(di_stats_get(st, key, &v));
    di_stats_free(st);
    return v;
  };
  const uint64_t steps0 = stat(DI_STAT_STEPS), generated0 = stat(DI_STAT_GENERATED_TOKENS), prompt0 = stat(DI_STAT_PROMPT_TOKENS);
  Sampling sp = seeded(2, 7);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  const auto ids = tokenize(e.get(), "for i in range(10):");
  Output out = run_prompt(e.get(), ids, sp.get(), 1);
  EXPECT_EQ(stat(DI_STAT_GENERATED_TOKENS) - generated0, 7u);
  EXPECT_EQ(stat(DI_STAT_PROMPT_TOKENS) - prompt0, ids.size());
  EXPECT_GE(stat(DI_STAT_STEPS) - steps0, 7u);
  EXPECT_GT(stat(DI_STAT_STATE_BYTES_TOTAL), 0u);
  EXPECT_LE(stat(DI_STAT_STATE_BYTES_USED), stat(DI_STAT_STATE_BYTES_TOTAL));
  EXPECT_EQ(stat(DI_STAT_RUNNING_SEQUENCES), 0u);
  di_stats* st = nullptr;
  EXPECT_DI_CODE(di_engine_stats(e.get(), nullptr), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_engine_stats(nullptr, &st), DI_ERR_INVALID_HANDLE);
  uint64_t v = 0;
  EXPECT_DI_CODE(di_stats_get(nullptr, DI_STAT_STEPS, &v), DI_ERR_INVALID_HANDLE);
  di_stats_free(nullptr);
}

// DONE comes once, last, after the context was updated; a cancelled output joins the context only
// when the session asks for it.
TEST(Done, OncePerGenerationAfterTheContextUpdate) {
  Engine e = open_engine(DI_DEMO_MODEL_DIR);
  ASSERT_TRUE(e);
  Session s = make_session(e.get());
  const auto p = tokenize(e.get(), "class A:");
  ASSERT_DI_OK(di_session_add_tokens(s.get(), p.data(), p.size()));
  Sampling sp = seeded(9, 5, 3);
  ASSERT_DI_OK(di_session_generate(s.get(), sp.get()));
  size_t finished = 0;
  for (;;) {
    di_event* raw = nullptr;
    ASSERT_DI_OK(di_session_poll(s.get(), 60000, &raw));
    ASSERT_NE(raw, nullptr);
    Event ev(raw);
    di_event_type kind = 0;
    ASSERT_DI_OK(di_event_kind(raw, &kind));
    if (kind == DI_EVENT_FINISHED) ++finished;
    if (kind == DI_EVENT_DONE) {
      EXPECT_EQ(finished, 3u);
      EXPECT_GT(context_length(s.get()), static_cast<int64_t>(p.size()));  // already updated
      uint64_t seed = 0;
      EXPECT_DI_OK(di_event_seed(raw, &seed));
      EXPECT_EQ(seed, 9u);
      break;
    }
  }
  di_event* none = nullptr;
  EXPECT_DI_CODE(di_session_poll(s.get(), 0, &none), DI_ERR_STATE);
  EXPECT_DI_CODE(di_session_set_keep_cancelled_output(nullptr, 1), DI_ERR_INVALID_HANDLE);
}

// Tool definitions are described to the model by the library, in one format for every binding.
TEST(Tools, DefinitionsJoinTheChatPromptAndBadOnesAreNamed) {
  Engine e = open_engine(DI_DEMO_MODEL_DIR);
  ASSERT_TRUE(e);
  Session s = make_session(e.get());
  ASSERT_DI_OK(di_session_add_message(s.get(), DI_ROLE_SYSTEM, "Be brief.", 9));
  ASSERT_DI_OK(di_session_add_message(s.get(), DI_ROLE_USER, "Weather in Paris?", 17));
  const int64_t plain = context_length(s.get());
  const std::string tools =
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";
  ASSERT_DI_OK(di_session_set_tools(s.get(), tools.data(), tools.size()));
  const auto with_tools = context_tokens(s.get());
  EXPECT_GT(static_cast<int64_t>(with_tools.size()), plain);
  const std::string text = detokenize(e.get(), with_tools);
  EXPECT_NE(text.find("get_weather"), std::string::npos) << text;
  EXPECT_LT(text.find("Be brief."), text.find("get_weather")) << "after the caller's system messages";
  EXPECT_LT(text.find("get_weather"), text.find("Weather in Paris?")) << "before the conversation";
  Sampling sp = seeded(1, 4);
  EXPECT_TRUE(run(s.get(), sp.get()).completions[0].finished);
  for (const char* bad : {"{", "{}", "[1]", R"([{"type": "function"}])", R"([{"function": {"name": 5}}])",
                          R"([{"type": "retrieval", "function": {"name": "x"}}])"})
    EXPECT_DI_CODE(di_session_set_tools(s.get(), bad, std::strlen(bad)), DI_ERR_INVALID_ARGUMENT) << bad;
  ASSERT_DI_OK(di_session_set_tools(s.get(), nullptr, 0));
  EXPECT_EQ(detokenize(e.get(), context_tokens(s.get())).find("get_weather"), std::string::npos);
  Session raw = make_session(e.get());
  const int32_t one = 5;
  ASSERT_DI_OK(di_session_add_tokens(raw.get(), &one, 1));
  EXPECT_DI_CODE(di_session_set_tools(raw.get(), tools.data(), tools.size()), DI_ERR_STATE);
}

}  // namespace
