// Regex: the split patterns of tokenizer.json, run by PCRE2 (UTF + UCP, JIT-compiled).
// HF `tokenizers` runs these patterns with Oniguruma; where the two engines differ in meaning, the
// pattern is rewritten to Oniguruma's: \s, \w and \h take Oniguruma's sets, and general categories
// (\p{L}, ...) include the characters PCRE2's older Unicode tables lack (unicode_category.h).
// Matches are iterated as Oniguruma's find_iter does (an empty match right after the previous
// match is skipped).
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
  struct Program;
  Regex(std::shared_ptr<const Program> plain, std::shared_ptr<const Program> recent)
      : plain_(std::move(plain)), recent_(std::move(recent)) {}
  static Result<std::shared_ptr<const Program>> build(const std::string& pattern, bool literal, std::string_view shown);

  // `recent_` also knows the characters of unicode_additions(); its larger classes are slower, so
  // it runs only on text that holds such characters. Null when the pattern needs no such help.
  std::shared_ptr<const Program> plain_, recent_;
};

// The pattern rewritten so PCRE2 gives it Oniguruma's meaning; `with_additions` adds the
// characters of unicode_additions() to general categories (exposed for tests).
std::string onig_to_pcre2(std::string_view pattern, bool with_additions);

}  // namespace deepinfer::text
