// The C ABI's behaviour across turns and threads, through deepinfer.h only: multi-turn sessions,
// chat, cancellation, concurrency, callbacks, limits, grammars shared by engines, tokenizer-less models.
#include "demo_fixture.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

namespace {

using namespace abitest;

// ---------------------------------------------------------------------------------------------
// Sessions across turns

TEST_F(Demo, SecondTurnReusesStateAndMatchesAFreshSession) {
  Session s = make_session(engine());
  const auto p = prompt();
  ASSERT_DI_OK(di_session_add_tokens(s.get(), p.data(), p.size()));
  Sampling first = seeded(21, 10);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(first.get(), 1));
  Output t1 = run(s.get(), first.get());
  EXPECT_EQ(t1.completions[0].cached_tokens, 0u);
  const auto follow = tokenize(engine(), " Then she went home.");
  ASSERT_DI_OK(di_session_add_tokens(s.get(), follow.data(), follow.size()));
  const auto full = context_tokens(s.get());
  ASSERT_EQ(full.size(), p.size() + 10 + follow.size());

  Sampling second = seeded(22, 10);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(second.get(), 1));
  Output t2 = run(s.get(), second.get());
  const Completion& c = t2.completions[0];
  EXPECT_EQ(c.prompt_tokens, full.size());
  EXPECT_GT(c.cached_tokens, 0u);
  EXPECT_LT(c.cached_tokens, full.size());
  EXPECT_GE(c.cached_tokens, p.size());

  Output fresh = run_prompt(engine(), full, second.get());
  EXPECT_EQ(fresh.completions[0].cached_tokens, 0u);
  expect_same(c, fresh.completions[0], "second turn vs a fresh session");
}

// A session whose kept state was dropped (the engine needed the room) recomputes it: same output.
TEST(DemoEngines, EvictedSessionStateIsRecomputed) {
  EngineOptions o;
  o.max_sequences = 2;
  Engine e = open_engine(DI_DEMO_MODEL_DIR, o);
  ASSERT_TRUE(e);
  const auto p = tokenize(e.get(), kPrompt);
  Session s = make_session(e.get());
  ASSERT_DI_OK(di_session_add_tokens(s.get(), p.data(), p.size()));
  Sampling sp = seeded(31, 6);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  run(s.get(), sp.get());
  // Two completions elsewhere need both state slots.
  Sampling two = seeded(32, 6, 2);
  run_prompt(e.get(), tokenize(e.get(), "The dog ran"), two.get(), 2);
  const auto more = tokenize(e.get(), " The end.");
  ASSERT_DI_OK(di_session_add_tokens(s.get(), more.data(), more.size()));
  const auto full = context_tokens(s.get());
  Output again = run(s.get(), sp.get());
  EXPECT_EQ(again.completions[0].cached_tokens, 0u);
  Output fresh = run_prompt(e.get(), full, sp.get());
  expect_same(again.completions[0], fresh.completions[0], "after eviction vs a fresh session");
}

TEST_F(Demo, ResetEmptiesTheContext) {
  Session s = make_session(engine());
  const auto p = prompt();
  ASSERT_DI_OK(di_session_add_tokens(s.get(), p.data(), p.size()));
  Sampling sp = seeded(41, 6);
  Output a = run(s.get(), sp.get());
  ASSERT_DI_OK(di_session_reset(s.get()));
  EXPECT_EQ(context_length(s.get()), 0);
  // After a reset the session is as new: the same prompt gives the same output, nothing cached.
  ASSERT_DI_OK(di_session_add_tokens(s.get(), p.data(), p.size()));
  Output b = run(s.get(), sp.get());
  EXPECT_EQ(b.completions[0].cached_tokens, 0u);
  expect_same(a.completions[0], b.completions[0], "after reset");
}

// ---------------------------------------------------------------------------------------------
// Chat

