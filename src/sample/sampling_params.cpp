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

namespace sampling_checks {

Result<void> temperature(float v) {
  if (!(v >= 0.0f && v <= kMaxTemperature))  // also rejects NaN
    return make_error(Code::kInvalidArgument, "temperature={} is outside [0, {}] (0 is greedy)", v, kMaxTemperature);
  return ok();
}
Result<void> top_k(int32_t v) {
  if (v < -1) return make_error(Code::kInvalidArgument, "top_k={} must be -1 or 0 (off) or positive", v);
  return ok();
}
Result<void> top_p(float v) {
  if (!(v > 0.0f && v <= 1.0f)) return make_error(Code::kInvalidArgument, "top_p={} is outside (0, 1]", v);
  return ok();
}
Result<void> min_p(float v) { return check_range("min_p", v, 0.0f, 1.0f); }
Result<void> repetition_penalty(float v) {
  return check_range("repetition_penalty", v, kMinRepetitionPenalty, kMaxRepetitionPenalty);
}
Result<void> presence_penalty(float v) {
  return check_range("presence_penalty", v, -kMaxAbsPresenceFrequency, kMaxAbsPresenceFrequency);
}
Result<void> frequency_penalty(float v) {
  return check_range("frequency_penalty", v, -kMaxAbsPresenceFrequency, kMaxAbsPresenceFrequency);
}
Result<void> logit_bias(int32_t token, float bias) {
  DI_TRYV(token_id("logit_bias", token));
  if (!(bias >= -kMaxAbsLogitBias && bias <= kMaxAbsLogitBias))
    return make_error(Code::kInvalidArgument, "logit_bias[{}]={} is outside [{}, {}]", token, bias, -kMaxAbsLogitBias,
                      kMaxAbsLogitBias);
  return ok();
}
Result<void> max_tokens(int32_t v) {
  if (v < 1) return make_error(Code::kInvalidArgument, "max_tokens={} must be >= 1", v);
  return ok();
}
Result<void> min_tokens(int32_t v) {
  if (v < 0) return make_error(Code::kInvalidArgument, "min_tokens={} must not be negative", v);
  return ok();
}
Result<void> n(int32_t v) {
  if (v < 1 || v > kMaxCompletions) return make_error(Code::kInvalidArgument, "n={} is outside [1, {}]", v, kMaxCompletions);
  return ok();
}
Result<void> first_completion(int32_t v) {
  if (v < 0 || v > kMaxFirstCompletion)
    return make_error(Code::kInvalidArgument, "first_completion={} is outside [0, {}]", v, kMaxFirstCompletion);
  return ok();
}
Result<void> logprobs(const char* field, std::optional<int32_t> v) { return check_count(field, v); }
Result<void> stop_strings(const std::vector<std::string>& stop) {
  if (stop.size() > kMaxStopStrings)
    return make_error(Code::kInvalidArgument, "stop: {} strings exceed the limit of {}", stop.size(), kMaxStopStrings);
  for (size_t i = 0; i < stop.size(); ++i) {
    const std::string& s = stop[i];
    if (s.empty() || s.size() > kMaxStopStringBytes)
      return make_error(Code::kInvalidArgument, "stop[{}] has {} bytes, must be 1..{}", i, s.size(), kMaxStopStringBytes);
    if (!is_valid_utf8(s)) return make_error(Code::kInvalidArgument, "stop[{}] is not valid UTF-8", i);
  }
  return ok();
}
Result<void> token_id(const char* field, int32_t token) {
  if (token < 0) return make_error(Code::kInvalidArgument, "{}: token id {} is negative", field, token);
  return ok();
}

}  // namespace sampling_checks

Result<void> validate(const SamplingParams& p, int32_t vocab_size) {
  namespace check = sampling_checks;
  if (vocab_size <= 0) return make_error(Code::kInvalidArgument, "vocab_size={} must be positive", vocab_size);
  DI_TRYV(check::temperature(p.temperature));
  DI_TRYV(check::top_k(p.top_k));
  DI_TRYV(check::top_p(p.top_p));
  DI_TRYV(check::min_p(p.min_p));
  DI_TRYV(check::repetition_penalty(p.repetition_penalty));
  DI_TRYV(check::presence_penalty(p.presence_penalty));
  DI_TRYV(check::frequency_penalty(p.frequency_penalty));
  for (const auto& [token, bias] : p.logit_bias) {
    DI_TRYV(check_token("logit_bias", token, vocab_size));
    DI_TRYV(check::logit_bias(token, bias));
  }
  for (int32_t token : p.allowed_token_ids) {
    DI_TRYV(check_token("allowed_token_ids", token, vocab_size));
  }
  DI_TRYV(check::max_tokens(p.max_tokens));
  DI_TRYV(check::min_tokens(p.min_tokens));
  if (p.min_tokens > p.max_tokens)
    return make_error(Code::kInvalidArgument, "min_tokens={} is outside [0, max_tokens={}]", p.min_tokens, p.max_tokens);
  for (int32_t token : p.stop_token_ids) {
    DI_TRYV(check_token("stop_token_ids", token, vocab_size));
  }
  DI_TRYV(check::stop_strings(p.stop));
  DI_TRYV(check::n(p.n));
  DI_TRYV(check::first_completion(p.first_completion));
  DI_TRYV(check::logprobs("logprobs", p.logprobs));
  DI_TRYV(check::logprobs("prompt_logprobs", p.prompt_logprobs));
  if (p.logprobs_mode != LogprobsMode::kRaw && p.logprobs_mode != LogprobsMode::kProcessed)
    return make_error(Code::kInvalidArgument, "logprobs_mode={} is not a LogprobsMode", static_cast<int32_t>(p.logprobs_mode));
  return ok();
}

}  // namespace deepinfer
