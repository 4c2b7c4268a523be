// The C ABI's behaviour, through deepinfer.h only: generation, the seed contract, stop conditions,
// logprobs. Multi-turn sessions, chat, cancellation, concurrency, callbacks, limits and
// tokenizer-less models are in abi_sessions_test.cpp.
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
// Generation

TEST_F(Demo, TextPromptGeneratesText) {
  Session s = make_session(engine());
  ASSERT_DI_OK(di_session_add_text(s.get(), kPrompt, std::strlen(kPrompt), DI_TEXT_PLAIN));
  const auto context = context_tokens(s.get());
  EXPECT_EQ(context, prompt());
  Sampling sp = seeded(1, 16);
  Output out = run(s.get(), sp.get());
  ASSERT_EQ(out.completions.size(), 1u);
  const Completion& c = out.completions[0];
  EXPECT_TRUE(c.finished);
  EXPECT_GE(c.tokens.size(), 1u);
  EXPECT_LE(c.tokens.size(), 16u);
  EXPECT_TRUE(c.reason == DI_FINISH_LENGTH || c.reason == DI_FINISH_STOP);
  if (c.reason == DI_FINISH_STOP) {
    EXPECT_EQ(c.tokens.back(), eos());
  }
  if (c.reason == DI_FINISH_LENGTH) {
    EXPECT_EQ(c.tokens.size(), 16u);
  }
  EXPECT_FALSE(c.text.empty());
  // The events' text is the detokenized output (special tokens skipped by default).
  EXPECT_EQ(c.text, detokenize(engine(), c.tokens, DI_DETOK_SKIP_SPECIAL));
  EXPECT_EQ(c.prompt_tokens, context.size());
  EXPECT_EQ(c.cached_tokens, 0u);
  EXPECT_EQ(c.seed, 1u);
  // The output joined the context.
  auto after = context_tokens(s.get());
  ASSERT_EQ(after.size(), context.size() + c.tokens.size());
  EXPECT_TRUE(std::equal(c.tokens.begin(), c.tokens.end(), after.begin() + context.size()));
}

TEST_F(Demo, EngineSamplingDefaultsGenerate) {
  di_sampling* raw = nullptr;
  ASSERT_DI_OK(di_engine_sampling_defaults(engine(), &raw));
  Sampling sp(raw);
  ASSERT_DI_OK(di_sampling_set_max_tokens(sp.get(), 8));
  Output out = run_prompt(engine(), prompt(), sp.get());
  ASSERT_EQ(out.completions.size(), 1u);
  EXPECT_TRUE(out.completions[0].finished);
  EXPECT_GE(out.completions[0].tokens.size(), 1u);
}

// ---------------------------------------------------------------------------------------------
// The seed contract

TEST_F(Demo, SeededRunsRepeatExactly) {
  Sampling sp = seeded(123, 24);
  Output a = run_prompt(engine(), prompt(), sp.get());
  Output b = run_prompt(engine(), prompt(), sp.get());
  expect_same(a.completions[0], b.completions[0], "seed 123");
  EXPECT_EQ(a.completions[0].seed, 123u);
  EXPECT_EQ(b.completions[0].seed, 123u);
  // Another seed gives another output (at temperature 1, over a few seeds).
  bool differs = false;
  for (uint64_t seed : {124, 125, 126}) {
    Sampling other = seeded(seed, 24);
    differs |= run_prompt(engine(), prompt(), other.get()).completions[0].tokens != a.completions[0].tokens;
  }
  EXPECT_TRUE(differs);
}

TEST_F(Demo, SeededRunsRepeatWithThreeCompletions) {
  Sampling sp = seeded(2024, 16, 3);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  Output a = run_prompt(engine(), prompt(), sp.get(), 3);
  Output b = run_prompt(engine(), prompt(), sp.get(), 3);
  ASSERT_EQ(a.completions.size(), 3u);
  ASSERT_EQ(b.completions.size(), 3u);
  std::set<std::vector<int32_t>> distinct;
  for (size_t i = 0; i < 3; ++i) {
    expect_same(a.completions[i], b.completions[i], "completion " + std::to_string(i));
    EXPECT_EQ(a.completions[i].seed, 2024u);
    EXPECT_EQ(a.completions[i].tokens.size(), 16u);
    distinct.insert(a.completions[i].tokens);
  }
  EXPECT_GT(distinct.size(), 1u) << "the completions draw from different streams";
  // Completion 0 draws from stream (seed, 0, t) whatever n is.
  Sampling one = seeded(2024, 16, 1);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(one.get(), 1));
  expect_same(run_prompt(engine(), prompt(), one.get()).completions[0], a.completions[0], "n=1 vs completion 0 of n=3");
}

