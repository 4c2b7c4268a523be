#include "grammar/json_schema_compiler.h"

#include "grammar/compile_budget.h"
#include "grammar/json_lexemes.h"
#include "grammar/json_schema_algebra.h"
#include "grammar/json_schema_set.h"
#include "grammar/json_schema_validator.h"
#include "grammar/json_string_dfas.h"
#include "grammar/regex_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace deepinfer::grammar {
namespace {

// Array positions and object counting states get one rule each; beyond this the schema is refused.
constexpr uint64_t kMaxExplicitPositions = 4096;
constexpr uint64_t kMaxCountingRules = 100000;
// Additional keys split into 2^n regions by n patternProperties.
constexpr size_t kMaxPatternProperties = 4;

class Lowering {
 public:
  Lowering(const SchemaSet& set, const GrammarOptions& options)
      : set_(set), options_(options), validator_(set), algebra_(set, validator_) {}

  Result<Grammar> run() {
    ws_ = json_whitespace(options_);
    DI_TRYV(make_punctuation());
    DI_TRY(root, lower(Conj{{set_.root()}, {}}));
    DI_TRYV(expand_pending());
    return builder_.build(root);
  }

 private:
  // ---- terminals ----

  Result<uint32_t> terminal(const Regex& r) {
    DI_TRY(dfa, Dfa::from_regex(r));
    return builder_.add_terminal(std::make_shared<const Dfa>(std::move(dfa)));
  }

  Result<void> make_punctuation() {
    auto punct = [&](std::vector<Regex> parts) { return terminal(re_seq(std::move(parts))); };
    DI_TRY(a, punct({re_char('{'), ws_}));
    DI_TRY(b, punct({ws_, re_char('}')}));
    DI_TRY(c, punct({re_char('{'), ws_, re_char('}')}));
    DI_TRY(d, punct({re_char('['), ws_}));
    DI_TRY(e, punct({ws_, re_char(']')}));
    DI_TRY(f, punct({re_char('['), ws_, re_char(']')}));
    DI_TRY(g, punct({ws_, re_char(','), ws_}));
    DI_TRY(h, punct({ws_, re_char(':'), ws_}));
    obj_open_ = a;
    obj_close_ = b;
    obj_empty_ = c;
    arr_open_ = d;
    arr_close_ = e;
    arr_empty_ = f;
    comma_ = g;
    colon_ = h;
    return ok();
  }

  // The JSON string bodies (between quotes) whose values meet the pattern and format constraints
  // of `m` (length bounds aside).
  Result<Dfa> string_body(const Merged& m, const std::string& where) {
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
    if (!acc) return json_body_dfa();
    return std::move(*acc);
  }

