#include "grammar/json_string_dfas.h"

#include "grammar/json_formats.h"
#include "grammar/json_lexemes.h"

#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace deepinfer::grammar {

const Dfa& json_char_dfa() {
  static const Dfa dfa = Dfa::from_regex(json_string_char()).value();
  return dfa;
}

const Dfa& json_body_dfa() {
  static const Dfa dfa = Dfa::from_regex(re_star(json_string_char())).value();
  return dfa;
}

Result<std::shared_ptr<const Dfa>> json_format_dfa(std::string_view format) {
  static std::mutex mutex;  // process-wide: guards `cache`
  // A memo of a pure function (format name -> its immutable DFA): never stale.
  static std::map<std::string, std::shared_ptr<const Dfa>, std::less<>> cache;  // process-wide: a memo
  {
    std::lock_guard lock(mutex);
    auto it = cache.find(format);
    if (it != cache.end()) return it->second;
  }
  DI_TRY(rule, format_rule(format));
  if (rule.kind != FormatRule::Kind::kString) return make_error(Code::kInternal, "format '{}' is not a string format", format);
  std::optional<Dfa> acc;
  for (const auto& re : rule.patterns) {
    DI_TRY(dfa, Dfa::from_regex(json_encode(re)));
    if (acc) {
      DI_TRY(both, Dfa::intersect(*acc, dfa));
      acc = std::move(both);
    } else {
      acc = std::move(dfa);
    }
  }
  auto shared = std::make_shared<const Dfa>(std::move(*acc));
  std::lock_guard lock(mutex);
  return cache.emplace(std::string(format), shared).first->second;
}

}  // namespace deepinfer::grammar
