#include "engine/generation_defaults.h"

#include "util/file_reading.h"
#include "util/json_excerpt.h"
#include "util/json_int.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

namespace deepinfer {
namespace {

constexpr uint64_t kMaxFileBytes = 16ull << 20;  // a few hundred bytes in practice

}  // namespace

Result<GenerationDefaults> load_generation_defaults(const std::string& model_dir) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "generation_config.json";
  if (!entry_exists(path)) return GenerationDefaults{};
  DI_TRY(text, read_whole_file(path, FileLimits{kMaxFileBytes}));
  return parse_generation_defaults(text, path.string());
}

Result<GenerationDefaults> parse_generation_defaults(std::string_view text, const std::string& name) {
  GenerationDefaults d;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return make_error(Code::kModelFormat, "{}: not a JSON object", name);
  auto given = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  auto real = [&](const char* key, float& field) -> Result<void> {
    if (!given(key)) return ok();
    const nlohmann::json& v = j[key];
    // Beyond float range the conversion is undefined: such values are refused like any non-finite one.
    if (!v.is_number() || !(std::fabs(v.get<double>()) <= 3.0e38))
      return make_error(Code::kModelFormat, "{}: \"{}\" must be a finite number, got {}", name, key, json_excerpt(v));
    field = static_cast<float>(v.get<double>());
    return ok();
  };
  auto integer = [&](const char* key, int32_t& field) -> Result<void> {
    if (!given(key)) return ok();
    const auto v = json_int32(j[key]);
    if (!v) return make_error(Code::kModelFormat, "{}: \"{}\" must be a 32-bit integer, got {}", name, key, json_excerpt(j[key]));
    field = *v;
    return ok();
  };
  SamplingParams& p = d.params;
  DI_TRYV(real("temperature", p.temperature));
  DI_TRYV(real("top_p", p.top_p));
  DI_TRYV(integer("top_k", p.top_k));
  DI_TRYV(integer("max_new_tokens", p.max_tokens));
  DI_TRYV(real("repetition_penalty", p.repetition_penalty));
  if (j.contains("do_sample") && j["do_sample"].is_boolean() && !j["do_sample"].get<bool>()) p.temperature = 0.0f;
  if (p.top_k < 0) p.top_k = 0;  // HF's spellings of "no top-k"
  // Defaults no request could use would fail every generation that keeps them, blaming the caller.
  if (p.max_tokens < 1) return make_error(Code::kModelFormat, "{}: max_new_tokens = {} must be >= 1", name, p.max_tokens);
  if (auto valid = validate(p, INT32_MAX); !valid) return make_error(Code::kModelFormat, "{}: {}", name, valid.error().message);
  auto add_eos = [&](const nlohmann::json& v) -> Result<void> {
    const auto id = json_int32(v);
    if (!id || *id < 0) return make_error(Code::kModelFormat, "{}: eos_token_id {} is not a token id", name, json_excerpt(v));
    d.eos_ids.push_back(*id);
    return ok();
  };
  if (given("eos_token_id")) {
    const nlohmann::json& e = j["eos_token_id"];
    if (!e.is_array()) {
      DI_TRYV(add_eos(e));
    } else {
      for (const nlohmann::json& v : e) {
        DI_TRYV(add_eos(v));
      }
    }
  }
  return d;
}

}  // namespace deepinfer