  // The same with the length bounds unrolled into the automaton (for keys, which the lowering
  // intersects and subtracts as languages; values use string_terminal's counter).
  Result<Dfa> string_content(const Merged& m, const std::string& where) {
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
  Result<std::optional<uint32_t>> string_terminal(const Merged& m, const std::string& where) {
    DI_TRY(body, string_body(m, where));
    DI_TRY(wrapped, body.wrap('"', '"'));
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

  Result<uint32_t> quoted_terminal(const Dfa& content) {
    DI_TRY(q, content.wrap('"', '"'));
    return builder_.add_terminal(std::make_shared<const Dfa>(std::move(q)));
  }

  // Unconstrained numbers keep exponents; bounds and multipleOf use exact decimal automata.
  Result<uint32_t> number_terminal(const Merged& m, const std::string& where) {
    bool integers = !(m.types & kTypeFraction);
    if (!m.lower && !m.upper && m.multiple_of.empty()) return terminal(json_number(integers));
    DI_TRY(dfa, bounded_number_dfa(m.lower, m.upper, integers));
    for (const auto& step : m.multiple_of) {
      auto steps = multiple_of_dfa(step);
      if (!steps) return make_error(Code::kGrammar, "json schema: {} (at {})", steps.error().message, where);
      DI_TRY(both, Dfa::intersect(dfa, steps.value()));
      dfa = std::move(both);
    }
    return builder_.add_terminal(std::make_shared<const Dfa>(std::move(dfa)));
  }

  std::string rule_name(const std::vector<SchemaId>& members) {
    return members.empty() ? std::string("any") : set_.node(members.front()).path;
  }

  Result<uint32_t> lower_ids(const std::vector<SchemaId>& ids) {
    Conj c;
    for (SchemaId id : ids) insert_sorted(c.members, id);
    return lower(c);
  }

  // The rule for a conjunction, created on first use and expanded later by expand_pending(), so
  // that nested schemas and $ref chains are lowered by a loop, not by recursion.
  Result<uint32_t> lower(const Conj& c) {
    Flat f = algebra_.flatten(c);
    Conj full{f.members, {}};
    for (uint32_t g : c.resolved) {
      if (std::binary_search(f.members.begin(), f.members.end(), g / 2)) full.resolved.push_back(g);
    }
    Conj key = memo_key(full);
    auto memo = memo_.find(key);
    if (memo != memo_.end()) return memo->second;
    uint32_t rule = builder_.add_rule(rule_name(f.members));
    memo_.emplace(std::move(key), rule);
    pending_.push_back({rule, std::move(full), std::move(f)});
    return rule;
  }

  // A conjunction without the members that add nothing once expanded: nodes made only of
  // applicators whose anyOf/oneOf are resolved (their $ref and allOf targets and chosen branches
  // are members themselves). Conjunctions reached through different $refs to the same schema then
  // share one rule (anyOf of two $refs to the next level, 20 levels deep, made 2^20 rules).
  // unevaluated* keywords see the schemas on the way, so conjunctions with them keep every member.
  Conj memo_key(const Conj& c) const {
    for (SchemaId id : c.members) {
      const SchemaNode& n = set_.node(id);
      if (n.unevaluated_properties || n.unevaluated_items) return c;
    }
    auto resolved = [&](uint32_t g) { return std::binary_search(c.resolved.begin(), c.resolved.end(), g); };
    Conj key;
    for (SchemaId id : c.members) {
      const SchemaNode& n = set_.node(id);
      bool spent = n.only_applicators() && (n.any_of.empty() || resolved(id * 2)) && (n.one_of.empty() || resolved(id * 2 + 1));
      if (!spent) key.members.push_back(id);
    }
    for (uint32_t g : c.resolved) {
      if (std::binary_search(key.members.begin(), key.members.end(), g / 2)) key.resolved.push_back(g);
    }
    return key;
  }

  Result<void> expand_pending() {
    while (!pending_.empty()) {
      Pending p = std::move(pending_.back());
      pending_.pop_back();
      DI_TRYV(CompileBudget::spend(1 + p.flat.members.size()));
      DI_TRYV(expand(p.rule, p.key, p.flat));
    }
    return ok();
  }

  Result<void> expand(uint32_t rule, const Conj& key, const Flat& f) {
    if (f.is_false) return ok();  // no production: matches nothing
    if (!f.open_groups.empty()) {
      uint32_t g = f.open_groups.front();
      const SchemaNode& owner = set_.node(g / 2);
      const auto& branches = (g & 1) ? owner.one_of : owner.any_of;
      if (g & 1) {
        DI_TRYV(algebra_.check_disjoint(branches, owner.path));
      }
      for (SchemaId b : branches) {
        Conj child{f.members, key.resolved};
        insert_sorted(child.members, b);
        child.resolved.insert(std::upper_bound(child.resolved.begin(), child.resolved.end(), g), g);
        DI_TRY(sub, lower(child));
        builder_.add_production(rule, {Symbol::rule(sub)});
      }
      return ok();
    }
    DI_TRY(m, algebra_.merge(f.members));
    return lower_merged(rule, m, f.members);
  }

  Result<void> lower_merged(uint32_t rule, const Merged& m, const std::vector<SchemaId>& members) {
    std::string where = rule_name(members);
    if (m.types == 0) return ok();
    if (m.enum_values) {
      std::vector<Regex> alts;
      for (const auto& v : *m.enum_values) {
        bool all = true;
        for (SchemaId id : members) {
          DI_TRY(r, validator_.valid(id, v));
          all = all && r;
        }
        if (all) alts.push_back(json_value_regex(v, ws_));
      }
      if (alts.empty()) return ok();
      DI_TRY(t, terminal(re_alt(std::move(alts))));
      builder_.add_production(rule, {Symbol::term(t)});
      return ok();
    }
    if (m.types & kTypeNull) {
      DI_TRY(t, terminal(re_literal("null")));
      builder_.add_production(rule, {Symbol::term(t)});
    }
    if (m.types & kTypeBoolean) {
      DI_TRY(t, terminal(re_alt({re_literal("true"), re_literal("false")})));
      builder_.add_production(rule, {Symbol::term(t)});
    }
    if (m.types & (kTypeInteger | kTypeFraction)) {
      DI_TRY(t, number_terminal(m, where));
      builder_.add_production(rule, {Symbol::term(t)});
    }
    if (m.types & kTypeString) {
      DI_TRY(t, string_terminal(m, where));
      if (t) builder_.add_production(rule, {Symbol::term(*t)});
    }
    if (m.types & kTypeArray) {
      DI_TRYV(lower_array(rule, m, where));
    }
    if (m.types & kTypeObject) {
      DI_TRYV(lower_object(rule, m, where));
    }
    return ok();
  }

  Result<void> lower_array(uint32_t rule, const Merged& m, const std::string& where) {
    if (m.min_items > m.max_items) return ok();
    uint64_t explicit_positions = std::max<uint64_t>(m.prefix.size(), m.min_items);
    bool bounded = m.max_items != UINT64_MAX;
    if (bounded) explicit_positions = m.max_items;
    if (explicit_positions > kMaxExplicitPositions) {
      return make_error(Code::kGrammar, "json schema: arrays with more than {} constrained positions are not supported (at {})",
                        kMaxExplicitPositions, where);
    }
    if (m.contains.size() > 1) {
      return make_error(Code::kGrammar, "json schema: more than one 'contains' on one array is not supported (at {})", where);
    }
    // `contains` with minContains = need: count the elements that were made to match it.
    uint64_t need = m.contains.empty() ? 0 : m.contains[0].second;
    if ((explicit_positions + 1) * (need + 1) > kMaxCountingRules) {
      return make_error(Code::kGrammar, "json schema: minContains too large for this array (at {})", where);
    }
    if (m.min_items == 0 && need == 0) builder_.add_production(rule, {Symbol::term(arr_empty_)});
    if (m.max_items == 0) return ok();
    // item(k, c) ::= value(k) after(k+1, c) | value(k) & contains after(k+1, c+1);
    // after(k, c) ::= "," item(k, c) | "]" (when k and c are enough). Positions past the last
    // explicit one share one looping pair.
    auto elem = [&](uint64_t k, bool matching) -> Result<uint32_t> {
      std::vector<SchemaId> ids = k < m.prefix.size() ? m.prefix[k] : m.items;
      if (matching) ids.push_back(m.contains[0].first);
      return lower_ids(ids);
    };
    uint64_t n = explicit_positions;
    auto idx = [&](uint64_t k, uint64_t c) { return k * (need + 1) + c; };
    std::vector<uint32_t> item((n + 1) * (need + 1)), after((n + 1) * (need + 1));
    for (uint64_t k = 0; k <= n; ++k) {
      for (uint64_t c = 0; c <= need; ++c) {
        item[idx(k, c)] = builder_.add_rule(fmt::format("{}/item{}.{}", where, k, c));
        after[idx(k, c)] = builder_.add_rule(fmt::format("{}/after{}.{}", where, k, c));
      }
    }
    auto add_item = [&](uint64_t k, uint64_t next_k) -> Result<void> {
      DI_TRY(plain, elem(k, false));
      std::optional<uint32_t> matching;
      if (need > 0) {
        DI_TRY(v, elem(k, true));
        matching = v;
      }
      for (uint64_t c = 0; c <= need; ++c) {
        builder_.add_production(item[idx(k, c)], {Symbol::rule(plain), Symbol::rule(after[idx(next_k, c)])});
        if (matching) builder_.add_production(item[idx(k, c)], {Symbol::rule(*matching), Symbol::rule(after[idx(next_k, std::min(c + 1, need))])});
      }
      return ok();
    };
    for (uint64_t k = 0; k < n; ++k) {
      DI_TRYV(add_item(k, k + 1));
    }
    for (uint64_t k = bounded || n > 0 ? 1 : 0; k <= n; ++k) {
      for (uint64_t c = 0; c <= need; ++c) {
        if (k < m.max_items) builder_.add_production(after[idx(k, c)], {Symbol::term(comma_), Symbol::rule(item[idx(k, c)])});
        if (k >= m.min_items && c == need) builder_.add_production(after[idx(k, c)], {Symbol::term(arr_close_)});
      }
    }
    if (!bounded) {  // the tail: item(n, c) loops through after(n, .)
      DI_TRYV(add_item(n, n));
    }
    builder_.add_production(rule, {Symbol::term(arr_open_), Symbol::rule(item[idx(0, 0)])});
    return ok();
  }

  // Key strings allowed by propertyNames (nullopt: any).
  Result<std::optional<Dfa>> key_content(const std::vector<SchemaId>& ids, const std::string& where) {
    if (ids.empty()) return std::optional<Dfa>();
    Conj c;
    for (SchemaId id : ids) insert_sorted(c.members, id);
    Flat f = algebra_.flatten(c);
    if (!f.open_groups.empty()) {
      return make_error(Code::kGrammar, "json schema: propertyNames with anyOf/oneOf is not supported (at {})", where);
    }
    DI_TRY(m, algebra_.merge(f.members));
    if (f.is_false || !(m.types & kTypeString)) {
      DI_TRY(none, Dfa::from_regex(re_nothing()));
      return std::optional<Dfa>(std::move(none));
    }
    if (m.enum_values) {
      std::vector<Regex> alts;
      for (const auto& v : *m.enum_values) {
        if (!v.is_string()) continue;
        bool all = true;
        for (SchemaId id : f.members) {
          DI_TRY(r, validator_.valid(id, v));
          all = all && r;
        }
        if (all) alts.push_back(json_encode(re_literal(v.get<std::string>())));
      }
      DI_TRY(d, Dfa::from_regex(re_alt(std::move(alts))));
      return std::optional<Dfa>(std::move(d));
    }
    DI_TRY(d, string_content(m, where));
    return std::optional<Dfa>(std::move(d));
  }

  Result<void> lower_object(uint32_t rule, const Merged& m, const std::string& where) {
    if (m.min_properties > m.max_properties) return ok();
    DI_TRY(names_dfa, key_content(m.property_names, where));
    // Declared properties: a name that propertyNames refuses can never appear.
    struct Prop {
      std::string name;
      std::vector<SchemaId> schemas;
      bool required;
    };
    std::vector<Prop> props;
    for (const auto& [name, schemas] : m.properties) {
      bool req = m.required.count(name) > 0;
      std::string body = json_quote(name);
      body = body.substr(1, body.size() - 2);
      if (names_dfa && !names_dfa->matches(body)) {
        if (req) return ok();
        continue;
      }
      props.push_back({name, schemas, req});
    }
    // Additional keys: any string (or propertyNames') other than a declared name, in any encoding,
    // split into regions by the patternProperties they match; each region has its own value
    // schemas (the matching patterns', plus additionalProperties of members none of whose
    // patterns match).
    const auto& rules = m.pattern_properties;
    if (rules.size() > kMaxPatternProperties) {
      return make_error(Code::kGrammar, "json schema: more than {} patternProperties in one object are not supported (at {})",
                        kMaxPatternProperties, where);
    }
    std::vector<std::pair<uint32_t, uint32_t>> additional;  // (key terminal, value rule) per region
    {
      Merged any;
      DI_TRY(content, names_dfa ? Result<Dfa>(*names_dfa) : string_content(any, where));
      std::vector<Regex> declared;
      for (const auto& [name, schemas] : m.properties) declared.push_back(json_encode(re_literal(name)));
      Dfa keys = std::move(content);
      if (!declared.empty()) {
        DI_TRY(taken, Dfa::from_regex(re_alt(std::move(declared))));
        DI_TRY(rest, Dfa::subtract(keys, taken));
        keys = std::move(rest);
      }
      std::vector<Dfa> matches;
      for (const auto& r : rules) {
        Regex any_char = re_star(re_chars(CodepointSet::all()));
        DI_TRY(re, parse_ecmascript_regex(r.pattern));
        DI_TRY(d, Dfa::from_regex(json_encode(re_seq({any_char, re, any_char}))));
        matches.push_back(std::move(d));
      }
      for (uint32_t region = 0; region < (1u << rules.size()); ++region) {
        Dfa region_keys = keys;
        std::vector<SchemaId> values;
        for (size_t i = 0; i < rules.size() && !region_keys.empty_language(); ++i) {
          bool in = (region >> i) & 1u;
          DI_TRY(narrowed, in ? Dfa::intersect(region_keys, matches[i]) : Dfa::subtract(region_keys, matches[i]));
          region_keys = std::move(narrowed);
          if (in) values.push_back(rules[i].schema);
        }
        if (region_keys.empty_language()) continue;
        auto matched_by = [&](SchemaId owner) {
          for (size_t i = 0; i < rules.size(); ++i) {
            if (((region >> i) & 1u) && rules[i].owner == owner) return true;
          }
          return false;
        };
        for (const auto& [owner, schema] : m.additional) {
          if (!matched_by(owner)) values.push_back(schema);
        }
        for (const auto& u : m.unevaluated) {
          bool seen = false;
          for (SchemaId r : u.reach) {
            const SchemaNode& x = set_.node(r);
            seen = seen || x.additional_properties || (r != u.owner && x.unevaluated_properties) || matched_by(r);
          }
          if (!seen) values.push_back(u.schema);
        }
        if (std::any_of(values.begin(), values.end(), [&](SchemaId id) { return set_.node(id).always_false; })) continue;
        DI_TRY(k, quoted_terminal(region_keys));
        DI_TRY(v, lower_ids(values));
        additional.push_back({k, v});
      }
    }

    // States: next property index i and members emitted so far c (counted only up to what
    // minProperties / maxProperties need). member(i, c) emits one member at or after i;
    // after(i, c) follows a member: "," member(i, c) or "}".
    bool counting = m.min_properties > 0 || m.max_properties != UINT64_MAX;
    uint64_t cap = !counting ? 0 : (m.max_properties != UINT64_MAX ? m.max_properties : m.min_properties);
    size_t n = props.size();
    if ((n + 1) * (cap + 1) > kMaxCountingRules) {
      return make_error(Code::kGrammar, "json schema: minProperties/maxProperties too large for this object (at {})", where);
    }
    auto next_count = [&](uint64_t c) { return counting ? std::min(c + 1, cap) : 0; };
    auto can_add = [&](uint64_t c) { return m.max_properties == UINT64_MAX || c < m.max_properties; };
    std::vector<uint32_t> member((n + 1) * (cap + 1)), after((n + 1) * (cap + 1));
    auto idx = [&](size_t i, uint64_t c) { return i * (cap + 1) + c; };
    for (size_t i = 0; i <= n; ++i) {
      for (uint64_t c = 0; c <= cap; ++c) {
        member[idx(i, c)] = builder_.add_rule(fmt::format("{}/member{}.{}", where, i, c));
        after[idx(i, c)] = builder_.add_rule(fmt::format("{}/after{}.{}", where, i, c));
      }
    }
    std::vector<uint8_t> required_from(n + 1, 0);  // a required property at index >= i
    for (size_t i = n; i-- > 0;) required_from[i] = required_from[i + 1] || props[i].required;
    std::vector<uint32_t> values(n);
    for (size_t i = 0; i < n; ++i) {
      DI_TRY(v, lower_ids(props[i].schemas));
      values[i] = v;
    }
    for (size_t i = 0; i <= n; ++i) {
      for (uint64_t c = 0; c <= cap; ++c) {
        uint32_t mem = member[idx(i, c)], aft = after[idx(i, c)];
        if (i < n) {
          if (can_add(c)) {
            DI_TRY(key, terminal(json_string_literal(props[i].name)));
            builder_.add_production(mem, {Symbol::term(key), Symbol::term(colon_), Symbol::rule(values[i]),
                                          Symbol::rule(after[idx(i + 1, next_count(c))])});
          }
          if (!props[i].required) builder_.add_production(mem, {Symbol::rule(member[idx(i + 1, c)])});
        } else if (can_add(c)) {
          for (auto [key, value] : additional) {
            builder_.add_production(mem, {Symbol::term(key), Symbol::term(colon_), Symbol::rule(value),
                                          Symbol::rule(after[idx(n, next_count(c))])});
          }
        }
        builder_.add_production(aft, {Symbol::term(comma_), Symbol::rule(mem)});
        if (!required_from[i] && c >= std::min(m.min_properties, cap)) builder_.add_production(aft, {Symbol::term(obj_close_)});
      }
    }
    if (!required_from[0] && m.min_properties == 0) builder_.add_production(rule, {Symbol::term(obj_empty_)});
    builder_.add_production(rule, {Symbol::term(obj_open_), Symbol::rule(member[idx(0, 0)])});
    return ok();
  }

  // ---- oneOf ----

  const SchemaSet& set_;
  GrammarOptions options_;
  SchemaValidator validator_;
  SchemaAlgebra algebra_;
  GrammarBuilder builder_;
  Regex ws_;
  uint32_t obj_open_ = 0, obj_close_ = 0, obj_empty_ = 0, arr_open_ = 0, arr_close_ = 0, arr_empty_ = 0, comma_ = 0, colon_ = 0;
  std::map<Conj, uint32_t> memo_;
  struct Pending {
    uint32_t rule;
    Conj key;
    Flat flat;
  };
  std::vector<Pending> pending_;
};

}  // namespace

Result<Grammar> compile_json_schema(std::string_view schema, const GrammarOptions& options) {
  DI_TRY(set, SchemaSet::parse(schema));
  return Lowering(set, options).run();
}

}  // namespace deepinfer::grammar
