// Per-request sampling parameters (vLLM-compatible semantics) and their validation.
//
// Processing order, applied to each row of logits by sample_row() (sampler.h):
//   1. grammar bitmask          tokens whose bit is 0 get -inf ("masks first", structured outputs)
//   2. allowed_token_ids        every other token gets -inf
//   3. logit_bias               logit += bias
//   4. min_tokens               while fewer than min_tokens tokens were generated, stop_token_ids
//                               and (unless ignore_eos) the EOS ids get -inf
//   5. penalties                repetition (prompt + output tokens), then frequency and presence
//                               (output tokens only)
//   6. temperature == 0         greedy: argmax, the lowest id wins ties; steps 7-10 are skipped
//   7. temperature              logit / temperature
//   8. top_k                    keep the k most likely tokens (ties broken by the lower id)
//   9. top_p                    keep the smallest most-likely-first prefix whose mass reaches top_p
//  10. min_p                    keep tokens with p >= min_p * p_max
//  11. sample                   inverse CDF over the survivors in token id order with one uniform
//                               draw keyed by (seed, completion index, output position)
// Temperature is monotone, so top_k ranks the same tokens before or after it; the CPU sampler
// applies it after top_k to weigh only the survivors.
#pragma once

#include "util/result.h"

#include <climits>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer {

// Where logprobs come from. kRaw matches vLLM's default (log_softmax of the model's logits);
// kProcessed is the distribution the token was drawn from (after steps 1-10; for greedy rows,
// after steps 1-5).
enum class LogprobsMode : int32_t { kRaw = 0, kProcessed = 1 };

inline constexpr int32_t kDefaultMaxTokens = 256;
inline constexpr int32_t kMaxCompletions = 128;       // upper bound of n (OpenAI's limit)
inline constexpr int32_t kMaxLogprobs = 20;           // upper bound of logprobs / prompt_logprobs
inline constexpr size_t kMaxStopStrings = 64;
inline constexpr size_t kMaxStopStringBytes = 1024;
inline constexpr float kMaxAbsLogitBias = 100.0f;     // OpenAI's range
inline constexpr float kMaxAbsPresenceFrequency = 2.0f;
inline constexpr float kMinRepetitionPenalty = 0.01f; // keeps logit / penalty finite
inline constexpr float kMaxRepetitionPenalty = 100.0f;
inline constexpr float kMaxTemperature = 1e6f;
inline constexpr int32_t kMaxFirstCompletion = INT32_MAX - kMaxCompletions;

struct SamplingParams {
  // 0 = greedy. Otherwise logits are divided by it, (0, 1e6].
  float temperature = 1.0f;
  // Keep the top_k most likely tokens; 0 or -1 = off. Values above the vocabulary size are off.
  int32_t top_k = 0;
  // Nucleus: keep the smallest set of most likely tokens whose probability reaches top_p.
  // Range (0, 1]; 1 = off.
  float top_p = 1.0f;
  // Keep tokens whose probability is at least min_p times the largest one, in [0, 1]; 0 = off.
  float min_p = 0.0f;

  // > 1 discourages every token seen in the prompt or the output so far: positive logits are
  // divided by it, negative ones multiplied. 1 = off. Range [0.01, 100].
  float repetition_penalty = 1.0f;
  // Subtracted once from the logit of every token already generated (output only). [-2, 2].
  float presence_penalty = 0.0f;
  // Subtracted count times from the logit of a token generated count times (output only). [-2, 2].
  float frequency_penalty = 0.0f;
  // Added to the logit of each listed token, [-100, 100].
  std::map<int32_t, float> logit_bias;
  // When non-empty, only these tokens can be generated.
  std::vector<int32_t> allowed_token_ids;

  // Generation ends after max_tokens tokens (finish reason "length"); >= 1. The engine's parameter
  // factory fills it from generation_config.json where that sets one.
  int32_t max_tokens = kDefaultMaxTokens;
  // No stop token, EOS or stop string ends generation before min_tokens tokens; <= max_tokens.
  int32_t min_tokens = 0;
  // Generating one of these ends the completion (finish reason "stop"); the token is kept in the
  // output ids.
  std::vector<int32_t> stop_token_ids;
  // Ends the completion when the detokenized output contains one (see StopStringMatcher). The stop
  // string itself is cut from the text unless include_stop_str_in_output.
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;
  // EOS never ends generation and is not banned by min_tokens, but it may still be sampled (vLLM).
  bool ignore_eos = false;
  // Leave special tokens out of the detokenized text (their ids are still returned).
  bool skip_special_tokens = true;

  // Completions per prompt, [1, 128]. Completion i draws from the stream keyed
  // (seed, first_completion + i, position).
  int32_t n = 1;
  // The stream of completion 0: a generation with n 1 and first_completion i replays completion i
  // of one with n > i and the same seed. [0, kMaxFirstCompletion].
  int32_t first_completion = 0;
  // Absent: the engine draws one (fresh_seed()) and reports it, so any output can be replayed.
  std::optional<uint64_t> seed;

  // Top-N logprobs per generated token, [0, 20]; 0 = only the sampled token's own. Absent = off.
  std::optional<int32_t> logprobs;
  // Top-N logprobs per prompt position (always raw), [0, 20]. Absent = off.
  std::optional<int32_t> prompt_logprobs;
  LogprobsMode logprobs_mode = LogprobsMode::kRaw;
};

// Rejects every out-of-range or non-finite value with Code::kInvalidArgument and a message naming
// the field and the value. Token ids must lie in [0, vocab_size), the width of the logits.
Result<void> validate(const SamplingParams& params, int32_t vocab_size);

// The checks of single fields that validate() applies, for setters that check a field as it is set
// (the C ABI): one rule per field wherever it is checked.
namespace sampling_checks {
Result<void> temperature(float v);
Result<void> top_k(int32_t v);
Result<void> top_p(float v);
Result<void> min_p(float v);
Result<void> repetition_penalty(float v);
Result<void> presence_penalty(float v);
Result<void> frequency_penalty(float v);
Result<void> logit_bias(int32_t token, float bias);  // the bias; the token only for its sign
Result<void> max_tokens(int32_t v);
Result<void> min_tokens(int32_t v);  // alone (validate() also bounds it by max_tokens)
Result<void> n(int32_t v);
Result<void> first_completion(int32_t v);
Result<void> logprobs(const char* field, std::optional<int32_t> v);
Result<void> stop_strings(const std::vector<std::string>& stop);
Result<void> token_id(const char* field, int32_t token);  // not negative (the vocabulary is checked later)
}  // namespace sampling_checks

}  // namespace deepinfer
