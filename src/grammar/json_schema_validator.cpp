#include "grammar/json_schema_validator.h"

#include "grammar/compile_budget.h"
#include "grammar/json_formats.h"
#include "grammar/regex_parser.h"
#include "grammar/utf8.h"

#include <algorithm>

namespace deepinfer::grammar {
namespace {

// Recursion bound (schemas and values checked in place): fits a small thread stack.
constexpr int kMaxDepth = 128;

std::optional<Decimal> number_of(const Json& v) {
  if (!v.is_number()) return std::nullopt;
  auto d = Decimal::parse(v.dump());
  if (!d) return std::nullopt;
  return d.value();
}

uint8_t type_of(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return kTypeNull;
    case Json::value_t::boolean: return kTypeBoolean;
    case Json::value_t::object: return kTypeObject;
    case Json::value_t::array: return kTypeArray;
    case Json::value_t::string: return kTypeString;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: {
      auto d = number_of(v);
      return d && d->is_integer() ? kTypeInteger : kTypeFraction;
    }
    default: return 0;
  }
}

uint64_t codepoints(const std::string& s) {
  uint64_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

bool json_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    auto x = number_of(a), y = number_of(b);
    return x && y && compare(*x, *y) == 0;
  }
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      auto it = b.find(k);
      if (it == b.end() || !json_equal(v, *it)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!json_equal(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

std::string json_canonical(const Json& v) {
  if (v.is_number()) {
    auto d = number_of(v);
    if (!d) return v.dump();
    return (d->negative ? "-" : "") + d->integer + (d->fraction.empty() ? "" : "." + d->fraction);
  }
  if (v.is_array()) {
    std::string out = "[";
    for (const auto& x : v) out += json_canonical(x) + ",";
    return out + "]";
  }
  if (v.is_object()) {
    std::vector<std::pair<std::string, const Json*>> members;
    for (const auto& [k, x] : v.items()) members.emplace_back(Json(k).dump(), &x);
    std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::string out = "{";
    for (const auto& [k, x] : members) out += k + ":" + json_canonical(*x) + ",";
    return out + "}";
  }
  return v.dump();
}

bool SchemaValidator::in_enum(SchemaId id, const std::vector<Json>& values, const Json& v) {
  if (values.size() <= 8) {
    for (const auto& e : values) {
      if (json_equal(e, v)) return true;
    }
    return false;
  }
  auto [it, fresh] = enum_sets_.try_emplace(id);
  if (fresh) {
    for (const auto& e : values) it->second.insert(json_canonical(e));
  }
  return it->second.count(json_canonical(v)) > 0;
}

Result<const Dfa*> SchemaValidator::pattern_dfa(const std::string& pattern) {
  auto it = patterns_.find(pattern);
  if (it != patterns_.end()) return it->second.get();
  DI_TRY(re, parse_ecmascript_regex(pattern));
  Regex any = re_star(re_chars(CodepointSet::all()));
  DI_TRY(dfa, Dfa::from_regex(re_seq({any, re, any})));
  auto& slot = patterns_[pattern];
  slot = std::make_unique<Dfa>(std::move(dfa));
  return slot.get();
}

Result<bool> SchemaValidator::pattern_matches(const std::string& pattern, const std::string& value) {
  DI_TRY(d, pattern_dfa(pattern));
  return d->matches(value);
}

Result<const Dfa*> SchemaValidator::format_dfa(const std::string& format) {
  auto it = formats_.find(format);
  if (it != formats_.end()) return it->second.get();
  DI_TRY(rule, format_rule(format));
  std::optional<Dfa> acc;
  for (const auto& re : rule.patterns) {
    DI_TRY(dfa, Dfa::from_regex(re));
    if (acc) {
      DI_TRY(both, Dfa::intersect(*acc, dfa));
      acc = std::move(both);
    } else {
      acc = std::move(dfa);
    }
  }
  auto& slot = formats_[format];
  slot = std::make_unique<Dfa>(std::move(*acc));
  return slot.get();
}

Result<bool> SchemaValidator::valid_string(const SchemaNode& n, const Json& v) {
  const auto& s = v.get_ref<const std::string&>();
  uint64_t len = codepoints(s);
  if (len < n.min_length || len > n.max_length) return false;
  for (const auto& p : n.patterns) {
    DI_TRY(m, pattern_matches(p, s));
    if (!m) return false;
  }
  for (const auto& p : n.not_patterns) {
    DI_TRY(m, pattern_matches(p, s));
    if (m) return false;
  }
  for (const auto& f : n.formats) {
    DI_TRY(rule, format_rule(f));
    if (rule.kind != FormatRule::Kind::kString) continue;
    if (len > rule.max_length) return false;
    DI_TRY(d, format_dfa(f));
    if (!d->matches(s)) return false;
  }
  return true;
}

Result<bool> SchemaValidator::valid_number(const SchemaNode& n, const Json& v) {
  auto d = number_of(v);
  if (!d) return false;
  if (n.lower) {
    int c = compare(*d, n.lower->value);
    if (c < 0 || (c == 0 && n.lower->exclusive)) return false;
  }
  if (n.upper) {
    int c = compare(*d, n.upper->value);
    if (c > 0 || (c == 0 && n.upper->exclusive)) return false;
  }
  for (const auto& step : n.multiple_of) {
    if (!is_multiple_of(d->abs(), step)) return false;
  }
  for (const auto& f : n.formats) {
    DI_TRY(rule, format_rule(f));
    if (rule.kind != FormatRule::Kind::kNumber) continue;
    if ((rule.integer && !d->is_integer()) || compare(*d, *rule.minimum) < 0 || compare(*d, *rule.maximum) > 0) return false;
  }
  return true;
}

Result<bool> SchemaValidator::valid_array(const SchemaNode& n, const Json& v) {
  if (v.size() < n.min_items || v.size() > n.max_items) return false;
  if (n.unique_items) {
    std::unordered_set<std::string> seen;
    for (const auto& item : v) {
      if (!seen.insert(json_canonical(item)).second) return false;
    }
  }
  if (n.contains && n.min_contains > 0) {
    uint64_t matching = 0;
    for (const auto& item : v) {
      DI_TRY(r, valid(*n.contains, item));
      matching += r ? 1 : 0;
    }
    if (matching < n.min_contains) return false;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    std::optional<SchemaId> s = i < n.prefix_items.size() ? std::optional<SchemaId>(n.prefix_items[i]) : n.items;
    if (!s) s = n.unevaluated_items;  // conservative, as for properties
    if (!s) continue;
    DI_TRY(ok_item, valid(*s, v[i]));
    if (!ok_item) return false;
  }
  return true;
}

Result<bool> SchemaValidator::valid_object(const SchemaNode& n, const Json& v) {
  if (v.size() < n.min_properties || v.size() > n.max_properties) return false;
  for (const auto& r : n.required) {
    if (!v.contains(r)) return false;
  }
  for (const auto& f : n.forbidden) {
    if (v.contains(f)) return false;
  }
  for (const auto& [key, val] : v.items()) {
    // The value meets its `properties` schema and every matching patternProperties schema;
    // additionalProperties applies when neither names the key.
    std::vector<SchemaId> schemas;
    for (const auto& [name, ps] : n.properties) {
      if (name == key) schemas.push_back(ps);
    }
    for (const auto& [pattern, ps] : n.pattern_properties) {
      DI_TRY(m, pattern_matches(pattern, key));
      if (m) schemas.push_back(ps);
    }
    if (schemas.empty() && n.additional_properties) schemas.push_back(*n.additional_properties);
    // Conservative (never more permissive): only the schema's own keywords count as evaluating.
    if (schemas.empty() && n.unevaluated_properties) schemas.push_back(*n.unevaluated_properties);
    for (SchemaId s : schemas) {
      DI_TRY(ok_val, valid(s, val));
      if (!ok_val) return false;
    }
    if (n.property_names) {
      DI_TRY(ok_name, valid(*n.property_names, Json(key)));
      if (!ok_name) return false;
    }
  }
  return true;
}
Result<bool> SchemaValidator::valid(SchemaId id, const Json& v) {
  DI_TRYV(CompileBudget::spend(1));
  if (depth_ > kMaxDepth) return make_error(Code::kGrammar, "json schema: references nest too deep to check a value (more than {} levels)", kMaxDepth);
  struct Depth {
    int& d;
    explicit Depth(int& x) : d(++x) {}
    ~Depth() { --d; }
  } guard(depth_);
  const SchemaNode& n = set_.node(id);
  if (n.always_false) return false;
  uint8_t t = type_of(v);
  if (!(n.types & t)) return false;
  if (n.enum_values && !in_enum(id, *n.enum_values, v)) return false;
  for (const auto& x : n.excluded) {
    if (json_equal(x, v)) return false;
  }
  if (v.is_string()) {
    DI_TRY(r, valid_string(n, v));
    if (!r) return false;
  }
  if (v.is_number()) {
    DI_TRY(r, valid_number(n, v));
    if (!r) return false;
  }
  if (v.is_array()) {
    DI_TRY(r, valid_array(n, v));
    if (!r) return false;
  }
  if (v.is_object()) {
    DI_TRY(r, valid_object(n, v));
    if (!r) return false;
  }
  for (SchemaId s : n.all_of) {
    DI_TRY(r, valid(s, v));
    if (!r) return false;
  }
  for (SchemaId s : n.logic) {
    DI_TRY(r, valid(s, v));
    if (!r) return false;
  }
  if (!n.any_of.empty()) {
    bool any = false;
    for (SchemaId s : n.any_of) {
      DI_TRY(r, valid(s, v));
      if (r) {
        any = true;
        break;
      }
    }
    if (!any) return false;
  }
  if (!n.one_of.empty()) {
    int count = 0;
    for (SchemaId s : n.one_of) {
      DI_TRY(r, valid(s, v));
      count += r ? 1 : 0;
    }
    if (count != 1) return false;
  }
  if (n.ref) {
    DI_TRY(r, valid(*n.ref, v));
    if (!r) return false;
  }
  return true;
}

}  // namespace deepinfer::grammar
