// generation_config.json: the model's default sampling parameters and end-of-sequence ids.
#pragma once

#include "sample/sampling_params.h"
#include "util/result.h"

#include <string>
#include <string_view>
#include <vector>

namespace deepinfer {

struct GenerationDefaults {
  SamplingParams params;       // library defaults overridden by the file
  std::vector<int32_t> eos_ids;  // empty when the file names none
};

// Reads DIR/generation_config.json when present (absent: library defaults). Keys used: do_sample
// (false -> greedy), temperature, top_p, top_k, max_new_tokens, repetition_penalty, eos_token_id.
// Values no request could use (temperature -5, top_p 5, ids beyond int32) are Code::kModelFormat.
Result<GenerationDefaults> load_generation_defaults(const std::string& model_dir);
// The same from the file's text; `source` names it in errors.
Result<GenerationDefaults> parse_generation_defaults(std::string_view text, const std::string& source);

}  // namespace deepinfer
