// What a session's stream delivers: new tokens with their text, prompt logprobs, the end of each
// completion, and last the end of the generation.
#pragma once

#include "sample/finish_reason.h"
#include "sample/logprobs.h"
#include "util/result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer {

struct Event {
  enum class Kind { kTokens, kFinished, kPromptLogprobs, kDone };
  Kind kind = Kind::kTokens;
  int32_t completion = 0;
  std::vector<int32_t> tokens;
  std::string text;                 // the text these tokens complete (may be empty, or trail at the end)
  std::vector<Logprobs> logprobs;   // one per token when logprobs were requested
  bool has_logprobs = false;
  // kFinished (and kDone: the seed):
  std::optional<FinishReason> reason;
  uint64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  uint64_t seed = 0;
  std::optional<Error> error;
};

}  // namespace deepinfer