// Other sessions generating at the same time (batch composition, chunking, scheduling) change
// nothing.
TEST_F(Demo, SeededRunsDoNotDependOnConcurrentWork) {
  struct Request {
    std::vector<int32_t> prompt;
    Sampling sp;
    int n;
  };
  std::vector<Request> requests;
  requests.push_back({prompt(), seeded(77, 20), 1});
  for (size_t i = 0; i < kOtherPrompts.size(); ++i)
    requests.push_back({prompt(kOtherPrompts[i]), seeded(1000 + i, 12 + 4 * static_cast<int>(i), i % 2 ? 3 : 1),
                        i % 2 ? 3 : 1});
  std::vector<Output> alone;
  for (auto& r : requests) alone.push_back(run_prompt(engine(), r.prompt, r.sp.get(), r.n));

  // All at once: every generation starts before any is read.
  for (int round = 0; round < 2; ++round) {
    std::vector<Session> sessions;
    for (size_t i = 0; i < requests.size(); ++i) sessions.push_back(make_session(engine()));
    // Second round: the first request starts last, joining a batch that is already decoding.
    std::vector<size_t> order(requests.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = round == 0 ? i : (i + 1) % order.size();
    for (size_t i : order) {
      ASSERT_DI_OK(di_session_add_tokens(sessions[i].get(), requests[i].prompt.data(), requests[i].prompt.size()));
      ASSERT_DI_OK(di_session_generate(sessions[i].get(), requests[i].sp.get()));
      if (round == 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      Output together = drain(sessions[i].get(), requests[i].n);
      for (int c = 0; c < requests[i].n; ++c)
        expect_same(together.completions[c], alone[i].completions[c],
                    "round " + std::to_string(round) + " request " + std::to_string(i) + " completion " + std::to_string(c));
    }
  }
}

// How prefills are cut into steps changes nothing either.
TEST(DemoEngines, SeededRunsDoNotDependOnStepSize) {
  Engine wide = open_engine(DI_DEMO_MODEL_DIR);
  EngineOptions o;
  o.max_batched_tokens = 3;
  Engine narrow = open_engine(DI_DEMO_MODEL_DIR, o);
  ASSERT_TRUE(wide && narrow);
  auto ids = tokenize(wide.get(), kPrompt);
  Sampling sp = seeded(5, 16, 2);
  Output a = run_prompt(wide.get(), ids, sp.get(), 2);
  Output b = run_prompt(narrow.get(), ids, sp.get(), 2);
  for (int c = 0; c < 2; ++c) expect_same(a.completions[c], b.completions[c], "completion " + std::to_string(c));
}

// Running sequences whose state is given up for lack of memory (preempted) and recomputed later
// produce what they produce with memory to spare.
TEST(DemoEngines, SeededRunsSurvivePreemption) {
  const BlockSize block = demo_block_size();
  ASSERT_GT(block.bytes, 0);
  Engine roomy_engine = open_engine(DI_DEMO_MODEL_DIR);
  ASSERT_TRUE(roomy_engine);
  const auto ids = tokenize(roomy_engine.get(), kPrompt);
  // Two completions of two blocks each.
  ASSERT_LT(static_cast<int64_t>(ids.size()) + 280, 2 * block.tokens);
  ASSERT_GT(static_cast<int64_t>(ids.size()) + 280, block.tokens);
  Sampling sp = seeded(6, 280, 2);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  Output roomy = run_prompt(roomy_engine.get(), ids, sp.get(), 2);
  roomy_engine.reset();

  // Three blocks: both completions start, only one can grow into a second block at a time.
  EngineOptions o;
  o.state_memory = block.memory_for(3);
  Engine tight = open_engine(DI_DEMO_MODEL_DIR, o);
  ASSERT_TRUE(tight);
  int64_t cap = 0;
  ASSERT_DI_OK(di_engine_capacity_tokens(tight.get(), &cap));
  ASSERT_EQ(cap, 3 * block.tokens);
  Output squeezed = run_prompt(tight.get(), ids, sp.get(), 2);
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(squeezed.completions[c].reason, DI_FINISH_LENGTH);
    expect_same(squeezed.completions[c], roomy.completions[c], "completion " + std::to_string(c));
  }
}

// A prompt whose prefill is preempted half-way still gets exactly one logprob per prompt token.
TEST(DemoEngines, PromptLogprobsSurvivePreemption) {
  const BlockSize block = demo_block_size();
  ASSERT_GT(block.bytes, 0);
  std::vector<int32_t> a_prompt, b_prompt;
  // A fills its first block after its prefill and 11 decode steps; by then B, prefilling 31 tokens
  // a step alongside A's decodes, holds two blocks and is still some way from its end.
  for (int i = 0; a_prompt.size() < static_cast<size_t>(block.tokens) - 11; ++i) a_prompt.push_back(100 + i % 50);
  for (int i = 0; b_prompt.size() < static_cast<size_t>(block.tokens) * 2 - 12; ++i) b_prompt.push_back(300 + i % 70);
  Sampling a_sp = seeded(1, 60);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(a_sp.get(), 1));
  Sampling b_sp = seeded(2, 2);
  ASSERT_DI_OK(di_sampling_set_prompt_logprobs(b_sp.get(), 1));

  Engine roomy = open_engine(DI_DEMO_MODEL_DIR);
  ASSERT_TRUE(roomy);
  Output ref = run_prompt(roomy.get(), b_prompt, b_sp.get());
  ASSERT_EQ(ref.prompt_logprobs.size(), b_prompt.size() - 1);
  roomy.reset();

  // Three blocks and steps of 32 tokens: A (older) grows into its second block while B is still
  // prefilling, and B, the newest, gives its state up.
  EngineOptions o;
  o.state_memory = block.memory_for(3);
  o.max_batched_tokens = 32;
  Engine tight = open_engine(DI_DEMO_MODEL_DIR, o);
  ASSERT_TRUE(tight);
  Session a = make_session(tight.get()), b = make_session(tight.get());
  ASSERT_DI_OK(di_session_add_tokens(a.get(), a_prompt.data(), a_prompt.size()));
  ASSERT_DI_OK(di_session_add_tokens(b.get(), b_prompt.data(), b_prompt.size()));
  ASSERT_DI_OK(di_session_generate(a.get(), a_sp.get()));
  ASSERT_DI_OK(di_session_generate(b.get(), b_sp.get()));
  Output b_out = drain(b.get(), 1);
  Output a_out = drain(a.get(), 1);
  EXPECT_EQ(a_out.completions[0].tokens.size(), 60u);
  EXPECT_EQ(b_out.prompt_logprobs_events, 1);
  EXPECT_EQ(b_out.prompt_tokens.size(), b_prompt.size() - 1);
  ASSERT_EQ(b_out.prompt_logprobs.size(), b_prompt.size() - 1);
  for (size_t i = 0; i < ref.prompt_logprobs.size(); ++i)
    EXPECT_NEAR(b_out.prompt_logprobs[i].logprob, ref.prompt_logprobs[i].logprob, 1e-3) << "prompt token " << i + 1;
  expect_same(b_out.completions[0], ref.completions[0], "B's output");
}

