#include "grammar/json_schema_lowering.h"

#include "grammar/json_lexemes.h"
#include "grammar/regex_parser.h"

#include <fmt/format.h>

#include <algorithm>

namespace deepinfer::grammar {
namespace {

// Object counting states get one rule each; beyond this the schema is refused.
constexpr uint64_t kMaxCountingRules = 100000;
// Additional keys split into regions by the patternProperties they match: at most this many
// patterns, and this many non-empty regions (overlapping patterns make up to 2^n).
constexpr size_t kMaxPatternProperties = 64;
constexpr size_t kMaxKeyRegions = 256;

}  // namespace

// Key strings allowed by propertyNames (nullopt: any).
Result<std::optional<Dfa>> SchemaLowering::key_content(const std::vector<SchemaId>& ids, const std::string& where) {
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
  std::vector<Regex> excluded;
  for (const auto& x : m.excluded) {
    if (x.is_string()) excluded.push_back(json_encode(re_literal(x.get<std::string>())));
  }
  if (!excluded.empty()) {
    DI_TRY(values, Dfa::from_regex(re_alt(std::move(excluded))));
    DI_TRY(rest, Dfa::subtract(d, values));
    return std::optional<Dfa>(std::move(rest));
  }
  return std::optional<Dfa>(std::move(d));
}

// Additional keys: any string (or propertyNames') other than a declared name, in any encoding,
// split into regions by the patternProperties they match; each region has its own value schemas
// (the matching patterns', plus additionalProperties of members none of whose patterns match).
// Returns (key terminal, value rule) per region.
Result<std::vector<std::pair<uint32_t, uint32_t>>> SchemaLowering::additional_members(const Merged& m, const std::optional<Dfa>& names_dfa,
                                                                                   const std::string& where) {
  const auto& rules = m.pattern_properties;
  if (rules.size() > kMaxPatternProperties) {
    return make_error(Code::kGrammar, "json schema: more than {} patternProperties in one object are not supported (at {})",
                      kMaxPatternProperties, where);
  }
  std::vector<std::pair<uint32_t, uint32_t>> additional;
  Merged any;
  DI_TRY(content, names_dfa ? Result<Dfa>(*names_dfa) : string_content(any, where));
  std::vector<Regex> declared;
  for (const auto& [name, schemas] : m.properties) declared.push_back(json_encode(re_literal(name)));
  for (const auto& name : m.forbidden) declared.push_back(json_encode(re_literal(name)));
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
  // The non-empty regions, splitting each by one pattern after another.
  struct Region {
    Dfa keys;
    std::vector<uint8_t> in;  // per pattern
  };
  std::vector<Region> regions;
  if (!keys.empty_language()) regions.push_back({std::move(keys), std::vector<uint8_t>(rules.size(), 0)});
  for (size_t i = 0; i < rules.size(); ++i) {
    std::vector<Region> split;
    for (auto& r : regions) {
      DI_TRY(inside, Dfa::intersect(r.keys, matches[i]));
      DI_TRY(outside, Dfa::subtract(r.keys, matches[i]));
      if (!inside.empty_language()) {
        split.push_back({std::move(inside), r.in});
        split.back().in[i] = 1;
      }
      if (!outside.empty_language()) split.push_back({std::move(outside), std::move(r.in)});
    }
    if (split.size() > kMaxKeyRegions) {
      return make_error(Code::kGrammar, "json schema: patternProperties overlap in more than {} ways (at {})", kMaxKeyRegions, where);
    }
    regions = std::move(split);
  }
  for (const Region& region : regions) {
    const Dfa& region_keys = region.keys;
    std::vector<SchemaId> values;
    for (size_t i = 0; i < rules.size(); ++i) {
      if (region.in[i]) values.push_back(rules[i].schema);
    }
    auto matched_by = [&](SchemaId owner) {
      for (size_t i = 0; i < rules.size(); ++i) {
        if (region.in[i] && rules[i].owner == owner) return true;
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
        if (x.synthetic) continue;  // negations give no annotations
        seen = seen || x.additional_properties || (r != u.owner && x.unevaluated_properties) || matched_by(r);
      }
      if (!seen) values.push_back(u.schema);
    }
    if (std::any_of(values.begin(), values.end(), [&](SchemaId id) { return set_.node(id).always_false; })) continue;
    DI_TRY(k, quoted_terminal(region_keys));
    DI_TRY(v, lower_ids(values));
    additional.push_back({k, v});
  }
  return additional;
}

Result<void> SchemaLowering::lower_object(uint32_t rule, const Merged& m, const std::string& where) {
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
    if ((names_dfa && !names_dfa->matches(body)) || m.forbidden.count(name)) {
      if (req) return ok();
      continue;
    }
    props.push_back({name, schemas, req});
  }
  // Generation order: `properties` order, except that the properties a schema lists in `required`
  // follow that order, in the places they take.
  {
    auto listed = [&](const std::string& name) {
      return std::find(m.required_order.begin(), m.required_order.end(), name) != m.required_order.end();
    };
    std::vector<size_t> slots;
    for (size_t i = 0; i < props.size(); ++i) {
      if (listed(props[i].name)) slots.push_back(i);
    }
    std::vector<Prop> in_order;
    for (const auto& name : m.required_order) {
      auto it = std::find_if(props.begin(), props.end(), [&](const Prop& p) { return p.name == name; });
      if (it != props.end()) in_order.push_back(*it);
    }
    for (size_t k = 0; k < slots.size(); ++k) props[slots[k]] = in_order[k];
  }
  DI_TRY(additional, additional_members(m, names_dfa, where));