TEST_F(Demo, ChatSessionEncodesMessagesAndReusesState) {
  const auto bos = tokenize(engine(), "<｜begin▁of▁sentence｜>", DI_TEXT_SPECIAL);
  ASSERT_EQ(bos.size(), 1u);
  Session s = make_session(engine());
  EXPECT_EQ(context_length(s.get()), 0);
  const std::string system = "You are a storyteller.", user = "Tell me about a cat.";
  ASSERT_DI_OK(di_session_add_message(s.get(), DI_ROLE_SYSTEM, system.data(), system.size()));
  const int64_t after_system = context_length(s.get());
  EXPECT_GT(after_system, 1);
  ASSERT_DI_OK(di_session_add_message(s.get(), DI_ROLE_USER, user.data(), user.size()));
  const auto ctx1 = context_tokens(s.get());
  EXPECT_GT(static_cast<int64_t>(ctx1.size()), after_system);
  EXPECT_EQ(ctx1[0], bos[0]);
  const std::string rendered = detokenize(engine(), ctx1);
  EXPECT_NE(rendered.find(system), std::string::npos) << rendered;
  EXPECT_NE(rendered.find("<｜User｜>" + user), std::string::npos) << rendered;

  Sampling sp = seeded(51, 12);
  Output t1 = run(s.get(), sp.get());
  const Completion& reply = t1.completions[0];
  EXPECT_GT(reply.prompt_tokens, ctx1.size()) << "the assistant prompt is added";
  const auto ctx2 = context_tokens(s.get());
  ASSERT_GT(ctx2.size(), ctx1.size());
  EXPECT_TRUE(std::equal(ctx1.begin(), ctx1.end(), ctx2.begin()));
  EXPECT_NE(detokenize(engine(), ctx2).find("<｜Assistant｜>" + reply.text), std::string::npos);

  const std::string user2 = "And then?";
  ASSERT_DI_OK(di_session_add_message(s.get(), DI_ROLE_USER, user2.data(), user2.size()));
  const auto ctx3 = context_tokens(s.get());
  Sampling sp2 = seeded(52, 8);
  Output t2 = run(s.get(), sp2.get());
  EXPECT_GT(t2.completions[0].cached_tokens, 0u) << "the second turn reuses the first turn's state";

  // A fresh chat session given the same transcript encodes the same context and replies the same.
  Session f = make_session(engine());
  ASSERT_DI_OK(di_session_add_message(f.get(), DI_ROLE_SYSTEM, system.data(), system.size()));
  ASSERT_DI_OK(di_session_add_message(f.get(), DI_ROLE_USER, user.data(), user.size()));
  ASSERT_DI_OK(di_session_add_message(f.get(), DI_ROLE_ASSISTANT, reply.text.data(), reply.text.size()));
  ASSERT_DI_OK(di_session_add_message(f.get(), DI_ROLE_USER, user2.data(), user2.size()));
  EXPECT_EQ(context_tokens(f.get()), ctx3);
  Output t2f = run(f.get(), sp2.get());
  expect_same(t2.completions[0], t2f.completions[0], "second chat turn vs a fresh chat session");
}

TEST_F(Demo, ChatSessionWithToolCalls) {
  Session s = make_session(engine());
  const std::string user = "What is the weather in Paris?";
  ASSERT_DI_OK(di_session_add_message(s.get(), DI_ROLE_USER, user.data(), user.size()));
  const int64_t n1 = context_length(s.get());
  const std::string name = "get_weather", args = R"({"city": "Paris"})";
  ASSERT_DI_OK(di_session_add_tool_call(s.get(), name.data(), name.size(), args.data(), args.size()));
  const int64_t n2 = context_length(s.get());
  EXPECT_GT(n2, n1);
  ASSERT_DI_OK(di_session_add_tool_call(s.get(), "get_time", 8, "{}", 2));  // same assistant message
  const int64_t n3 = context_length(s.get());
  EXPECT_GT(n3, n2);
  const std::string result = "sunny, 21 C";
  ASSERT_DI_OK(di_session_add_message(s.get(), DI_ROLE_TOOL, result.data(), result.size()));
  EXPECT_GT(context_length(s.get()), n3);
  const std::string rendered = detokenize(engine(), context_tokens(s.get()));
  EXPECT_NE(rendered.find("<｜tool▁calls▁begin｜>"), std::string::npos) << rendered;
  EXPECT_NE(rendered.find(name), std::string::npos);
  EXPECT_NE(rendered.find(args), std::string::npos);
  EXPECT_NE(rendered.find("<｜tool▁output▁begin｜>" + result), std::string::npos) << rendered;
  Sampling sp = seeded(61, 8);
  Output out = run(s.get(), sp.get());
  EXPECT_TRUE(out.completions[0].finished);
  EXPECT_GE(out.completions[0].tokens.size(), 1u);
}

// ---------------------------------------------------------------------------------------------
// Cancellation, concurrency, callbacks

