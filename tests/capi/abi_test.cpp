// The C ABI's behaviour, through deepinfer.h only: generation, the seed contract, stop conditions,
// logprobs, multi-turn sessions, chat, cancellation, concurrency, callbacks, tokenizer-less models.
#include "abi_helpers.h"

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

constexpr const char* kPrompt = "Once upon a time, there was a little girl named Lily. She";
const std::vector<std::string> kOtherPrompts = {
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

  static di_engine* engine_;
};
di_engine* Demo::engine_ = nullptr;

Sampling greedy(int32_t max_tokens) {
  Sampling sp = make_sampling();
  EXPECT_DI_OK(di_sampling_set_temperature(sp.get(), 0.0f));
  EXPECT_DI_OK(di_sampling_set_max_tokens(sp.get(), max_tokens));
  return sp;
}

void expect_same(const Completion& a, const Completion& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.text, b.text) << what;
  EXPECT_EQ(a.reason, b.reason) << what;
}

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

// The demo model's state blocks: tokens per block, and state_memory for a pool of `blocks` blocks.
struct BlockSize {
  int64_t tokens = 0;
  double bytes = 0;
  uint64_t memory_for(int blocks) const { return static_cast<uint64_t>(bytes * (blocks + 0.5)); }
};

BlockSize demo_block_size() {
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

void expect_valid(const TokenLogprobs& lp, int32_t token, size_t top_n, int32_t vocab, const std::string& where) {
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