  // States: next property index i and members emitted so far c (counted only up to what
  // minProperties / maxProperties need). member(i, c) emits one member at or after i;
  // after(i, c) follows a member: "," member(i, c) or "}". Past the declared properties, further
  // additional members repeat a ", key: value" unit (left-recursive, or counted in binary), so a
  // long object never completes a chain of rules at its end.
  bool counting = m.min_properties > 0 || m.max_properties != UINT64_MAX;
  size_t n = props.size();
  // At most n + 1 members come before the repeated tail: counts beyond that are never needed.
  uint64_t cap = !counting ? 0 : std::min<uint64_t>(m.max_properties != UINT64_MAX ? m.max_properties : m.min_properties, n + 1);
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
  // One additional member (key: value, in any region) and the ", member" unit that repeats it.
  std::optional<uint32_t> extra, extra_unit;
  if (!additional.empty()) {
    extra = builder_.add_rule(fmt::format("{}/additional", where));
    for (auto [key, value] : additional) builder_.add_production(*extra, {Symbol::term(key), Symbol::term(colon_), Symbol::rule(value)});
    extra_unit = builder_.add_rule(fmt::format("{}/more", where));
    builder_.add_production(*extra_unit, {Symbol::term(comma_), Symbol::rule(*extra)});
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
      } else {
        if (can_add(c) && extra) builder_.add_production(mem, {Symbol::rule(*extra), Symbol::rule(after[idx(n, next_count(c))])});
        // Further members: lo..hi more, from c (exact when counting to a maximum, saturated at the
        // minimum otherwise).
        uint64_t lo = c < m.min_properties ? m.min_properties - c : 0;
        uint64_t hi = m.max_properties == UINT64_MAX ? UINT64_MAX : m.max_properties - c;
        std::vector<Symbol> rest;
        if (extra_unit) {
          rest = repeated(*extra_unit, lo, hi);
        } else if (lo > 0) {
          continue;
        }
        rest.push_back(Symbol::term(obj_close_));
        builder_.add_production(aft, std::move(rest));
        continue;
      }
      builder_.add_production(aft, {Symbol::term(comma_), Symbol::rule(mem)});
      if (!required_from[i] && c >= m.min_properties) builder_.add_production(aft, {Symbol::term(obj_close_)});
    }
  }
  if (!required_from[0] && m.min_properties == 0) builder_.add_production(rule, {Symbol::term(obj_empty_)});
  builder_.add_production(rule, {Symbol::term(obj_open_), Symbol::rule(member[idx(0, 0)])});
  return ok();
}

}  // namespace deepinfer::grammar
