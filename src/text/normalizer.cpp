#include "text/normalizer.h"

#include "text/tokenizer_limits.h"
#include "util/json_excerpt.h"

#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include <cstdlib>

namespace deepinfer::text {
namespace {

Result<void> add(const nlohmann::json& spec, std::vector<int>& forms, std::size_t depth) {
  if (spec.is_null()) return ok();
  if (depth > kMaxSequenceDepth) {
    return make_error(Code::kModelFormat, "normalizer: Sequences nested more than {} deep", kMaxSequenceDepth);
  }
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    return make_error(Code::kModelFormat, "normalizer: expected an object with a \"type\"");
  }
  const std::string type = spec["type"];
  const int stable = UTF8PROC_STABLE;
  if (type == "NFC") {
    forms.push_back(stable | UTF8PROC_COMPOSE);
  } else if (type == "NFD") {
    forms.push_back(stable | UTF8PROC_DECOMPOSE);
  } else if (type == "NFKC") {
    forms.push_back(stable | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  } else if (type == "NFKD") {
    forms.push_back(stable | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  } else if (type == "Sequence") {
    if (!spec.contains("normalizers") || !spec["normalizers"].is_array()) {
      return make_error(Code::kModelFormat, "normalizer Sequence: missing \"normalizers\" array");
    }
    for (const auto& n : spec["normalizers"]) {
      DI_TRYV(add(n, forms, depth + 1));
    }
  } else {
    return make_error(Code::kUnsupported, "normalizer type \"{}\" is not supported (NFC, NFD, NFKC, NFKD, Sequence)",
                      text_excerpt(type));
  }
  if (forms.size() > kMaxNormalizerSteps) {
    return make_error(Code::kModelFormat, "normalizer: more than {} steps", kMaxNormalizerSteps);
  }
  return ok();
}

}  // namespace

Result<Normalizer> Normalizer::from_json(const nlohmann::json& spec) {
  Normalizer n;
  DI_TRYV(add(spec, n.forms_, 0));
  return n;
}

Result<std::string> Normalizer::apply(std::string_view text) const {
  std::string cur(text);
  for (int options : forms_) {
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(cur.data()),
                                            static_cast<utf8proc_ssize_t>(cur.size()), &out,
                                            static_cast<utf8proc_option_t>(options));
    if (n < 0) return make_error(Code::kInvalidArgument, "normalization failed: {}", utf8proc_errmsg(n));
    cur.assign(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
    std::free(out);
  }
  return cur;
}

}  // namespace deepinfer::text