TEST_F(Demo, UnseededRunReportsASeedThatReplaysIt) {
  Sampling sp = make_sampling();
  ASSERT_DI_OK(di_sampling_set_max_tokens(sp.get(), 16));
  ASSERT_DI_OK(di_sampling_set_n(sp.get(), 2));
  Output a = run_prompt(engine(), prompt(), sp.get(), 2);
  Output b = run_prompt(engine(), prompt(), sp.get(), 2);
  const uint64_t seed = a.completions[0].seed;
  EXPECT_EQ(a.completions[1].seed, seed) << "one seed per generation";
  EXPECT_NE(b.completions[0].seed, seed) << "each generation draws its own seed";
  Sampling replay = seeded(seed, 16, 2);
  Output r = run_prompt(engine(), prompt(), replay.get(), 2);
  for (int c = 0; c < 2; ++c) {
    expect_same(r.completions[c], a.completions[c], "replay of completion " + std::to_string(c));
    EXPECT_EQ(r.completions[c].seed, seed);
  }
}

// di_engine_config_set_seed makes the engine's draws reproducible.
TEST(DemoEngines, EngineSeedMakesUnseededRunsReproducible) {
  EngineOptions o;
  o.has_seed = true;
  o.seed = 99;
  std::vector<Output> outs[2];
  for (auto& list : outs) {
    Engine e = open_engine(DI_DEMO_MODEL_DIR, o);
    ASSERT_TRUE(e);
    auto ids = tokenize(e.get(), kPrompt);
    Sampling sp = make_sampling();
    ASSERT_DI_OK(di_sampling_set_max_tokens(sp.get(), 8));
    for (int i = 0; i < 2; ++i) list.push_back(run_prompt(e.get(), ids, sp.get()));
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(outs[0][i].completions[0].seed, outs[1][i].completions[0].seed);
    expect_same(outs[0][i].completions[0], outs[1][i].completions[0], "generation " + std::to_string(i));
  }
  EXPECT_NE(outs[0][0].completions[0].seed, outs[0][1].completions[0].seed);
}

