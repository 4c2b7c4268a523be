#include "engine/engine_config.h"

namespace deepinfer {
namespace {

constexpr OptionInfo kEngineOptions[] = {
    {"cuda_module", "string", "", "path of the CUDA backend module (default: beside libdeepinfer, then the loader's search path)"},
    {"dummy_weights", "bool", "0", "build the model from config.json alone with random weights (benchmarks of a shape)"},
    {"host_sampling", "bool", "0",
     "sample copies of the logits rows on the engine's threads instead of where they are (CUDA: the rows copied off the GPU)"},
};

}  // namespace

Result<void> set_engine_option(EngineConfig& config, std::string_view key, std::string_view value) {
  if (key == "cuda_module") {
    if (value.empty()) return make_error(Code::kInvalidArgument, "option \"cuda_module\": the path is empty");
    config.cuda_module.assign(value);
    return ok();
  }
  if (key == "dummy_weights") {
    DI_TRY(v, parse_bool_option(key, value));
    config.dummy_weights = v;
    return ok();
  }
  if (key == "host_sampling") {
    DI_TRY(v, parse_bool_option(key, value));
    config.host_sampling = v;
    return ok();
  }
  auto set = set_backend_option(config.backend, key, value);
  if (set || set.error().code != Code::kNotFound) return set;
  std::string known;
  for (const OptionInfo& o : engine_option_infos()) known += (known.empty() ? "" : ", ") + std::string(o.key);
  return make_error(Code::kInvalidArgument, "unknown option {} (known: {})", quote_option_text(key), known);
}

std::vector<OptionInfo> engine_option_infos() {
  std::vector<OptionInfo> rows(std::begin(kEngineOptions), std::end(kEngineOptions));
  for (const OptionInfo& o : backend_option_infos()) rows.push_back(o);
  return rows;
}

}  // namespace deepinfer
