// Stop conditions decided by token ids and counts (stop strings: stop_string_matcher.h).
#pragma once

#include "sample/finish_reason.h"
#include "sample/sampling_params.h"

#include <cstdint>
#include <optional>
#include <span>

namespace deepinfer {

struct TokenStop {
  FinishReason reason = FinishReason::kStop;  // kStop (EOS or stop id) or kLength
  bool is_eos = false;  // kStop by EOS; vLLM reports stop ids (not EOS) as the stop reason
  int32_t token = -1;   // the token that ended the completion
};

// Whether the completion ends with `token`, checked after it was appended (num_generated counts
// it). EOS (unless ignore_eos) and stop_token_ids end it with kStop, but only once more than
// min_tokens tokens exist; otherwise reaching max_tokens ends it with kLength. A stop token on the
// last allowed position reports kStop.
std::optional<TokenStop> check_token_stop(const SamplingParams& params,
                                          std::span<const int32_t> eos_token_ids, int32_t token,
                                          int32_t num_generated);

// Whether text produced by the num_generated-th token may complete a stop string (min_tokens):
// pass it as StopStringMatcher::feed's can_stop.
bool stop_strings_armed(const SamplingParams& params, int32_t num_generated);

}  // namespace deepinfer