TEST_F(Demo, CancelFromAnotherThread) {
  Session s = make_session(engine());
  const auto p = prompt();
  ASSERT_DI_OK(di_session_add_tokens(s.get(), p.data(), p.size()));
  Sampling sp = seeded(71, 900, 2);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  ASSERT_DI_OK(di_session_generate(s.get(), sp.get()));
  std::atomic<bool> first_token{false};
  std::thread canceller([&] {
    while (!first_token.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_DI_OK(di_session_cancel(s.get()));
  });
  Output out;
  out.completions.resize(2);
  while (out.done_events == 0) {
    di_event* raw = nullptr;
    ASSERT_DI_OK(di_session_poll(s.get(), 60000, &raw));
    ASSERT_NE(raw, nullptr);
    Event ev(raw);
    collect(ev.get(), out, false);
    di_event_type kind = 0;
    ASSERT_DI_OK(di_event_kind(ev.get(), &kind));
    if (kind == DI_EVENT_TOKENS) first_token = true;
  }
  canceller.join();
  for (const auto& c : out.completions) {
    EXPECT_EQ(c.reason, DI_FINISH_CANCELLED);
    EXPECT_LT(c.tokens.size(), 900u);
  }
  // A cancelled output does not join the context; the session and engine keep working.
  EXPECT_EQ(context_tokens(s.get()), p);
  Sampling again = seeded(72, 4);
  Output next = run(s.get(), again.get());
  EXPECT_TRUE(next.completions[0].finished);
  EXPECT_NE(next.completions[0].reason, DI_FINISH_CANCELLED);
}

TEST_F(Demo, CancelFromTheCallback) {
  struct State {
    di_session* session = nullptr;
    std::mutex mu;
    std::condition_variable cv;
    Output out;
  } st;
  st.out.completions.resize(3);
  Session s = make_session(engine());
  st.session = s.get();
  const auto p = prompt();
  ASSERT_DI_OK(di_session_add_tokens(s.get(), p.data(), p.size()));
  ASSERT_DI_OK(di_session_set_callback(
      s.get(),
      [](void* user, di_event* ev) {
        auto* st = static_cast<State*>(user);
        EXPECT_DI_OK(di_session_cancel(st->session));  // the one session call a callback may make
        std::lock_guard lock(st->mu);
        collect(ev, st->out, false);
        di_event_free(ev);
        st->cv.notify_all();
      },
      &st));
  Sampling sp = seeded(73, 900, 3);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  ASSERT_DI_OK(di_session_generate(s.get(), sp.get()));
  std::unique_lock lock(st.mu);
  ASSERT_TRUE(st.cv.wait_for(lock, std::chrono::seconds(60), [&] { return st.out.done_events == 1; }));
  for (const auto& c : st.out.completions) {
    EXPECT_EQ(c.reason, DI_FINISH_CANCELLED);
    EXPECT_LT(c.tokens.size(), 900u);
  }
}

// More completions than the engine has sequences: they take turns.
TEST(DemoEngines, MoreCompletionsThanSequences) {
  EngineOptions o;
  o.max_sequences = 3;
  Engine e = open_engine(DI_DEMO_MODEL_DIR, o);
  ASSERT_TRUE(e);
  const auto ids = tokenize(e.get(), kPrompt);
  Sampling sp = seeded(9, 3, 10);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  Output out = run_prompt(e.get(), ids, sp.get(), 10);
  ASSERT_EQ(out.completions.size(), 10u);
  Engine roomy = open_engine(DI_DEMO_MODEL_DIR);
  ASSERT_TRUE(roomy);
  Output ref = run_prompt(roomy.get(), ids, sp.get(), 10);
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(out.completions[c].reason, DI_FINISH_LENGTH);
    expect_same(out.completions[c], ref.completions[c], "completion " + std::to_string(c));
  }
}

TEST_F(Demo, ManyThreadsWithTheirOwnSessions) {
  constexpr int kThreads = 8;
  std::vector<Completion> alone(kThreads), together(kThreads);
  auto job = [&](int i, Completion& out) {
    Session s = make_session(engine());
    const std::string text = kOtherPrompts[i % kOtherPrompts.size()];
    EXPECT_DI_OK(di_session_add_text(s.get(), text.data(), text.size(), DI_TEXT_PLAIN));
    Sampling sp = seeded(500 + i, 8 + i);
    Output o = run(s.get(), sp.get());
    if (!o.completions.empty()) out = o.completions[0];
  };
  for (int i = 0; i < kThreads; ++i) job(i, alone[i]);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(job, i, std::ref(together[i]));
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_TRUE(together[i].finished) << i;
    expect_same(together[i], alone[i], "thread " + std::to_string(i));
  }
}

