// PreTokenizer: the "pre_tokenizer" of tokenizer.json, which cuts normalized text into the pieces
// BPE encodes one by one. Supported: Sequence, Split (regex or literal pattern, every behaviour,
// invert), Digits, and ByteLevel, which must come last (the tokenizer is byte-level). Pieces are
// raw UTF-8 bytes: the byte-to-character mapping of ByteLevel is folded into the BPE model.
#pragma once

#include "text/function_ref.h"
#include "util/result.h"

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string_view>
#include <vector>

namespace deepinfer::text {

// Receives one non-empty piece; the view is valid only during the call.
using PieceSink = FunctionRef<Result<void>(std::string_view)>;

class PreTokenizer {
 public:
  static Result<PreTokenizer> from_json(const nlohmann::json& spec);

  // Splits `text` (valid UTF-8) and passes each piece, in order, to `sink`.
  Result<void> split(std::string_view text, PieceSink sink) const { return run(0, text, sink); }

  class Step;

 private:
  Result<void> run(std::size_t step, std::string_view piece, PieceSink sink) const;

  std::vector<std::shared_ptr<const Step>> steps_;
};

}  // namespace deepinfer::text
