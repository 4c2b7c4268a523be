// config.json and generation_config.json parsing. Input: the JSON text (both parsers read it).
#include "engine/generation_defaults.h"
#include "model/config.h"

#include <cmath>
#include <cstdlib>

using namespace deepinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto c = ModelConfig::from_json(text, "config.json")) {
    // What loads must be usable: finite rope tables, sizes within the validated bounds.
    const ModelConfig& m = c.value();
    for (const RopeConfig* r : {&m.rope_main, &m.rope_compress})
      for (const float f : r->inv_freq())
        if (!std::isfinite(f)) std::abort();
    if (m.index_topk > m.max_position_embeddings || m.sliding_window > m.max_position_embeddings) std::abort();
  }
  if (auto d = parse_generation_defaults(text, "generation_config.json")) {
    if (!validate(d.value().params, 1 << 24)) std::abort();  // defaults are valid parameters
  }
  return 0;
}