// Generations submitted at the same time from many threads draw distinct seeds.
TEST(DemoEngines, ConcurrentUnseededRunsDrawDistinctSeeds) {
  EngineOptions o;
  o.has_seed = true;
  o.seed = 7;
  Engine e = open_engine(DI_DEMO_MODEL_DIR, o);
  ASSERT_TRUE(e);
  const auto ids = tokenize(e.get(), kPrompt);
  constexpr int kThreads = 8;
  std::vector<uint64_t> seeds(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Session s = make_session(e.get());
      EXPECT_DI_OK(di_session_add_tokens(s.get(), ids.data(), ids.size()));
      Sampling sp = make_sampling();
      EXPECT_DI_OK(di_sampling_set_max_tokens(sp.get(), 1));
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      Output out = run(s.get(), sp.get());
      seeds[i] = out.completions[0].seed;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<uint64_t>(seeds.begin(), seeds.end()).size(), static_cast<size_t>(kThreads));
}

TEST_F(Demo, GreedyIsDeterministicAndPicksTheArgmax) {
  Sampling a = greedy(16);
  ASSERT_DI_OK(di_sampling_set_seed(a.get(), 1));
  ASSERT_DI_OK(di_sampling_set_logprobs(a.get(), 1));
  Sampling b = greedy(16);
  ASSERT_DI_OK(di_sampling_set_seed(b.get(), 2));
  Output x = run_prompt(engine(), prompt(), a.get(), 1, true);
  Output y = run_prompt(engine(), prompt(), b.get());
  expect_same(x.completions[0], y.completions[0], "greedy with seeds 1 and 2");
  const Completion& c = x.completions[0];
  ASSERT_EQ(c.logprobs.size(), c.tokens.size());
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    ASSERT_EQ(c.logprobs[i].top_ids.size(), 1u);
    EXPECT_EQ(c.logprobs[i].top_ids[0], c.tokens[i]) << "token " << i;
    EXPECT_EQ(c.logprobs[i].top_logprobs[0], c.logprobs[i].logprob);
  }
}

// ---------------------------------------------------------------------------------------------
// Stop conditions

TEST_F(Demo, StopStringEndsGenerationAndIsCut) {
  Sampling ref_sp = greedy(40);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(ref_sp.get(), 1));
  const Completion ref = run_prompt(engine(), prompt(), ref_sp.get()).completions[0];
  ASSERT_EQ(ref.tokens.size(), 40u);
  // A stop string first seen in the middle of the reference text.
  std::string stop;
  size_t at = std::string::npos;
  for (size_t pos = 2; pos + 3 <= ref.text.size() && stop.empty(); ++pos) {
    std::string cand = ref.text.substr(pos, 3);
    if (std::all_of(cand.begin(), cand.end(), [](char ch) { return ch >= ' ' && ch < 127; }) && ref.text.find(cand) == pos) {
      stop = cand;
      at = pos;
    }
  }
  ASSERT_FALSE(stop.empty()) << "no stop string candidate in: " << ref.text;

  for (int include = 0; include < 2; ++include) {
    Sampling sp = greedy(40);
    ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
    ASSERT_DI_OK(di_sampling_add_stop_string(sp.get(), "never-seen-stop", 15));
    ASSERT_DI_OK(di_sampling_add_stop_string(sp.get(), stop.data(), stop.size()));
    ASSERT_DI_OK(di_sampling_set_include_stop_string(sp.get(), include));
    const Completion c = run_prompt(engine(), prompt(), sp.get()).completions[0];
    EXPECT_EQ(c.reason, DI_FINISH_STOP);
    EXPECT_EQ(c.text, ref.text.substr(0, at + (include ? stop.size() : 0))) << "stop \"" << stop << "\"";
    // The ids run up to the token that completed the stop string.
    ASSERT_LE(c.tokens.size(), ref.tokens.size());
    EXPECT_TRUE(std::equal(c.tokens.begin(), c.tokens.end(), ref.tokens.begin()));
    EXPECT_NE(detokenize(engine(), c.tokens).find(stop), std::string::npos);
    std::vector<int32_t> before(c.tokens.begin(), c.tokens.end() - 1);
    EXPECT_EQ(detokenize(engine(), before).find(stop), std::string::npos);
  }
}

