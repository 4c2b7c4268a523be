// Regex: the split patterns of tokenizer.json, run by PCRE2 (UTF + UCP, JIT-compiled).
// HF `tokenizers` runs these patterns with Oniguruma; where the two engines differ in meaning
// (\s, \w, \h) the pattern is rewritten to Oniguruma's sets, and matches are iterated the way
// Oniguruma's find_iter does (an empty match right after the previous match is skipped).
#pragma once

#include "text/function_ref.h"
#include "util/result.h"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace deepinfer::text {

class Regex {
 public:
  // `pattern` in Oniguruma syntax, as tokenizer.json stores it. A bad pattern is Code::kModelFormat
  // with PCRE2's message and offset.
  static Result<Regex> compile(std::string_view pattern);
  // A regex that matches `text` literally.
  static Result<Regex> literal(std::string_view text);

  // Calls on_match(start, end) for each match in `text` (valid UTF-8), left to right; stops at
  // the first error from on_match or from the matcher.
  using MatchSink = FunctionRef<Result<void>(std::size_t, std::size_t)>;
  Result<void> for_each_match(std::string_view text, MatchSink on_match) const;

 private:
  struct Compiled;
  explicit Regex(std::shared_ptr<const Compiled> code) : code_(std::move(code)) {}
  static Result<Regex> build(const std::string& pattern, bool literal, std::string_view shown);

  std::shared_ptr<const Compiled> code_;
};

// The pattern rewritten so PCRE2 gives it Oniguruma's meaning (exposed for tests).
std::string onig_to_pcre2(std::string_view pattern);

}  // namespace deepinfer::text
