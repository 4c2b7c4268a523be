// Normalizer: the "normalizer" of tokenizer.json, a sequence of Unicode normalization forms
// (NFC, NFD, NFKC, NFKD via utf8proc). Other normalizer types are a load error naming the type.
#pragma once

#include "util/result.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::text {

class Normalizer {
 public:
  // `spec` is the JSON value of "normalizer" (null: no normalization).
  static Result<Normalizer> from_json(const nlohmann::json& spec);

  bool is_identity() const { return forms_.empty(); }

  // `text` must be valid UTF-8.
  Result<std::string> apply(std::string_view text) const;

 private:
  std::vector<int> forms_;  // utf8proc option sets, applied in order
};

}  // namespace deepinfer::text
