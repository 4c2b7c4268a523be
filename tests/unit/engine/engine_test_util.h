// Helpers for engine tests: engines on the demo model, prompts, and collecting a generation's output.
#pragma once

#include "engine/engine.h"
#include "engine/session.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <thread>
#include <vector>

namespace deepinfer::testing {

inline EngineConfig demo_config() {
  EngineConfig c;
  c.model_path = DI_DEMO_MODEL;
  c.threads = 2;
  c.seed = 7;
  return c;
}

inline std::shared_ptr<Engine> open_engine(const EngineConfig& c) {
  auto e = Engine::create(c);
  EXPECT_TRUE(e) << e.error().message;
  return e ? e.value() : nullptr;
}

// Random token ids that are not end-of-sequence tokens.
inline std::vector<int32_t> random_prompt(std::mt19937& rng, int32_t n, const Engine& e) {
  std::uniform_int_distribution<int32_t> d(3, e.vocab_size() - 1);
  std::vector<int32_t> ids(n);
  for (auto& t : ids) t = d(rng);
  return ids;
}

struct Outcome {
  std::map<int32_t, std::vector<int32_t>> tokens;  // by completion
  std::map<int32_t, Event> finished;
};

// Polls until the session's generation ends.
inline Outcome collect(Session& s) {
  Outcome o;
  for (;;) {
    auto e = s.poll(30000);
    if (!e) {
      EXPECT_EQ(e.error().code, Code::kState) << e.error().message;
      break;
    }
    if (!e.value()) {
      ADD_FAILURE() << "no event within 30 s";
      break;
    }
    Event& ev = *e.value();
    if (ev.kind == Event::Kind::kDone) break;
    if (ev.kind == Event::Kind::kTokens) {
      auto& t = o.tokens[ev.completion];
      t.insert(t.end(), ev.tokens.begin(), ev.tokens.end());
    } else if (ev.kind == Event::Kind::kFinished) {
      o.finished[ev.completion] = ev;
    }
  }
  return o;
}

inline Outcome generate_alone(Engine& e, const std::vector<int32_t>& prompt, const SamplingParams& p) {
  auto s = e.create_session();
  EXPECT_TRUE(s);
  EXPECT_TRUE(s.value()->add_tokens(prompt));
  auto r = s.value()->generate(p);
  EXPECT_TRUE(r) << r.error().message;
  return collect(*s.value());
}

// Waits (bounded) until `pred(stats)` holds.
template <class Pred>
bool wait_for_stats(const Engine& e, Pred pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred(e.stats())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred(e.stats());
}

}  // namespace deepinfer::testing