TEST_F(Demo, StopTokenEndsGeneration) {
  Sampling ref_sp = greedy(24);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(ref_sp.get(), 1));
  const Completion ref = run_prompt(engine(), prompt(), ref_sp.get()).completions[0];
  ASSERT_EQ(ref.tokens.size(), 24u);
  const int32_t stop = ref.tokens[5];
  const size_t first = std::find(ref.tokens.begin(), ref.tokens.end(), stop) - ref.tokens.begin();
  Sampling sp = greedy(24);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  ASSERT_DI_OK(di_sampling_set_stop_tokens(sp.get(), &stop, 1));
  const Completion c = run_prompt(engine(), prompt(), sp.get()).completions[0];
  EXPECT_EQ(c.reason, DI_FINISH_STOP);
  EXPECT_EQ(c.tokens, std::vector<int32_t>(ref.tokens.begin(), ref.tokens.begin() + first + 1));
}

TEST_F(Demo, MaxTokensFinishesWithLength) {
  Sampling sp = seeded(3, 5, 2);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  Output out = run_prompt(engine(), prompt(), sp.get(), 2);
  for (const auto& c : out.completions) {
    EXPECT_EQ(c.reason, DI_FINISH_LENGTH);
    EXPECT_EQ(c.tokens.size(), 5u);
    EXPECT_EQ(c.completion_tokens, 5u);
  }
}

TEST_F(Demo, EosEndsGenerationUnlessIgnored) {
  const int32_t e = eos();
  const float bias = 100.0f;
  Sampling sp = seeded(4, 6);
  ASSERT_DI_OK(di_sampling_set_logit_bias(sp.get(), &e, &bias, 1));
  Completion c = run_prompt(engine(), prompt(), sp.get()).completions[0];
  EXPECT_EQ(c.reason, DI_FINISH_STOP);
  EXPECT_EQ(c.tokens, std::vector<int32_t>{e});
  EXPECT_EQ(c.text, "");
  // Special tokens are left out of the text unless asked for.
  ASSERT_DI_OK(di_sampling_set_skip_special_tokens(sp.get(), 0));
  c = run_prompt(engine(), prompt(), sp.get()).completions[0];
  EXPECT_EQ(c.text, detokenize(engine(), {e}));
  EXPECT_FALSE(c.text.empty());
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  c = run_prompt(engine(), prompt(), sp.get()).completions[0];
  EXPECT_EQ(c.reason, DI_FINISH_LENGTH);
  EXPECT_EQ(c.tokens, std::vector<int32_t>(6, e));
}

TEST_F(Demo, MinTokensHoldsBackEosAndStopTokens) {
  const int32_t e = eos();
  const float bias = 100.0f;
  Sampling sp = seeded(4, 20);
  ASSERT_DI_OK(di_sampling_set_logit_bias(sp.get(), &e, &bias, 1));
  ASSERT_DI_OK(di_sampling_set_min_tokens(sp.get(), 5));
  Completion c = run_prompt(engine(), prompt(), sp.get()).completions[0];
  EXPECT_EQ(c.reason, DI_FINISH_STOP);
  ASSERT_EQ(c.tokens.size(), 6u);
  EXPECT_EQ(c.tokens.back(), e);
  EXPECT_EQ(std::count(c.tokens.begin(), c.tokens.end(), e), 1);

  // The same with a stop token that the bias makes certain.
  const int32_t stop = prompt()[1];
  Sampling sp2 = seeded(4, 20);
  ASSERT_DI_OK(di_sampling_set_logit_bias(sp2.get(), &stop, &bias, 1));
  ASSERT_DI_OK(di_sampling_set_stop_tokens(sp2.get(), &stop, 1));
  ASSERT_DI_OK(di_sampling_set_min_tokens(sp2.get(), 3));
  c = run_prompt(engine(), prompt(), sp2.get()).completions[0];
  EXPECT_EQ(c.reason, DI_FINISH_STOP);
  ASSERT_EQ(c.tokens.size(), 4u);
  EXPECT_EQ(c.tokens.back(), stop);
  EXPECT_EQ(std::count(c.tokens.begin(), c.tokens.end(), stop), 1);
}

