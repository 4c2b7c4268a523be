// Why a completion ended (OpenAI / vLLM finish_reason).
#pragma once

#include <cstdint>

namespace deepinfer {

enum class FinishReason : int32_t {
  kStop = 0,       // EOS, a stop token id or a stop string
  kLength = 1,     // max_tokens reached (or the context limit, decided by the engine)
  kCancelled = 2,  // the caller cancelled the request
  kError = 3,      // the request failed (its error says why)
};

// "stop", "length", "cancelled", "error".
const char* finish_reason_name(FinishReason reason);

}  // namespace deepinfer
