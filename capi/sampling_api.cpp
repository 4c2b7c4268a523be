// di_sampling: sampling parameters. Each setter checks its own range; vocabulary-dependent checks
// happen when a generation starts.
#include "handles.h"


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

template <class F>
di_error* read_params(const di_sampling* sp, F&& f) {
  return guard([&]() -> Result<void> {
    auto p = samplings().get(sp);
    if (!p) return invalid_handle("sampling");
    return f(static_cast<const SamplingParams&>(p->params));
  });
}

// Setter of one field: checks it with the engine's own rule, then assigns it.
template <class T, class Check>
di_error* set_field(di_sampling* sp, T SamplingParams::*field, T value, Check check) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRYV(check(value));
    p.*field = value;
    return ok();
  });
}

template <class T>
di_error* get_field(const di_sampling* sp, T SamplingParams::*field, T* out) {
  return read_params(sp, [&](const SamplingParams& p) -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    *out = p.*field;
    return ok();
  });
}

Result<std::vector<int32_t>> ids_in(const char* field, const int32_t* ids, size_t n) {
  DI_TRYV(check_in(ids, n, "ids"));
  for (size_t i = 0; i < n; ++i) {
    DI_TRYV(sampling_checks::token_id(field, ids[i]));
  }
  return std::vector<int32_t>(ids, ids + n);
}

int32_t optional_count(const std::optional<int32_t>& v) { return v ? *v : -1; }

template <class F>
di_error* get_flag(const di_sampling* sp, int32_t* out, F&& f) {
  return read_params(sp, [&](const SamplingParams& p) -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    *out = f(p);
    return ok();
  });
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

namespace check = sampling_checks;

di_error* di_sampling_set_temperature(di_sampling* sp, float t) { return set_field(sp, &SamplingParams::temperature, t, check::temperature); }
di_error* di_sampling_set_top_k(di_sampling* sp, int32_t k) { return set_field(sp, &SamplingParams::top_k, k, check::top_k); }
di_error* di_sampling_set_top_p(di_sampling* sp, float v) { return set_field(sp, &SamplingParams::top_p, v, check::top_p); }
di_error* di_sampling_set_min_p(di_sampling* sp, float v) { return set_field(sp, &SamplingParams::min_p, v, check::min_p); }
di_error* di_sampling_set_repetition_penalty(di_sampling* sp, float v) {
  return set_field(sp, &SamplingParams::repetition_penalty, v, check::repetition_penalty);
}
di_error* di_sampling_set_presence_penalty(di_sampling* sp, float v) {
  return set_field(sp, &SamplingParams::presence_penalty, v, check::presence_penalty);
}
di_error* di_sampling_set_frequency_penalty(di_sampling* sp, float v) {
  return set_field(sp, &SamplingParams::frequency_penalty, v, check::frequency_penalty);
}
di_error* di_sampling_set_max_tokens(di_sampling* sp, int32_t n) { return set_field(sp, &SamplingParams::max_tokens, n, check::max_tokens); }
di_error* di_sampling_set_min_tokens(di_sampling* sp, int32_t n) { return set_field(sp, &SamplingParams::min_tokens, n, check::min_tokens); }
di_error* di_sampling_set_n(di_sampling* sp, int32_t n) { return set_field(sp, &SamplingParams::n, n, check::n); }
di_error* di_sampling_set_first_completion(di_sampling* sp, int32_t first) {
  return set_field(sp, &SamplingParams::first_completion, first, check::first_completion);
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
    const auto v = n == -1 ? std::nullopt : std::optional<int32_t>(n);
    DI_TRYV(check::logprobs("logprobs", v));
    p.logprobs = v;
    return ok();
  });
}

di_error* di_sampling_set_prompt_logprobs(di_sampling* sp, int32_t n) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    const auto v = n == -1 ? std::nullopt : std::optional<int32_t>(n);
    DI_TRYV(check::logprobs("prompt_logprobs", v));
    p.prompt_logprobs = v;
    return ok();
  });
}

di_error* di_sampling_set_logit_bias(di_sampling* sp, const int32_t* ids, const float* bias, size_t n) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRYV(check_in(ids, n, "ids"));
    DI_TRYV(check_in(bias, n, "bias"));
    std::map<int32_t, float> m;
    for (size_t i = 0; i < n; ++i) {
      DI_TRYV(check::logit_bias(ids[i], bias[i]));
      m[ids[i]] = bias[i];
    }
    p.logit_bias = std::move(m);
    return ok();
  });
}

di_error* di_sampling_set_allowed_tokens(di_sampling* sp, const int32_t* ids, size_t n) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRY(checked, ids_in("allowed_tokens", ids, n));
    p.allowed_token_ids = std::move(checked);
    return ok();
  });
}

di_error* di_sampling_set_stop_tokens(di_sampling* sp, const int32_t* ids, size_t n) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRY(checked, ids_in("stop_tokens", ids, n));
    p.stop_token_ids = std::move(checked);
    return ok();
  });
}

