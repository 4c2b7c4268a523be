#include "grammar/json_schema_compiler.h"

#include "grammar/compile_budget.h"
#include "grammar/json_lexemes.h"
#include "grammar/json_schema_lowering.h"
#include "grammar/json_string_set.h"

#include <fmt/format.h>

#include <algorithm>

namespace deepinfer::grammar {

Result<Grammar> SchemaLowering::run() {
  ws_ = json_whitespace(options_);
  DI_TRYV(make_punctuation());
  DI_TRY(root, lower(Conj{{set_.root()}, {}}));
  DI_TRYV(expand_pending());
  return builder_.build(root);
}

Result<uint32_t> SchemaLowering::terminal(const Regex& r) {
  DI_TRY(dfa, Dfa::from_regex(r));
  return builder_.add_terminal(std::make_shared<const Dfa>(std::move(dfa)));
}

Result<void> SchemaLowering::make_punctuation() {
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

std::string SchemaLowering::rule_name(const std::vector<SchemaId>& members) {
  return members.empty() ? std::string("any") : set_.node(members.front()).path;
}

Result<uint32_t> SchemaLowering::lower_ids(const std::vector<SchemaId>& ids) {
  Conj c;
  for (SchemaId id : ids) insert_sorted(c.members, id);
  return lower(c);
}

// The rule for a conjunction, created on first use and expanded later by expand_pending(), so
// that nested schemas and $ref chains are lowered by a loop, not by recursion.
Result<uint32_t> SchemaLowering::lower(const Conj& c) {
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
Conj SchemaLowering::memo_key(const Conj& c) const {
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

Result<void> SchemaLowering::expand_pending() {
  while (!pending_.empty()) {
    Pending p = std::move(pending_.back());
    pending_.pop_back();
    DI_TRYV(CompileBudget::spend(1 + p.flat.members.size()));
    DI_TRYV(expand(p.rule, p.key, p.flat));
  }
  return ok();
}

Result<void> SchemaLowering::expand(uint32_t rule, const Conj& key, const Flat& f) {
  if (f.is_false) return ok();  // no production: matches nothing
  if (!f.open_groups.empty()) {
    uint32_t g = f.open_groups.front();
    const SchemaNode& owner = set_.node(g / 2);
    const std::vector<SchemaId>* branches = &owner.any_of;
    if (g & 1) {
      DI_TRY(exclusive, one_of_branches(g / 2));
      branches = exclusive;
    }
    for (SchemaId b : *branches) {
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

Result<void> SchemaLowering::lower_merged(uint32_t rule, const Merged& m, const std::vector<SchemaId>& members) {
  std::string where = rule_name(members);
  if (m.types == 0) return ok();
  if (m.enum_values) {
    // Strings go through json_strings_dfa (large enums, long constants), other values through
    // regexes.
    std::vector<std::string> strings;
    std::vector<Regex> others;
    for (const auto& v : *m.enum_values) {
      bool all = true;
      for (SchemaId id : members) {
        DI_TRY(r, validator_.valid(id, v));
        all = all && r;
      }
      if (!all) continue;
      if (v.is_string()) {
        strings.push_back(v.get<std::string>());
      } else {
        others.push_back(json_value_regex(v, ws_));
      }
    }
    std::optional<Dfa> values;
    if (!strings.empty()) {
      auto d = json_strings_dfa(std::move(strings));
      if (!d) return make_error(Code::kGrammar, "json schema: {} (at {})", d.error().message, where);
      values = std::move(d.value());
    }
    if (!others.empty()) {
      DI_TRY(d, Dfa::from_regex(re_alt(std::move(others))));
      if (values) {
        DI_TRY(both, Dfa::unite(*values, d));
        values = std::move(both);
      } else {
        values = std::move(d);
      }
    }
    if (!values) return ok();
    uint32_t t = builder_.add_terminal(std::make_shared<const Dfa>(std::move(*values)));
    builder_.add_production(rule, {Symbol::term(t)});
    return ok();
  }
  // Values excluded by a negation: null and booleans drop out here, strings and numbers in their
  // terminals; excluding one object or array value cannot be written.
  auto excluded = [&](const Json& v) {
    return std::any_of(m.excluded.begin(), m.excluded.end(), [&](const Json& x) { return json_equal(x, v); });
  };
  for (const auto& x : m.excluded) {
    if ((x.is_object() && (m.types & kTypeObject)) || (x.is_array() && (m.types & kTypeArray))) {
      return make_error(Code::kGrammar, "json schema: excluding an object or array value (not, if or oneOf with const/enum) is not supported (at {})",
                        where);
    }
  }
  if ((m.types & kTypeNull) && !excluded(Json(nullptr))) {
    DI_TRY(t, terminal(re_literal("null")));
    builder_.add_production(rule, {Symbol::term(t)});
  }
  if (m.types & kTypeBoolean) {
    std::vector<Regex> values;
    for (bool b : {true, false}) {
      if (!excluded(Json(b))) values.push_back(re_literal(b ? "true" : "false"));
    }
    if (!values.empty()) {
      DI_TRY(t, terminal(re_alt(std::move(values))));
      builder_.add_production(rule, {Symbol::term(t)});
    }
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

Result<Grammar> compile_json_schema(std::string_view schema, const GrammarOptions& options) {
  DI_TRY(set, SchemaSet::parse(schema));
  SchemaSet& loaded = set;
  return SchemaLowering(loaded, options).run();
}

}  // namespace deepinfer::grammar