TEST_F(Demo, CallbackReceivesTheEvents) {
  struct Collector {
    std::mutex mu;
    std::condition_variable cv;
    Output out;
    std::thread::id thread;
  } col;
  col.out.completions.resize(2);
  auto fn = [](void* user, di_event* ev) {
    auto* c = static_cast<Collector*>(user);
    std::lock_guard lock(c->mu);
    c->thread = std::this_thread::get_id();
    collect(ev, c->out, false);
    di_event_free(ev);
    c->cv.notify_all();
  };
  Session s = make_session(engine());
  const auto p = prompt();
  ASSERT_DI_OK(di_session_add_tokens(s.get(), p.data(), p.size()));
  ASSERT_DI_OK(di_session_set_callback(s.get(), fn, &col));
  Sampling sp = seeded(81, 10, 2);
  ASSERT_DI_OK(di_session_generate(s.get(), sp.get()));
  {
    std::unique_lock lock(col.mu);
    ASSERT_TRUE(col.cv.wait_for(lock, std::chrono::seconds(60), [&] { return col.out.done_events == 1; }));
    EXPECT_NE(col.thread, std::this_thread::get_id());
  }
  Output polled = run_prompt(engine(), p, sp.get(), 2);
  for (int c = 0; c < 2; ++c) expect_same(col.out.completions[c], polled.completions[c], "callback vs poll");
  // Back to polling once the generation is over.
  for (int tries = 0;; ++tries) {
    Status st = status(di_session_set_callback(s.get(), nullptr, nullptr));
    if (st.code == DI_OK) break;
    ASSERT_EQ(st.code, DI_ERR_STATE) << st.message;
    ASSERT_LT(tries, 10000);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Output next = run(s.get(), sp.get(), 2);
  EXPECT_TRUE(next.completions[1].finished);
}

TEST_F(Demo, LogCallbackReceivesEngineMessages) {
  struct Log {
    std::mutex mu;
    std::vector<std::pair<int32_t, std::string>> lines;
  } log;
  di_set_log_callback(
      [](void* user, int32_t level, const char* message, size_t len) {
        auto* l = static_cast<Log*>(user);
        std::lock_guard lock(l->mu);
        l->lines.emplace_back(level, std::string(message, len));
      },
      &log);
  ASSERT_DI_OK(di_set_log_level(DI_LOG_INFO));
  { Engine e = open_engine(DI_DEMO_MODEL_DIR); }
  ASSERT_DI_OK(di_set_log_level(DI_LOG_OFF));
  size_t seen = 0;
  {
    std::lock_guard lock(log.mu);
    seen = log.lines.size();
    EXPECT_GT(seen, 0u);
    for (auto& [level, text] : log.lines) {
      EXPECT_GE(level, DI_LOG_INFO);
      EXPECT_FALSE(text.empty());
    }
  }
  { Engine e = open_engine(DI_DEMO_MODEL_DIR); }
  {
    std::lock_guard lock(log.mu);
    EXPECT_EQ(log.lines.size(), seen) << "DI_LOG_OFF drops everything";
  }
  di_set_log_callback(nullptr, nullptr);
  ASSERT_DI_OK(di_set_log_level(DI_LOG_WARN));
}

// ---------------------------------------------------------------------------------------------
// Limits

TEST(DemoEngines, ContextLimitEndsGenerationWithLength) {
  EngineOptions o;
  o.max_context = 64;
  Engine e = open_engine(DI_DEMO_MODEL_DIR, o);
  ASSERT_TRUE(e);
  int64_t max_context = 0;
  ASSERT_DI_OK(di_engine_max_context(e.get(), &max_context));
  EXPECT_EQ(max_context, 64);
  std::vector<int32_t> p(60, 300);
  Sampling sp = seeded(91, 100);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  const Completion c = run_prompt(e.get(), p, sp.get()).completions[0];
  EXPECT_EQ(c.reason, DI_FINISH_LENGTH);
  EXPECT_GE(c.tokens.size(), 1u);
  EXPECT_LE(p.size() + c.tokens.size(), 64u);
  // A prompt that leaves no room is refused.
  Session s = make_session(e.get());
  std::vector<int32_t> full(64, 300);
  ASSERT_DI_OK(di_session_add_tokens(s.get(), full.data(), full.size()));
  EXPECT_DI_CODE(di_session_generate(s.get(), sp.get()), DI_ERR_CAPACITY);
}

// The state memory bounds a sequence too: a prompt that cannot fit is refused, and a generation
// that reaches the limit ends with DI_FINISH_LENGTH.
TEST(DemoEngines, StateMemoryLimitsASequence) {
  const BlockSize block = demo_block_size();
  ASSERT_GT(block.bytes, 0);
  EngineOptions o;
  o.state_memory = block.memory_for(1);
  Engine e = open_engine(DI_DEMO_MODEL_DIR, o);
  ASSERT_TRUE(e);
  int64_t cap = 0;
  ASSERT_DI_OK(di_engine_capacity_tokens(e.get(), &cap));
  ASSERT_EQ(cap, block.tokens);
  Sampling sp = seeded(92, 100);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  Session s = make_session(e.get());
  std::vector<int32_t> too_long(static_cast<size_t>(cap), 300);
  ASSERT_DI_OK(di_session_add_tokens(s.get(), too_long.data(), too_long.size()));
  EXPECT_DI_CODE(di_session_generate(s.get(), sp.get()), DI_ERR_CAPACITY);
  std::vector<int32_t> p(static_cast<size_t>(cap) - 20, 300);
  const Completion c = run_prompt(e.get(), p, sp.get()).completions[0];
  EXPECT_EQ(c.reason, DI_FINISH_LENGTH);
  EXPECT_GE(c.tokens.size(), 1u);
  EXPECT_LE(p.size() + c.tokens.size(), static_cast<size_t>(cap) + 1);
}

// ---------------------------------------------------------------------------------------------
// A grammar is bound to a vocabulary, not to the engine that compiled it: another engine with the
// same tokenizer, vocabulary size and end-of-sequence tokens generates with it, and so does one
// compiled with di_grammar_compile_for_tokenizer for that vocabulary; another vocabulary is refused
// at di_session_generate.
TEST(DemoEngines, GrammarsServeEveryEngineOfTheirVocabulary) {
  Engine a = open_engine(DI_DEMO_MODEL_DIR), b = open_engine(DI_DEMO_MODEL_DIR);
  ASSERT_TRUE(a && b);
  const char* spec = "(once|one day) [a-z ]{5,40}\\.";
  auto matches = [&](const std::string& text) {
    return (text.rfind("once ", 0) == 0 || text.rfind("one day ", 0) == 0) && !text.empty() && text.back() == '.' &&
           text.find_first_not_of("abcdefghijklmnopqrstuvwxyz .") == std::string::npos;
  };
  di_grammar* from_a = nullptr;
  ASSERT_DI_OK(di_grammar_compile(a.get(), DI_GRAMMAR_REGEX, spec, std::strlen(spec), &from_a));
  Sampling sp = seeded(3, 60);
  ASSERT_DI_OK(di_sampling_set_grammar(sp.get(), from_a));
  di_grammar_free(from_a);
  Output out = run_prompt(b.get(), tokenize(b.get(), kPrompt), sp.get());
  EXPECT_TRUE(matches(out.completions[0].text)) << out.completions[0].text;

  di_tokenizer* tok = nullptr;
  ASSERT_DI_OK(di_engine_tokenizer(b.get(), &tok));
  int32_t width = 0, eos[4];
  size_t n_eos = 0;
  ASSERT_DI_OK(di_engine_vocab_size(b.get(), &width));
  ASSERT_DI_OK(di_engine_eos_tokens(b.get(), eos, 4, &n_eos));
  di_grammar* for_tokenizer = nullptr;
  ASSERT_DI_OK(di_grammar_compile_for_tokenizer(tok, width, eos, n_eos, DI_GRAMMAR_REGEX, spec, std::strlen(spec), 0, 0, &for_tokenizer));
  // Compiling the same spec again hits the tokenizer's cached compiler (no vocabulary rebuilt).
  di_grammar* again = nullptr;
  ASSERT_DI_OK(di_grammar_compile_for_tokenizer(tok, width, eos, n_eos, DI_GRAMMAR_REGEX, spec, std::strlen(spec), 0, 0, &again));
  di_grammar_free(again);
  ASSERT_DI_OK(di_sampling_set_grammar(sp.get(), for_tokenizer));
  out = run_prompt(b.get(), tokenize(b.get(), kPrompt), sp.get());
  EXPECT_TRUE(matches(out.completions[0].text)) << out.completions[0].text;

  // The tokenizer's own size (narrower masks than the model's logits) is another vocabulary.
  di_grammar* narrow = nullptr;
  ASSERT_DI_OK(di_grammar_compile_for_tokenizer(tok, width - 1, eos, n_eos, DI_GRAMMAR_REGEX, spec, std::strlen(spec), 0, 0, &narrow));
  ASSERT_DI_OK(di_sampling_set_grammar(sp.get(), narrow));
  Session s = make_session(b.get());
  auto ids = tokenize(b.get(), kPrompt);
  ASSERT_DI_OK(di_session_add_tokens(s.get(), ids.data(), ids.size()));
  EXPECT_DI_CODE(di_session_generate(s.get(), sp.get()), DI_ERR_INVALID_ARGUMENT);
  di_grammar_free(narrow);
  di_grammar_free(for_tokenizer);
  di_tokenizer_free(tok);
}

// A model without a tokenizer: token ids in, ids out.

TEST(TokenizerLess, TokensInTokensOut) {
  Engine e = open_engine(DI_TINY_MODEL_DIR);
  ASSERT_TRUE(e);
  int32_t vocab = 0;
  ASSERT_DI_OK(di_engine_vocab_size(e.get(), &vocab));
  EXPECT_EQ(vocab, 384);
  int32_t eos[4];
  size_t n = 0;
  ASSERT_DI_OK(di_engine_eos_tokens(e.get(), eos, 4, &n));
  EXPECT_EQ(n, 1u);
  const std::vector<int32_t> p = {0, 17, 99, 383, 5, 250, 42};
  Sampling sp = seeded(7, 12, 2);
  ASSERT_DI_OK(di_sampling_set_logprobs(sp.get(), 2));
  Output a = run_prompt(e.get(), p, sp.get(), 2, true);
  Output b = run_prompt(e.get(), p, sp.get(), 2, true);
  for (int c = 0; c < 2; ++c) {
    const Completion& x = a.completions[c];
    EXPECT_TRUE(x.finished);
    EXPECT_GE(x.tokens.size(), 1u);
    EXPECT_TRUE(x.text.empty());
    for (int32_t t : x.tokens) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, vocab);
    }
    ASSERT_EQ(x.logprobs.size(), x.tokens.size());
    for (size_t i = 0; i < x.tokens.size(); ++i) expect_valid(x.logprobs[i], x.tokens[i], 2, vocab, "token " + std::to_string(i));
    expect_same(x, b.completions[c], "tokenizer-less seeded repeat");
  }
  // A second turn on the same session continues from the kept state.
  Session s = make_session(e.get());
  ASSERT_DI_OK(di_session_add_tokens(s.get(), p.data(), p.size()));
  run(s.get(), sp.get(), 2, true);
  ASSERT_DI_OK(di_session_add_tokens(s.get(), p.data(), 3));
  Output t2 = run(s.get(), sp.get(), 2, true);
  EXPECT_GT(t2.completions[0].cached_tokens, 0u);
}

