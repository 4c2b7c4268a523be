#include "engine/generation_defaults.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace deepinfer {

Result<GenerationDefaults> load_generation_defaults(const std::string& model_dir) {
  GenerationDefaults d;
  const std::filesystem::path path = std::filesystem::path(model_dir) / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return d;
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return make_error(Code::kModelFormat, "{}: not a JSON object", path.string());
  auto number = [&](const char* key, auto& field) -> Result<void> {
    if (!j.contains(key) || j[key].is_null()) return ok();
    if (!j[key].is_number()) return make_error(Code::kModelFormat, "{}: \"{}\" must be a number", path.string(), key);
    field = j[key].get<std::remove_reference_t<decltype(field)>>();
    return ok();
  };
  SamplingParams& p = d.params;
  DI_TRYV(number("temperature", p.temperature));
  DI_TRYV(number("top_p", p.top_p));
  DI_TRYV(number("top_k", p.top_k));
  DI_TRYV(number("max_new_tokens", p.max_tokens));
  DI_TRYV(number("repetition_penalty", p.repetition_penalty));
  if (j.contains("do_sample") && j["do_sample"].is_boolean() && !j["do_sample"].get<bool>()) p.temperature = 0.0f;
  if (j.contains("eos_token_id")) {
    const auto& e = j["eos_token_id"];
    if (e.is_number_integer()) d.eos_ids.push_back(e.get<int32_t>());
    else if (e.is_array())
      for (const auto& v : e)
        if (v.is_number_integer()) d.eos_ids.push_back(v.get<int32_t>());
  }
  if (p.top_k < 0) p.top_k = 0;
  return d;
}

}  // namespace deepinfer
