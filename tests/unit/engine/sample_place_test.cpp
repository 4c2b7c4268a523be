// Where a step's rows are sampled: by default where the logits are (Backend::sample_rows), with the
// engine option host_sampling on copies of the rows on the engine's sample pool. On the CPU backend
// both run sample_row on the same rows with the same keys: the outputs are identical, bit for bit,
// for every kind of request (sampled, n > 1, logprobs, penalties, grammar, prompt logprobs, which
// always take the copies), run together in one batch.
#include "engine_test_util.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams params;
  std::string regex;  // "": no grammar
};

struct Outputs {
  std::vector<std::map<int32_t, std::vector<int32_t>>> tokens;
  std::vector<std::map<int32_t, std::vector<Logprobs>>> logprobs;
  std::vector<std::vector<Logprobs>> prompt_logprobs;
};

Outputs run_all(bool host_sampling, const std::vector<Request>& requests) {
  EngineConfig c = testing::demo_config();
  c.host_sampling = host_sampling;
  auto e = testing::open_engine(c);
  Outputs r;
  if (!e) return r;
  std::vector<std::shared_ptr<Session>> sessions;
  for (const Request& q : requests) {  // all submitted before any is read: they share steps
    auto s = e->create_session().value();
    EXPECT_TRUE(s->add_tokens(q.prompt));
    std::shared_ptr<const grammar::CompiledGrammar> g;
    if (!q.regex.empty()) {
      auto compiled = e->compile_grammar(grammar::GrammarKind::kRegex, q.regex, {});
      EXPECT_TRUE(compiled) << compiled.error().message;
      if (compiled) g = compiled.value();
    }
    auto started = s->generate(q.params, g);
    EXPECT_TRUE(started) << started.error().message;
    sessions.push_back(s);
  }
  for (auto& s : sessions) {
    std::map<int32_t, std::vector<int32_t>> tokens;
    std::map<int32_t, std::vector<Logprobs>> logprobs;
    std::vector<Logprobs> prompt;
    for (;;) {
      auto ev = s->poll(30000);
      if (!ev || !ev.value()) {
        ADD_FAILURE() << "no DONE event";
        break;
      }
      Event& x = *ev.value();
      if (x.kind == Event::Kind::kDone) break;
      if (x.kind == Event::Kind::kTokens) {
        tokens[x.completion].insert(tokens[x.completion].end(), x.tokens.begin(), x.tokens.end());
        logprobs[x.completion].insert(logprobs[x.completion].end(), x.logprobs.begin(), x.logprobs.end());
      } else if (x.kind == Event::Kind::kPromptLogprobs) {
        prompt = x.logprobs;
      }
    }
    r.tokens.push_back(tokens);
    r.logprobs.push_back(logprobs);
    r.prompt_logprobs.push_back(prompt);
  }
  return r;
}

void expect_same(const Logprobs& a, const Logprobs& b) {
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(a.logprob, b.logprob);
  EXPECT_EQ(a.rank, b.rank);
  ASSERT_EQ(a.top.size(), b.top.size());
  for (size_t i = 0; i < a.top.size(); ++i) {
    EXPECT_EQ(a.top[i].token, b.top[i].token);
    EXPECT_EQ(a.top[i].logprob, b.top[i].logprob);
  }
}

TEST(SamplePlace, WhereTheLogitsAreEqualsTheEnginesCopies) {
  std::mt19937 rng(77);
  auto probe = testing::open_engine(testing::demo_config());
  ASSERT_TRUE(probe);
  std::vector<Request> requests;
  for (int i = 0; i < 6; ++i) {
    Request q;
    q.prompt = testing::random_prompt(rng, 8 + 5 * i, *probe);
    q.params.seed = 40 + i;
    q.params.max_tokens = 24;
    q.params.ignore_eos = true;
    switch (i) {
      case 0: q.params.temperature = 0.0f; break;  // greedy among sampled rows
      case 1: q.params.top_p = 0.9f, q.params.top_k = 40, q.params.n = 3; break;
      case 2: q.params.temperature = 0.7f, q.params.logprobs = 4, q.params.repetition_penalty = 1.2f; break;
      case 3: q.params.min_p = 0.05f, q.params.presence_penalty = 0.5f, q.params.logit_bias = {{5, 3.0f}}; break;
      case 4: q.regex = "[a-z]{3,12}( [a-z]{2,9}){2,4}"; break;
      case 5: q.params.prompt_logprobs = 2, q.params.logprobs = 1; break;  // a step that copies the rows
    }
    requests.push_back(q);
  }
  probe.reset();
  const Outputs there = run_all(false, requests);
  const Outputs copied = run_all(true, requests);
  ASSERT_EQ(there.tokens.size(), requests.size());
  ASSERT_EQ(copied.tokens.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(there.tokens[i], copied.tokens[i]);
    EXPECT_FALSE(there.tokens[i].empty());
    ASSERT_EQ(there.logprobs[i].size(), copied.logprobs[i].size());
    for (const auto& [c, lps] : copied.logprobs[i]) {
      ASSERT_EQ(there.logprobs[i].at(c).size(), lps.size());
      for (size_t t = 0; t < lps.size(); ++t) expect_same(there.logprobs[i].at(c)[t], lps[t]);
    }
    ASSERT_EQ(there.prompt_logprobs[i].size(), copied.prompt_logprobs[i].size());
    for (size_t t = 0; t < copied.prompt_logprobs[i].size(); ++t) expect_same(there.prompt_logprobs[i][t], copied.prompt_logprobs[i][t]);
  }
  EXPECT_EQ(there.prompt_logprobs[5].size(), requests[5].prompt.size() - 1);
}

// The option is one of the engine's: an unknown value is an error naming it.
TEST(SamplePlace, HostSamplingIsAnEngineOption) {
  EngineConfig c;
  ASSERT_TRUE(set_engine_option(c, "host_sampling", "1"));
  EXPECT_TRUE(c.host_sampling);
  auto bad = set_engine_option(c, "host_sampling", "maybe");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Code::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("host_sampling"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace deepinfer
