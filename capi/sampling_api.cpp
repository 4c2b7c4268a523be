// di_sampling: sampling parameters. Each setter checks its own range; vocabulary-dependent checks
// happen when a generation starts.
#include "handles.h"

#include <cmath>

using namespace deepinfer;
using namespace deepinfer::capi;

namespace {

template <class F>
di_error* with_params(di_sampling* sp, F&& f) {
  return guard([&]() -> Result<void> {
    auto p = samplings().get(sp);
    if (!p) return invalid_handle("sampling");
    return f(p->params);
  });
}

Result<void> in_range(const char* field, double v, double lo, double hi, bool lo_open = false) {
  if (!std::isfinite(v) || v > hi || (lo_open ? v <= lo : v < lo))
    return make_error(Code::kInvalidArgument, "{}={} is outside {}{}, {}]", field, v, lo_open ? "(" : "[", lo, hi);
  return ok();
}

Result<std::vector<int32_t>> ids_in(const int32_t* ids, size_t n) {
  DI_TRYV(check_in(ids, n, "ids"));
  for (size_t i = 0; i < n; ++i)
    if (ids[i] < 0) return make_error(Code::kInvalidArgument, "token id {} (at {}) is negative", ids[i], i);
  return std::vector<int32_t>(ids, ids + n);
}

}  // namespace

extern "C" {

di_error* di_sampling_create(di_sampling** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    *out = samplings().add<di_sampling>(std::make_shared<SamplingSpec>());
    return ok();
  });
}

di_error* di_engine_sampling_defaults(const di_engine* engine, di_sampling** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    auto e = engines().get(engine);
    if (!e) return invalid_handle("engine");
    *out = samplings().add<di_sampling>(std::make_shared<SamplingSpec>(SamplingSpec{e->sampling_defaults(), nullptr}));
    return ok();
  });
}

di_error* di_sampling_clone(const di_sampling* src, di_sampling** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    auto p = samplings().get(src);
    if (!p) return invalid_handle("sampling");
    *out = samplings().add<di_sampling>(std::make_shared<SamplingSpec>(*p));
    return ok();
  });
}

void di_sampling_free(di_sampling* sp) { samplings().remove(sp); }

di_error* di_sampling_set_temperature(di_sampling* sp, float t) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRYV(in_range("temperature", t, 0, 1e6));
    p.temperature = t;
    return ok();
  });
}

di_error* di_sampling_set_top_k(di_sampling* sp, int32_t k) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    if (k < 0) return make_error(Code::kInvalidArgument, "top_k={} must not be negative (0 turns it off)", k);
    p.top_k = k;
    return ok();
  });
}

di_error* di_sampling_set_top_p(di_sampling* sp, float v) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRYV(in_range("top_p", v, 0, 1, /*lo_open=*/true));
    p.top_p = v;
    return ok();
  });
}

di_error* di_sampling_set_min_p(di_sampling* sp, float v) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRYV(in_range("min_p", v, 0, 1));
    p.min_p = v;
    return ok();
  });
}

di_error* di_sampling_set_repetition_penalty(di_sampling* sp, float v) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRYV(in_range("repetition_penalty", v, 0.01, 100));
    p.repetition_penalty = v;
    return ok();
  });
}

di_error* di_sampling_set_presence_penalty(di_sampling* sp, float v) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRYV(in_range("presence_penalty", v, -2, 2));
    p.presence_penalty = v;
    return ok();
  });
}

di_error* di_sampling_set_frequency_penalty(di_sampling* sp, float v) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRYV(in_range("frequency_penalty", v, -2, 2));
    p.frequency_penalty = v;
    return ok();
  });
}

di_error* di_sampling_set_max_tokens(di_sampling* sp, int32_t n) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    if (n < 1) return make_error(Code::kInvalidArgument, "max_tokens={} must be at least 1", n);
    p.max_tokens = n;
    return ok();
  });
}

di_error* di_sampling_set_min_tokens(di_sampling* sp, int32_t n) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    if (n < 0) return make_error(Code::kInvalidArgument, "min_tokens={} must not be negative", n);
    p.min_tokens = n;
    return ok();
  });
}

di_error* di_sampling_set_n(di_sampling* sp, int32_t n) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    if (n < 1 || n > 128) return make_error(Code::kInvalidArgument, "n={} is outside [1, 128]", n);
    p.n = n;
    return ok();
  });
}

di_error* di_sampling_set_seed(di_sampling* sp, uint64_t seed) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    p.seed = seed;
    return ok();
  });
}

di_error* di_sampling_clear_seed(di_sampling* sp) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    p.seed.reset();
    return ok();
  });
}

di_error* di_sampling_set_ignore_eos(di_sampling* sp, int32_t ignore) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    p.ignore_eos = ignore != 0;
    return ok();
  });
}

di_error* di_sampling_set_logprobs(di_sampling* sp, int32_t n) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    if (n < -1 || n > 20) return make_error(Code::kInvalidArgument, "logprobs={} is outside [-1, 20]", n);
    p.logprobs = n < 0 ? std::nullopt : std::optional<int32_t>(n);
    return ok();
  });
}

di_error* di_sampling_set_prompt_logprobs(di_sampling* sp, int32_t n) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    if (n < -1 || n > 20) return make_error(Code::kInvalidArgument, "prompt_logprobs={} is outside [-1, 20]", n);
    p.prompt_logprobs = n < 0 ? std::nullopt : std::optional<int32_t>(n);
    return ok();
  });
}

di_error* di_sampling_set_logit_bias(di_sampling* sp, const int32_t* ids, const float* bias, size_t n) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRY(checked, ids_in(ids, n));
    DI_TRYV(check_in(bias, n, "bias"));
    std::map<int32_t, float> m;
    for (size_t i = 0; i < n; ++i) {
      DI_TRYV(in_range("logit_bias", bias[i], -100, 100));
      m[checked[i]] = bias[i];
    }
    p.logit_bias = std::move(m);
    return ok();
  });
}

di_error* di_sampling_set_allowed_tokens(di_sampling* sp, const int32_t* ids, size_t n) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRY(checked, ids_in(ids, n));
    p.allowed_token_ids = std::move(checked);
    return ok();
  });
}

di_error* di_sampling_set_stop_tokens(di_sampling* sp, const int32_t* ids, size_t n) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRY(checked, ids_in(ids, n));
    p.stop_token_ids = std::move(checked);
    return ok();
  });
}

di_error* di_sampling_add_stop_string(di_sampling* sp, const char* s, size_t len) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRYV(check_in(s, len, "s"));
    if (len == 0) return make_error(Code::kInvalidArgument, "a stop string must not be empty");
    // Only the stop strings are checked here (UTF-8, length and count limits); the other fields,
    // cross-field rules included, are checked when a generation starts.
    SamplingParams trial;
    trial.stop = p.stop;
    trial.stop.emplace_back(s, len);
    DI_TRYV(validate(trial, INT32_MAX));
    p.stop = std::move(trial.stop);
    return ok();
  });
}

di_error* di_sampling_clear_stop_strings(di_sampling* sp) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    p.stop.clear();
    return ok();
  });
}

di_error* di_sampling_set_include_stop_string(di_sampling* sp, int32_t include) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    p.include_stop_str_in_output = include != 0;
    return ok();
  });
}

di_error* di_sampling_set_skip_special_tokens(di_sampling* sp, int32_t skip) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    p.skip_special_tokens = skip != 0;
    return ok();
  });
}

}  // extern "C"