di_error* di_sampling_add_stop_string(di_sampling* sp, const char* s, size_t len) {
  return with_params(sp, [&](SamplingParams& p) -> Result<void> {
    DI_TRYV(check_in(s, len, "s"));
    std::vector<std::string> stop = p.stop;
    stop.emplace_back(s ? s : "", len);
    DI_TRYV(check::stop_strings(stop));
    p.stop = std::move(stop);
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

// ---- getters

di_error* di_sampling_get_temperature(const di_sampling* sp, float* out) { return get_field(sp, &SamplingParams::temperature, out); }
di_error* di_sampling_get_top_k(const di_sampling* sp, int32_t* out) { return get_field(sp, &SamplingParams::top_k, out); }
di_error* di_sampling_get_top_p(const di_sampling* sp, float* out) { return get_field(sp, &SamplingParams::top_p, out); }
di_error* di_sampling_get_min_p(const di_sampling* sp, float* out) { return get_field(sp, &SamplingParams::min_p, out); }
di_error* di_sampling_get_repetition_penalty(const di_sampling* sp, float* out) {
  return get_field(sp, &SamplingParams::repetition_penalty, out);
}
di_error* di_sampling_get_presence_penalty(const di_sampling* sp, float* out) {
  return get_field(sp, &SamplingParams::presence_penalty, out);
}
di_error* di_sampling_get_frequency_penalty(const di_sampling* sp, float* out) {
  return get_field(sp, &SamplingParams::frequency_penalty, out);
}
di_error* di_sampling_get_max_tokens(const di_sampling* sp, int32_t* out) { return get_field(sp, &SamplingParams::max_tokens, out); }
di_error* di_sampling_get_min_tokens(const di_sampling* sp, int32_t* out) { return get_field(sp, &SamplingParams::min_tokens, out); }
di_error* di_sampling_get_n(const di_sampling* sp, int32_t* out) { return get_field(sp, &SamplingParams::n, out); }
di_error* di_sampling_get_first_completion(const di_sampling* sp, int32_t* out) {
  return get_field(sp, &SamplingParams::first_completion, out);
}

di_error* di_sampling_get_seed(const di_sampling* sp, uint64_t* seed, int32_t* has_seed) {
  return read_params(sp, [&](const SamplingParams& p) -> Result<void> {
    DI_TRYV(check_out(seed, "seed"));
    DI_TRYV(check_out(has_seed, "has_seed"));
    *seed = p.seed.value_or(0);
    *has_seed = p.seed ? 1 : 0;
    return ok();
  });
}

di_error* di_sampling_get_ignore_eos(const di_sampling* sp, int32_t* out) {
  return get_flag(sp, out, [](const SamplingParams& p) { return p.ignore_eos ? 1 : 0; });
}
di_error* di_sampling_get_logprobs(const di_sampling* sp, int32_t* out) {
  return get_flag(sp, out, [](const SamplingParams& p) { return optional_count(p.logprobs); });
}
di_error* di_sampling_get_prompt_logprobs(const di_sampling* sp, int32_t* out) {
  return get_flag(sp, out, [](const SamplingParams& p) { return optional_count(p.prompt_logprobs); });
}
di_error* di_sampling_get_include_stop_string(const di_sampling* sp, int32_t* out) {
  return get_flag(sp, out, [](const SamplingParams& p) { return p.include_stop_str_in_output ? 1 : 0; });
}
di_error* di_sampling_get_skip_special_tokens(const di_sampling* sp, int32_t* out) {
  return get_flag(sp, out, [](const SamplingParams& p) { return p.skip_special_tokens ? 1 : 0; });
}

di_error* di_sampling_get_logit_bias(const di_sampling* sp, int32_t* ids, float* bias, size_t cap, size_t* out_len) {
  return read_params(sp, [&](const SamplingParams& p) -> Result<void> {
    std::vector<int32_t> keys;
    std::vector<float> values;
    for (const auto& [id, b] : p.logit_bias) {
      keys.push_back(id);
      values.push_back(b);
    }
    DI_TRYV(check_out(out_len, "out_len"));
    if (keys.size() > cap) return copy_out(keys.data(), keys.size(), ids, cap, out_len);  // the size needed
    if (!keys.empty() && (!ids || !bias)) return make_error(Code::kInvalidArgument, "ids and bias must not be NULL");
    std::copy(keys.begin(), keys.end(), ids);
    std::copy(values.begin(), values.end(), bias);
    *out_len = keys.size();
    return ok();
  });
}

di_error* di_sampling_get_allowed_tokens(const di_sampling* sp, int32_t* buf, size_t cap, size_t* out_len) {
  return read_params(sp, [&](const SamplingParams& p) {
    return copy_out(p.allowed_token_ids.data(), p.allowed_token_ids.size(), buf, cap, out_len);
  });
}

di_error* di_sampling_get_stop_tokens(const di_sampling* sp, int32_t* buf, size_t cap, size_t* out_len) {
  return read_params(sp, [&](const SamplingParams& p) {
    return copy_out(p.stop_token_ids.data(), p.stop_token_ids.size(), buf, cap, out_len);
  });
}

di_error* di_sampling_stop_string_count(const di_sampling* sp, size_t* out) {
  return read_params(sp, [&](const SamplingParams& p) -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    *out = p.stop.size();
    return ok();
  });
}

di_error* di_sampling_get_stop_string(const di_sampling* sp, size_t i, char* buf, size_t cap, size_t* out_len) {
  return read_params(sp, [&](const SamplingParams& p) -> Result<void> {
    if (i >= p.stop.size()) return make_error(Code::kInvalidArgument, "stop string {} of {}", i, p.stop.size());
    return copy_out(p.stop[i].data(), p.stop[i].size(), buf, cap, out_len);
  });
}

}  // extern "C"