TEST_F(Demo, AllowedTokensRestrictTheOutput) {
  const std::vector<int32_t> allowed = {prompt()[2], prompt()[3], prompt()[4]};
  Sampling sp = seeded(8, 12);
  ASSERT_DI_OK(di_sampling_set_allowed_tokens(sp.get(), allowed.data(), allowed.size()));
  const Completion c = run_prompt(engine(), prompt(), sp.get()).completions[0];
  EXPECT_EQ(c.tokens.size(), 12u);
  for (int32_t t : c.tokens) EXPECT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end()) << t;
}

// ---------------------------------------------------------------------------------------------
// Logprobs

TEST_F(Demo, LogprobsAreValid) {
  int32_t vocab = 0;
  ASSERT_DI_OK(di_engine_vocab_size(engine(), &vocab));
  for (int32_t top : {0, 5, 20}) {
    Sampling sp = seeded(11, 12, 2);
    ASSERT_DI_OK(di_sampling_set_logprobs(sp.get(), top));
    ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
    Output out = run_prompt(engine(), prompt(), sp.get(), 2, true);
    EXPECT_EQ(out.prompt_logprobs_events, 0);
    for (size_t c = 0; c < 2; ++c) {
      const Completion& comp = out.completions[c];
      ASSERT_EQ(comp.logprobs.size(), comp.tokens.size());
      for (size_t i = 0; i < comp.tokens.size(); ++i)
        expect_valid(comp.logprobs[i], comp.tokens[i], static_cast<size_t>(top), vocab,
                     "top " + std::to_string(top) + " completion " + std::to_string(c) + " token " + std::to_string(i));
    }
  }
}

TEST_F(Demo, PromptLogprobsMatchTheLogprobsOfGeneration) {
  int32_t vocab = 0;
  ASSERT_DI_OK(di_engine_vocab_size(engine(), &vocab));
  const auto p = prompt();
  Sampling sp = seeded(12, 8);
  ASSERT_DI_OK(di_sampling_set_logprobs(sp.get(), 3));
  ASSERT_DI_OK(di_sampling_set_prompt_logprobs(sp.get(), 3));
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  Output out = run_prompt(engine(), p, sp.get(), 1, true);
  EXPECT_EQ(out.prompt_logprobs_events, 1);
  ASSERT_EQ(out.prompt_tokens, std::vector<int32_t>(p.begin() + 1, p.end()));
  ASSERT_EQ(out.prompt_logprobs.size(), p.size() - 1);
  for (size_t i = 0; i < out.prompt_logprobs.size(); ++i)
    expect_valid(out.prompt_logprobs[i], p[i + 1], 3, vocab, "prompt token " + std::to_string(i + 1));
  const Completion& gen = out.completions[0];
  ASSERT_EQ(gen.tokens.size(), 8u);

  // Scoring prompt + output as a prompt gives the logprobs reported while generating the output.
  std::vector<int32_t> all = p;
  all.insert(all.end(), gen.tokens.begin(), gen.tokens.end());
  Sampling score = seeded(12, 1);
  ASSERT_DI_OK(di_sampling_set_prompt_logprobs(score.get(), 3));
  Output scored = run_prompt(engine(), all, score.get(), 1, false);
  ASSERT_EQ(scored.prompt_logprobs.size(), all.size() - 1);
  for (size_t i = 0; i < gen.tokens.size(); ++i) {
    const TokenLogprobs& a = gen.logprobs[i];
    const TokenLogprobs& b = scored.prompt_logprobs[p.size() - 1 + i];
    EXPECT_NEAR(a.logprob, b.logprob, 1e-3) << "output token " << i;
    EXPECT_EQ(a.top_ids, b.top_ids) << "output token " << i;
  }
  for (size_t i = 0; i + 1 < p.size(); ++i) {
    EXPECT_NEAR(out.prompt_logprobs[i].logprob, scored.prompt_logprobs[i].logprob, 1e-3) << "prompt token " << i + 1;
  }
}

}  // namespace
