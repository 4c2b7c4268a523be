// Rows to sample with every feature of the processing order (sampling_params.h), for the tests of
// Backend::sample_rows on the CPU (tests/unit/backend) and on the GPU (tests/gpu).
#pragma once

#include "backend/row_sampling.h"
#include "sample/logits_processors.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace deepinfer::testing {

// One row's sampling arguments, owned (RowSampling points into them).
struct SamplingCase {
  std::string name;
  SamplingParams params;
  SequenceSamplingState state;
  std::vector<int32_t> eos;
  std::vector<uint32_t> mask;  // empty: no grammar
  SampleKey key;

  RowSampling row() const { return RowSampling{&params, &state, eos, mask, key}; }
};

enum class RowShape { kPeaked, kFlat, kTies };

// A trained model's row (a Gaussian bulk and a few far above it), a random model's (the bulk alone,
// wider), or one of few distinct values (many ties).
inline std::vector<float> make_logits(int64_t vocab, uint32_t seed, RowShape shape) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, shape == RowShape::kFlat ? 3.0f : 2.0f);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float& x : row) x = shape == RowShape::kTies ? std::round(normal(gen)) : normal(gen);
  if (shape == RowShape::kPeaked)
    for (int i = 0; i < 8; ++i) row[gen() % row.size()] = 16.0f - static_cast<float>(i);
  return row;
}

inline SequenceSamplingState make_state(int64_t vocab, uint32_t seed, int prompt, int generated) {
  std::mt19937 gen(seed);
  const auto vocab32 = static_cast<int32_t>(vocab);
  // A few tokens recur: the penalties then count them more than once.
  std::uniform_int_distribution<int32_t> token(0, std::min<int32_t>(vocab32 - 1, 63));
  std::uniform_int_distribution<int32_t> any(0, vocab32 - 1);
  std::vector<int32_t> ids;
  for (int i = 0; i < prompt; ++i) ids.push_back(i % 3 == 0 ? token(gen) : any(gen));
  SequenceSamplingState s = SequenceSamplingState::create(ids, vocab32).value();
  for (int i = 0; i < generated; ++i) (void)s.append_output(i % 2 == 0 ? token(gen) : any(gen));
  return s;
}

// Every feature alone and in combination, each on its own key.
inline std::vector<SamplingCase> feature_cases(int64_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  const auto vocab32 = static_cast<int32_t>(vocab);
  std::uniform_int_distribution<int32_t> any(0, vocab32 - 1);
  std::vector<SamplingCase> cases;
  auto add = [&](std::string name, SamplingParams p, int prompt = 40, int generated = 12) {
    SamplingCase c{std::move(name), std::move(p), make_state(vocab, gen(), prompt, generated), {}, {}, {}};
    c.key = SampleKey{0x5EED0000ull + gen(), static_cast<uint32_t>(gen() % 4), static_cast<uint32_t>(gen() % 1000)};
    cases.push_back(std::move(c));
    return &cases.back();
  };
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  add("greedy", greedy);
  SamplingParams p = greedy;
  p.repetition_penalty = 1.3f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.logit_bias = {{any(gen), 3.0f}, {any(gen), -2.0f}};
  p.logprobs = 5;
  p.logprobs_mode = LogprobsMode::kProcessed;
  add("greedy, penalties, bias, processed logprobs 5", p);
  p = greedy;
  p.logprobs = 20;
  add("greedy, raw logprobs 20", p);

  SamplingParams t08;
  t08.temperature = 0.8f;
  add("temperature 0.8", t08);
  p = t08;
  p.top_p = 0.95f;
  add("temperature 0.8, top_p 0.95", p);
  p = t08;
  p.top_k = 50;
  add("temperature 0.8, top_k 50", p);
  p = t08;
  p.top_k = 1;
  add("top_k 1", p);
  p = t08;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.repetition_penalty = 1.1f;
  add("top_k 40, top_p 0.9, min_p 0.05, repetition 1.1", p);
  p = t08;
  p.min_p = 0.3f;
  add("min_p 0.3", p);
  p = t08;
  p.top_p = 0.5f;
  p.logprobs = 0;
  p.logprobs_mode = LogprobsMode::kProcessed;
  add("top_p 0.5, processed logprobs 0", p);
  p = t08;
  p.top_k = 10;
  p.logprobs = 20;
  p.logprobs_mode = LogprobsMode::kProcessed;
  add("top_k 10, processed logprobs 20 (more than survive)", p);
  p = t08;
  p.logprobs = 20;
  add("raw logprobs 20", p);
  p = t08;
  p.temperature = 1e-3f;
  add("temperature 0.001", p);
  p = t08;
  p.temperature = 100.0f;
  p.top_p = 0.3f;
  add("temperature 100, top_p 0.3", p);

  p = t08;
  p.temperature = 1.0f;
  p.repetition_penalty = 1.5f;
  add("repetition 1.5 (prompt and output)", p, 200, 30);
  p = t08;
  p.frequency_penalty = 1.5f;
  p.presence_penalty = -0.5f;
  add("frequency 1.5, presence -0.5", p, 10, 60);
  p = t08;
  for (int i = 0; i < 6; ++i) p.logit_bias[any(gen)] = 25.0f;
  p.logit_bias[any(gen)] = -100.0f;
  add("logit_bias", p);
  p = t08;
  for (int i = 0; i < 20; ++i) p.allowed_token_ids.push_back(any(gen));
  p.allowed_token_ids.push_back(p.allowed_token_ids.front());  // a repeat
  p.logit_bias[p.allowed_token_ids[3]] = 1.5f;
  add("allowed_token_ids, one biased", p);

  p = t08;
  p.top_p = 0.8f;
  SamplingCase* grammar = add("grammar mask, top_p 0.8", p);
  grammar->mask.assign(bitmask_words(static_cast<size_t>(vocab)), 0u);
  for (int32_t t = 0; t < vocab32; ++t)
    if (gen() % 10 == 0) grammar->mask[static_cast<size_t>(t) / 32] |= 1u << (t % 32);

  p = t08;
  p.temperature = 0.3f;
  p.min_tokens = 20;
  p.stop_token_ids = {any(gen), any(gen)};
  p.logit_bias[p.stop_token_ids[0]] = 50.0f;  // would win if it were not banned
  SamplingCase* banned = add("min_tokens bans stop and EOS ids", p);
  banned->eos = {any(gen)};
  p.ignore_eos = true;
  SamplingCase* kept = add("min_tokens with ignore_eos: a biased EOS wins", p);
  kept->eos = {any(gen)};
  kept->params.logit_bias[kept->eos[0]] = 60.0f;
  return cases;
}

}  // namespace deepinfer::testing