TEST(TokenizerLess, TextCallsAreUnsupported) {
  Engine e = open_engine(DI_TINY_MODEL_DIR);
  ASSERT_TRUE(e);
  int32_t ids[8];
  size_t n = 0;
  char text[64];
  EXPECT_DI_CODE(di_engine_tokenize(e.get(), "hi", 2, DI_TEXT_PLAIN, ids, 8, &n), DI_ERR_UNSUPPORTED);
  const int32_t one = 5;
  EXPECT_DI_CODE(di_engine_detokenize(e.get(), &one, 1, 0, text, sizeof text, &n), DI_ERR_UNSUPPORTED);
  Session s = make_session(e.get());
  EXPECT_DI_CODE(di_session_add_text(s.get(), "hi", 2, DI_TEXT_PLAIN), DI_ERR_UNSUPPORTED);
  EXPECT_DI_CODE(di_session_add_message(s.get(), DI_ROLE_USER, "hi", 2), DI_ERR_UNSUPPORTED);
  EXPECT_DI_CODE(di_session_add_tool_call(s.get(), "f", 1, "{}", 2), DI_ERR_UNSUPPORTED);
  EXPECT_EQ(context_length(s.get()), 0);
  // Stop strings need text.
  ASSERT_DI_OK(di_session_add_tokens(s.get(), &one, 1));
  Sampling sp = seeded(1, 4);
  ASSERT_DI_OK(di_sampling_add_stop_string(sp.get(), "x", 1));
  EXPECT_DI_CODE(di_session_generate(s.get(), sp.get()), DI_ERR_UNSUPPORTED);
  // The session still generates from ids.
  Sampling plain = seeded(1, 4);
  EXPECT_TRUE(run(s.get(), plain.get()).completions[0].finished);
}

}  // namespace
