#include "sample/sampling_params.h"

#include <cmath>
#include <string_view>

namespace deepinfer {
namespace {

Result<void> check_token(const char* field, int32_t token, int32_t vocab_size) {
  if (token < 0 || token >= vocab_size) {
    return make_error(Code::kInvalidArgument, "{}: token id {} is outside the vocabulary [0, {})",
                      field, token, vocab_size);
  }
  return ok();
}

Result<void> check_range(const char* field, float value, float lo, float hi) {
  if (!(value >= lo && value <= hi)) {  // also rejects NaN
    return make_error(Code::kInvalidArgument, "{}={} is outside [{}, {}]", field, value, lo, hi);
  }
  return ok();
}

Result<void> check_count(const char* field, std::optional<int32_t> value) {
  if (value && (*value < 0 || *value > kMaxLogprobs)) {
    return make_error(Code::kInvalidArgument, "{}={} is outside [0, {}]", field, *value,
                      kMaxLogprobs);
  }
  return ok();
}

// Stop strings are matched byte-wise; valid UTF-8 guarantees a match never splits a code point.
bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t cp = 0;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2, cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, cp = b & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

}  // namespace

Result<void> validate(const SamplingParams& p, int32_t vocab_size) {
  if (vocab_size <= 0) {
    return make_error(Code::kInvalidArgument, "vocab_size={} must be positive", vocab_size);
  }
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return make_error(Code::kInvalidArgument, "temperature={} must be finite and >= 0",
                      p.temperature);
  }
  if (p.top_k < -1) {
    return make_error(Code::kInvalidArgument, "top_k={} must be -1 or 0 (off) or positive",
                      p.top_k);
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return make_error(Code::kInvalidArgument, "top_p={} is outside (0, 1]", p.top_p);
  }
  DI_TRYV(check_range("min_p", p.min_p, 0.0f, 1.0f));
  DI_TRYV(check_range("repetition_penalty", p.repetition_penalty, kMinRepetitionPenalty,
                      kMaxRepetitionPenalty));
  DI_TRYV(check_range("presence_penalty", p.presence_penalty, -kMaxAbsPresenceFrequency,
                      kMaxAbsPresenceFrequency));
  DI_TRYV(check_range("frequency_penalty", p.frequency_penalty, -kMaxAbsPresenceFrequency,
                      kMaxAbsPresenceFrequency));
  for (const auto& [token, bias] : p.logit_bias) {
    DI_TRYV(check_token("logit_bias", token, vocab_size));
    if (!(bias >= -kMaxAbsLogitBias && bias <= kMaxAbsLogitBias)) {
      return make_error(Code::kInvalidArgument, "logit_bias[{}]={} is outside [{}, {}]", token,
                        bias, -kMaxAbsLogitBias, kMaxAbsLogitBias);
    }
  }
  for (int32_t token : p.allowed_token_ids) {
    DI_TRYV(check_token("allowed_token_ids", token, vocab_size));
  }
  if (p.max_tokens < 1) {
    return make_error(Code::kInvalidArgument, "max_tokens={} must be >= 1", p.max_tokens);
  }
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens) {
    return make_error(Code::kInvalidArgument, "min_tokens={} is outside [0, max_tokens={}]",
                      p.min_tokens, p.max_tokens);
  }
  for (int32_t token : p.stop_token_ids) {
    DI_TRYV(check_token("stop_token_ids", token, vocab_size));
  }
  if (p.stop.size() > kMaxStopStrings) {
    return make_error(Code::kInvalidArgument, "stop: {} strings exceed the limit of {}",
                      p.stop.size(), kMaxStopStrings);
  }
  for (size_t i = 0; i < p.stop.size(); ++i) {
    const std::string& s = p.stop[i];
    if (s.empty() || s.size() > kMaxStopStringBytes) {
      return make_error(Code::kInvalidArgument, "stop[{}] has {} bytes, must be 1..{}", i,
                        s.size(), kMaxStopStringBytes);
    }
    if (!is_valid_utf8(s)) {
      return make_error(Code::kInvalidArgument, "stop[{}] is not valid UTF-8", i);
    }
  }
  if (p.n < 1 || p.n > kMaxCompletions) {
    return make_error(Code::kInvalidArgument, "n={} is outside [1, {}]", p.n, kMaxCompletions);
  }
  DI_TRYV(check_count("logprobs", p.logprobs));
  DI_TRYV(check_count("prompt_logprobs", p.prompt_logprobs));
  if (p.logprobs_mode != LogprobsMode::kRaw && p.logprobs_mode != LogprobsMode::kProcessed) {
    return make_error(Code::kInvalidArgument, "logprobs_mode={} is not a LogprobsMode",
                      static_cast<int32_t>(p.logprobs_mode));
  }
  return ok();
}

}  // namespace deepinfer
