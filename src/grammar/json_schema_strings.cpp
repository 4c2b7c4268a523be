#include "grammar/json_schema_lowering.h"

#include "grammar/compile_budget.h"
#include "grammar/json_lexemes.h"
#include "grammar/json_string_dfas.h"
#include "grammar/json_string_set.h"
#include "grammar/number_range.h"
#include "grammar/regex_parser.h"

#include <fmt/format.h>

namespace deepinfer::grammar {

// The JSON string bodies (between quotes) whose values meet the pattern and format constraints
// of `m` (length bounds aside).
Result<Dfa> SchemaLowering::string_body(const Merged& m, const std::string& where) {
  auto fail = [&](const Error& e) { return make_error(Code::kGrammar, "json schema: string constraints at {}: {}", where, e.message); };
  std::optional<Dfa> acc;
  auto narrow = [&](const Dfa& d) -> Result<void> {
    if (!acc) {
      acc = d;
      return ok();
    }
    auto both = Dfa::intersect(*acc, d);
    if (!both) return fail(both.error());
    acc = std::move(both.value());
    return ok();
  };
  Regex any = re_star(re_chars(CodepointSet::all()));
  for (const auto& p : m.patterns) {
    auto re = parse_ecmascript_regex(p);
    if (!re) return make_error(Code::kGrammar, "json schema: pattern at {}: {}", where, re.error().message);
    auto d = Dfa::from_regex(json_encode(re_seq({any, re.value(), any})));
    if (!d) return fail(d.error());
    DI_TRYV(narrow(d.value()));
  }
  for (const auto& f : m.formats) {
    auto d = json_format_dfa(f);
    if (!d) return make_error(Code::kGrammar, "{} (at {})", d.error().message, where);
    DI_TRYV(narrow(*d.value()));
  }
  if (!acc) acc = json_body_dfa();
  for (const auto& p : m.not_patterns) {
    auto re = parse_ecmascript_regex(p);
    if (!re) return make_error(Code::kGrammar, "json schema: pattern at {}: {}", where, re.error().message);
    auto d = Dfa::from_regex(json_encode(re_seq({any, re.value(), any})));
    if (!d) return fail(d.error());
    auto rest = Dfa::subtract(*acc, d.value());
    if (!rest) return fail(rest.error());
    acc = std::move(rest.value());
  }
  return std::move(*acc);
}

// The same with the length bounds unrolled into the automaton (for keys, which the lowering
// intersects and subtracts as languages; values use string_terminal's counter).
Result<Dfa> SchemaLowering::string_content(const Merged& m, const std::string& where) {
  DI_TRY(body, string_body(m, where));
  if (m.min_length == 0 && m.max_length == UINT64_MAX) return std::move(body);
  uint64_t limit = Dfa::kDefaultMaxStates / json_char_dfa().num_states();
  if (m.min_length > limit || (m.max_length != UINT64_MAX && m.max_length > limit)) {
    return make_error(Code::kGrammar, "json schema: property names with minLength/maxLength above {} are not supported (at {})", limit, where);
  }
  uint32_t max = m.max_length == UINT64_MAX ? kUnbounded : static_cast<uint32_t>(m.max_length);
  auto counted = Dfa::repeat(json_char_dfa(), static_cast<uint32_t>(m.min_length), max);
  if (!counted) return make_error(Code::kGrammar, "json schema: string constraints at {}: {}", where, counted.error().message);
  DI_TRY(both, Dfa::intersect(counted.value(), body));
  return std::move(both);
}

// The terminal of the JSON strings (quotes included) meeting the string constraints of `m`;
// nullopt when there is none. Length bounds become a counter (CountedDfa).
Result<std::optional<uint32_t>> SchemaLowering::string_terminal(const Merged& m, const std::string& where) {
  DI_TRY(body, string_body(m, where));
  DI_TRY(wrapped, body.wrap('"', '"'));
  std::vector<std::string> excluded;
  for (const auto& x : m.excluded) {
    if (x.is_string()) excluded.push_back(x.get<std::string>());
  }
  if (!excluded.empty()) {
    auto values = json_strings_dfa(std::move(excluded));
    if (!values) return make_error(Code::kGrammar, "json schema: {} (at {})", values.error().message, where);
    DI_TRY(rest, Dfa::subtract(wrapped, values.value()));
    wrapped = std::move(rest);
  }
  if (wrapped.empty_language()) return std::optional<uint32_t>();
  auto quoted = std::make_shared<const Dfa>(std::move(wrapped));
  if (m.min_length == 0 && m.max_length == UINT64_MAX) return std::optional<uint32_t>(builder_.add_terminal(quoted));
  if (m.min_length > m.max_length) return std::optional<uint32_t>();
  if (m.min_length >= kUnbounded) return make_error(Code::kGrammar, "json schema: minLength {} is too large (at {})", m.min_length, where);
  uint32_t max = m.max_length >= kUnbounded ? kUnbounded : static_cast<uint32_t>(m.max_length);
  auto counted = CountedDfa::create(*quoted, static_cast<uint32_t>(m.min_length), max);
  if (!counted) return make_error(Code::kGrammar, "json schema: string constraints at {}: {}", where, counted.error().message);
  if (counted.value()->empty()) return std::optional<uint32_t>();
  return std::optional<uint32_t>(builder_.add_counted_terminal(std::move(quoted), std::move(counted.value())));
}

Result<uint32_t> SchemaLowering::quoted_terminal(const Dfa& content) {
  DI_TRY(q, content.wrap('"', '"'));
  return builder_.add_terminal(std::make_shared<const Dfa>(std::move(q)));
}

// Unconstrained numbers keep exponents; bounds and multipleOf use exact decimal automata.
Result<uint32_t> SchemaLowering::number_terminal(const Merged& m, const std::string& where) {
  bool integers = !(m.types & kTypeFraction);
  std::vector<Regex> excluded;  // every spelling of each excluded number (without exponent)
  for (const auto& x : m.excluded) {
    if (x.is_number()) excluded.push_back(json_value_regex(x, re_empty()));
  }
  if (!m.lower && !m.upper && m.multiple_of.empty() && excluded.empty() && (m.types & kTypeInteger)) {
    return terminal(json_number(integers));
  }
  DI_TRY(dfa, bounded_number_dfa(m.lower, m.upper, integers));
  if (!(m.types & kTypeInteger)) {  // non-integers only (from a negated type): a non-zero fraction digit
    DI_TRY(fractions, Dfa::from_regex(parse_ecmascript_regex("-?(?:0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*").value()));
    DI_TRY(both, Dfa::intersect(dfa, fractions));
    dfa = std::move(both);
  }
  if (!excluded.empty()) {
    DI_TRY(values, Dfa::from_regex(re_alt(std::move(excluded))));
    DI_TRY(rest, Dfa::subtract(dfa, values));
    dfa = std::move(rest);
  }
  for (const auto& step : m.multiple_of) {
    auto steps = multiple_of_dfa(step);
    if (!steps) return make_error(Code::kGrammar, "json schema: {} (at {})", steps.error().message, where);
    DI_TRY(both, Dfa::intersect(dfa, steps.value()));
    dfa = std::move(both);
  }
  return builder_.add_terminal(std::make_shared<const Dfa>(std::move(dfa)));
}

}  // namespace deepinfer::grammar
