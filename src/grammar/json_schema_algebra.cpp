#include "grammar/json_schema_algebra.h"

#include <fmt/format.h>

#include "grammar/compile_budget.h"
#include "grammar/json_formats.h"

#include <algorithm>
#include <unordered_set>

namespace deepinfer::grammar {
namespace {

constexpr int kMaxDisjointDepth = 4;

}  // namespace

void insert_sorted(std::vector<SchemaId>& v, SchemaId id) {
  auto it = std::lower_bound(v.begin(), v.end(), id);
  if (it == v.end() || *it != id) v.insert(it, id);
}

Flat SchemaAlgebra::flatten(const Conj& c) const {
  Flat f;
  std::vector<SchemaId> work = c.members;
  for (size_t i = 0; i < work.size(); ++i) {
    SchemaId id = work[i];
    if (std::binary_search(f.members.begin(), f.members.end(), id)) continue;
    insert_sorted(f.members, id);
    const SchemaNode& n = set_.node(id);
    if (n.always_false) f.is_false = true;
    for (SchemaId a : n.in_place()) work.push_back(a);
  }
  for (SchemaId id : f.members) {
    const SchemaNode& n = set_.node(id);
    for (uint32_t g : {id * 2, id * 2 + 1}) {
      bool present = (g & 1) ? !n.one_of.empty() : !n.any_of.empty();
      if (present && !std::binary_search(c.resolved.begin(), c.resolved.end(), g)) f.open_groups.push_back(g);
    }
  }
  return f;
}

Result<Merged> SchemaAlgebra::merge(const std::vector<SchemaId>& members) {
  Merged m;
  size_t prefix_len = 0;
  for (SchemaId id : members) prefix_len = std::max(prefix_len, set_.node(id).prefix_items.size());
  m.prefix.resize(prefix_len);
  for (SchemaId id : members) {
    const SchemaNode& n = set_.node(id);
    m.types &= n.types;
    if (n.enum_values) {
      if (!m.enum_values) {
        m.enum_values = *n.enum_values;
      } else {
        std::unordered_set<std::string> theirs;
        for (const auto& w : *n.enum_values) theirs.insert(json_canonical(w));
        CompileBudget::charge(m.enum_values->size() + n.enum_values->size());
        std::vector<Json> keep;
        for (const auto& v : *m.enum_values) {
          if (theirs.count(json_canonical(v))) keep.push_back(v);
        }
        m.enum_values = std::move(keep);
      }
    }
    m.min_length = std::max(m.min_length, n.min_length);
    m.max_length = std::min(m.max_length, n.max_length);
    m.patterns.insert(m.patterns.end(), n.patterns.begin(), n.patterns.end());
    for (const auto& f : n.formats) {
      DI_TRY(rule, format_rule(f));
      if (rule.kind == FormatRule::Kind::kString) {
        m.formats.push_back(f);
        m.max_length = std::min(m.max_length, rule.max_length);
      } else if (rule.kind == FormatRule::Kind::kNumber) {
        if (rule.integer) m.types &= static_cast<uint8_t>(~kTypeFraction);
        NumberBound lo{*rule.minimum, false}, hi{*rule.maximum, false};
        if (!m.lower || compare(lo.value, m.lower->value) > 0) m.lower = lo;
        if (!m.upper || compare(hi.value, m.upper->value) < 0) m.upper = hi;
      }
    }
    if (n.lower && (!m.lower || compare(n.lower->value, m.lower->value) > 0 ||
                    (compare(n.lower->value, m.lower->value) == 0 && n.lower->exclusive))) {
      m.lower = n.lower;
    }
    if (n.upper && (!m.upper || compare(n.upper->value, m.upper->value) < 0 ||
                    (compare(n.upper->value, m.upper->value) == 0 && n.upper->exclusive))) {
      m.upper = n.upper;
    }
    m.multiple_of.insert(m.multiple_of.end(), n.multiple_of.begin(), n.multiple_of.end());
    for (size_t i = 0; i < prefix_len; ++i) {
      if (i < n.prefix_items.size()) {
        m.prefix[i].push_back(n.prefix_items[i]);
      } else if (n.items) {
        m.prefix[i].push_back(*n.items);
      }
    }
    if (n.items) m.items.push_back(*n.items);
    m.min_items = std::max(m.min_items, n.min_items);
    if (n.contains && n.min_contains > 0) m.contains.push_back({*n.contains, n.min_contains});
    m.max_items = std::min(m.max_items, n.max_items);
    for (const auto& [name, ps] : n.properties) {
      auto it = std::find_if(m.properties.begin(), m.properties.end(), [&](const auto& p) { return p.first == name; });
      if (it == m.properties.end()) m.properties.emplace_back(name, std::vector<SchemaId>{});
    }
    for (const auto& r : n.required) {
      m.required.insert(r);
      if (!n.synthetic && std::find(m.required_order.begin(), m.required_order.end(), r) == m.required_order.end()) {
        m.required_order.push_back(r);
      }
      auto it = std::find_if(m.properties.begin(), m.properties.end(), [&](const auto& p) { return p.first == r; });
      if (it == m.properties.end()) m.properties.emplace_back(r, std::vector<SchemaId>{});
    }
    if (n.additional_properties) m.additional.push_back({id, *n.additional_properties});
    for (const auto& [pattern, schema] : n.pattern_properties) m.pattern_properties.push_back({pattern, schema, id});
    if (n.property_names) m.property_names.push_back(*n.property_names);
    m.min_properties = std::max(m.min_properties, n.min_properties);
    m.max_properties = std::min(m.max_properties, n.max_properties);
    m.excluded.insert(m.excluded.end(), n.excluded.begin(), n.excluded.end());
    m.not_patterns.insert(m.not_patterns.end(), n.not_patterns.begin(), n.not_patterns.end());
    m.forbidden.insert(n.forbidden.begin(), n.forbidden.end());
    m.unique_items = m.unique_items || n.unique_items;
  }
  // unevaluatedItems: positions past what the schemas it sees evaluate.
  for (SchemaId id : members) {
    const SchemaNode& n = set_.node(id);
    if (!n.unevaluated_items) continue;
    size_t evaluated = 0;
    for (SchemaId r : reach(id, members)) {
      const SchemaNode& x = set_.node(r);
      if (x.synthetic) continue;  // negations give no annotations
      if (x.items || (r != id && x.unevaluated_items)) evaluated = SIZE_MAX;
      if (evaluated != SIZE_MAX) evaluated = std::max(evaluated, x.prefix_items.size());
    }
    if (evaluated == SIZE_MAX) continue;
    for (size_t i = evaluated; i < m.prefix.size(); ++i) m.prefix[i].push_back(*n.unevaluated_items);
    m.items.push_back(*n.unevaluated_items);
  }
  for (SchemaId id : members) {
    const SchemaNode& n = set_.node(id);
    if (n.unevaluated_properties) m.unevaluated.push_back({*n.unevaluated_properties, id, reach(id, members)});
  }
  // A property's value meets, for each member, its `properties` entry and the schemas of its
  // matching patternProperties, or else its additionalProperties; and unevaluatedProperties of
  // members whose evaluation does not see it.
  for (auto& [name, schemas] : m.properties) {
    for (const auto& u : m.unevaluated) {
      DI_TRY(seen, evaluates(u, name));
      if (!seen) schemas.push_back(u.schema);
    }
    for (SchemaId id : members) {
      const SchemaNode& n = set_.node(id);
      auto it = std::find_if(n.properties.begin(), n.properties.end(), [&](const auto& p) { return p.first == name; });
      bool named = it != n.properties.end();
      if (named) schemas.push_back(it->second);
      for (const auto& [pattern, schema] : n.pattern_properties) {
        DI_TRY(match, validator_.pattern_matches(pattern, name));
        if (match) {
          schemas.push_back(schema);
          named = true;
        }
      }
      if (!named && n.additional_properties) schemas.push_back(*n.additional_properties);
    }
  }
  return m;
}

// `id` and the members reached from it in place (allOf, $ref, its chosen anyOf/oneOf branch).
std::vector<SchemaId> SchemaAlgebra::reach(SchemaId id, const std::vector<SchemaId>& members) const {
  std::vector<SchemaId> out{id};
  for (size_t i = 0; i < out.size(); ++i) {
    const SchemaNode& n = set_.node(out[i]);
    if (n.opaque) continue;  // nothing under a negation gives annotations
    auto visit = [&](SchemaId x) {
      if (std::binary_search(members.begin(), members.end(), x) && std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
    };
    for (SchemaId x : n.in_place()) visit(x);
    for (SchemaId x : n.any_of) visit(x);
    for (SchemaId x : n.one_of) visit(x);
  }
  return out;
}

// Whether the schemas that unevaluatedProperties `u` sees evaluate property `name`.
Result<bool> SchemaAlgebra::evaluates(const Merged::Unevaluated& u, const std::string& name) {
  for (SchemaId r : u.reach) {
    const SchemaNode& x = set_.node(r);
    if (x.synthetic) continue;  // negations give no annotations
    if (x.additional_properties || (r != u.owner && x.unevaluated_properties)) return true;
    for (const auto& [p, _] : x.properties) {
      if (p == name) return true;
    }
    for (const auto& [pattern, _] : x.pattern_properties) {
      DI_TRY(match, validator_.pattern_matches(pattern, name));
      if (match) return true;
    }
  }
  return false;
}

Result<void> SchemaAlgebra::check_disjoint(const std::vector<SchemaId>& branches, const std::string& where) {
  for (size_t i = 0; i < branches.size(); ++i) {
    for (size_t j = i + 1; j < branches.size(); ++j) {
      DI_TRY(d, disjoint({branches[i]}, {branches[j]}, 0));
      if (!d) {
        return make_error(Code::kGrammar,
                          "json schema: oneOf branches {} and {} may both match; only provably exclusive oneOf is supported (at {})",
                          i, j, where);
      }
    }
  }
  return ok();
}

// An object valid for `x` has a property that `y` forbids.
bool SchemaAlgebra::requires_forbidden(const Merged& x, const Merged& y) const {
  auto is_false = [&](SchemaId id) { return set_.node(id).always_false; };
  for (const auto& name : x.required) {
    if (y.forbidden.count(name)) return true;
    auto it = std::find_if(y.properties.begin(), y.properties.end(), [&](const auto& p) { return p.first == name; });
    if (it != y.properties.end()) {
      if (std::any_of(it->second.begin(), it->second.end(), is_false)) return true;
    } else if (y.pattern_properties.empty() && y.unevaluated.empty() &&
               std::any_of(y.additional.begin(), y.additional.end(), [&](const auto& a) { return is_false(a.second); })) {
      return true;
    }
  }
  return false;
}

// True when no value satisfies both conjunctions (a sound, incomplete test).
Result<bool> SchemaAlgebra::disjoint(const std::vector<SchemaId>& a_ids, const std::vector<SchemaId>& b_ids, int depth) {
  if (depth > kMaxDisjointDepth) return false;
  Conj ca, cb;
  for (SchemaId id : a_ids) insert_sorted(ca.members, id);
  for (SchemaId id : b_ids) insert_sorted(cb.members, id);
  Flat fa = flatten(ca), fb = flatten(cb);
  if (fa.is_false || fb.is_false) return true;
  DI_TRY(a, merge(fa.members));
  DI_TRY(b, merge(fb.members));
  // Enumerated values of one side that the other side refuses.
  auto enum_excluded = [&](const Merged& x, const std::vector<SchemaId>& other) -> Result<bool> {
    if (!x.enum_values) return false;
    for (const auto& v : *x.enum_values) {
      bool all = true;
      for (SchemaId id : other) {
        DI_TRY(r, validator_.valid(id, v));
        all = all && r;
      }
      if (all) return false;
    }
    return true;
  };
  // The value checker is stricter than the schema only where unevaluated* keywords are involved:
  // it may not prove a value invalid there.
  if (!set_.has_unevaluated()) {
    DI_TRY(ea, enum_excluded(a, fb.members));
    if (ea) return true;
    DI_TRY(eb, enum_excluded(b, fa.members));
    if (eb) return true;
  }
  uint8_t common = a.types & b.types;
  if (a.enum_values || b.enum_values) return common == 0;
  // Every shared instance type needs its own reason.
  for (uint8_t t : {kTypeNull, kTypeBoolean, kTypeObject, kTypeArray, kTypeString, kTypeInteger, kTypeFraction}) {
    if (!(common & t)) continue;
    bool separated = false;
    if (t == kTypeInteger || t == kTypeFraction) {
      auto below = [](const std::optional<NumberBound>& hi, const std::optional<NumberBound>& lo) {
        if (!hi || !lo) return false;
        int c = compare(hi->value, lo->value);
        return c < 0 || (c == 0 && (hi->exclusive || lo->exclusive));
      };
      separated = below(a.upper, b.lower) || below(b.upper, a.lower);
    } else if (t == kTypeString) {
      separated = a.min_length > b.max_length || b.min_length > a.max_length;
    } else if (t == kTypeArray) {
      separated = a.min_items > b.max_items || b.min_items > a.max_items;
    } else if (t == kTypeObject) {
      separated = requires_forbidden(a, b) || requires_forbidden(b, a);
      for (const auto& [name, sa] : a.properties) {
        if (separated) break;
        // A value of either side has the property when that side requires it; the other side then
        // constrains its value too.
        if (!a.required.count(name) && !b.required.count(name)) continue;
        auto it = std::find_if(b.properties.begin(), b.properties.end(), [&](const auto& p) { return p.first == name; });
        if (it == b.properties.end()) continue;
        DI_TRY(d, disjoint(sa, it->second, depth + 1));
        if (d) {
          separated = true;
          break;
        }
      }
    }
    if (!separated) return false;
  }
  return true;
}

}  // namespace deepinfer::grammar
