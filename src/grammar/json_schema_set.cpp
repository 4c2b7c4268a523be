#include "grammar/json_schema_set.h"

#include "grammar/regex_parser.h"
#include "grammar/uri.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

namespace deepinfer::grammar {
namespace {

constexpr std::string_view kDefaultBase = "https://deepinfer.invalid/schema.json";

Error schema_error(const std::string& path, std::string_view what) {
  return make_error(Code::kGrammar, "json schema: {} (at {})", what, path.empty() ? "#" : path);
}

std::string escape_pointer(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// Keywords whose value holds subschemas, by shape.
const std::set<std::string, std::less<>> kSchemaValued = {"additionalProperties", "items", "contains", "propertyNames",
                                                          "not", "if", "then", "else", "unevaluatedItems",
                                                          "unevaluatedProperties", "contentSchema", "additionalItems"};
const std::set<std::string, std::less<>> kSchemaMaps = {"properties", "patternProperties", "$defs", "definitions",
                                                        "dependentSchemas", "dependencies"};
const std::set<std::string, std::less<>> kSchemaArrays = {"allOf", "anyOf", "oneOf", "prefixItems", "items"};

// Keywords that would constrain instances in ways the compiler cannot enforce.
const std::set<std::string, std::less<>> kUnsupported = {"maxContains", "$dynamicRef", "$recursiveRef"};

Result<uint64_t> count_value(const Json& v, const std::string& path, std::string_view kw) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  // A float counts when it is a whole number a uint64 holds (casting a larger one is undefined).
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d >= 0x1p64 && d == std::trunc(d)) return schema_error(path, fmt::format("{} is too large", kw));
    if (d >= 0 && d == std::trunc(d)) return static_cast<uint64_t>(d);
  }
  return schema_error(path, fmt::format("{} must be a non-negative integer", kw));
}

Result<Decimal> number_value(const Json& v, const std::string& path, std::string_view kw) {
  if (!v.is_number()) return schema_error(path, fmt::format("{} must be a number", kw));
  return Decimal::parse(v.dump());
}

Result<uint8_t> type_bits(const Json& v, const std::string& path) {
  auto one = [&](const Json& t) -> Result<uint8_t> {
    if (!t.is_string()) return schema_error(path, "type must be a string or an array of strings");
    const auto& s = t.get_ref<const std::string&>();
    if (s == "null") return uint8_t{kTypeNull};
    if (s == "boolean") return uint8_t{kTypeBoolean};
    if (s == "object") return uint8_t{kTypeObject};
    if (s == "array") return uint8_t{kTypeArray};
    if (s == "string") return uint8_t{kTypeString};
    if (s == "integer") return uint8_t{kTypeInteger};
    if (s == "number") return uint8_t{kTypeInteger | kTypeFraction};
    return schema_error(path, fmt::format("unknown type '{}'", s));
  };
  if (v.is_array()) {
    uint8_t bits = 0;
    for (const auto& t : v) {
      DI_TRY(b, one(t));
      bits |= b;
    }
    return bits;
  }
  return one(v);
}

// The nesting depth of a JSON value in containers (a scalar adds none), without recursion; stops
// counting past `limit`.
size_t json_depth(const Json& root, size_t limit) {
  if (!root.is_structured()) return 0;
  std::vector<std::pair<const Json*, size_t>> stack{{&root, 1}};
  size_t deepest = 0;
  while (!stack.empty()) {
    auto [j, d] = stack.back();
    stack.pop_back();
    deepest = std::max(deepest, d);
    if (deepest > limit) return deepest;
    for (const auto& child : *j) {
      if (child.is_structured()) stack.push_back({&child, d + 1});
    }
  }
  return deepest;
}

}  // namespace

bool SchemaNode::only_applicators() const {
  return !always_false && types == kTypeAll && !enum_values && min_length == 0 && max_length == UINT64_MAX && patterns.empty() &&
         formats.empty() && !lower && !upper && multiple_of.empty() && prefix_items.empty() && !items && !unevaluated_items &&
         min_items == 0 && max_items == UINT64_MAX && !contains && properties.empty() && required.empty() &&
         pattern_properties.empty() && !additional_properties && !unevaluated_properties && !property_names &&
         min_properties == 0 && max_properties == UINT64_MAX && !unique_items && excluded.empty() && not_patterns.empty() &&
         forbidden.empty();
}

std::vector<SchemaId> SchemaNode::in_place() const {
  std::vector<SchemaId> out(all_of.begin(), all_of.end());
  out.insert(out.end(), logic.begin(), logic.end());
  if (ref) out.push_back(*ref);
  return out;
}

SchemaId SchemaSet::add_node(SchemaNode n) {
  n.synthetic = true;
  nodes_.push_back(std::move(n));
  return static_cast<SchemaId>(nodes_.size() - 1);
}

Result<SchemaSet> SchemaSet::parse(std::string_view text) {
  SchemaSet s;
  try {
    s.doc_ = std::make_unique<Json>(Json::parse(text));
  } catch (const std::exception& e) {
    return make_error(Code::kGrammar, "json schema: not valid JSON: {}", e.what());
  }
  const Json& doc = *s.doc_;
  if (json_depth(doc, kMaxJsonDepth) > kMaxJsonDepth) {
    return make_error(Code::kGrammar, "json schema: nested too deep (more than {} levels of objects and arrays)", kMaxJsonDepth);
  }
  if (!doc.is_object() && !doc.is_boolean()) return make_error(Code::kGrammar, "json schema: must be an object or a boolean");
  std::string base(kDefaultBase);
  s.register_resources(doc, base);
  DI_TRY(root, s.load(doc, base, ""));
  s.root_ = root;
  DI_TRYV(s.drain());
  DI_TRYV(s.add_logic());
  DI_TRYV(s.check_in_place_cycles());
  return s;
}

// Records every $id (a new base URI) and $anchor reachable through subschema keywords.
void SchemaSet::register_resources(const Json& root, const std::string& root_base) {
  struct Visit {
    const Json* json;
    std::string base, path;
  };
  std::vector<Visit> stack{{&root, root_base, ""}};
  while (!stack.empty()) {
    Visit v = std::move(stack.back());
    stack.pop_back();
    const Json& j = *v.json;
    if (!j.is_object()) continue;
    std::string base = v.base;
    auto id = j.find("$id");
    if (id != j.end() && id->is_string()) {
      base = split_fragment(resolve_uri(v.base, id->get_ref<const std::string&>())).first;
      resources_.emplace(base, std::make_pair(&j, v.path));
    } else if (v.path.empty()) {
      resources_.emplace(base, std::make_pair(&j, v.path));
    }
    for (const char* kw : {"$anchor", "$dynamicAnchor"}) {
      auto a = j.find(kw);
      if (a != j.end() && a->is_string()) anchors_.emplace(base + "#" + a->get<std::string>(), std::make_pair(&j, v.path));
    }
    for (const auto& [key, value] : j.items()) {
      std::string p = v.path + "/" + escape_pointer(key);
      if (kSchemaValued.count(key) && value.is_object()) stack.push_back({&value, base, p});
      if (kSchemaMaps.count(key) && value.is_object()) {
        for (const auto& [k, sub] : value.items()) stack.push_back({&sub, base, p + "/" + escape_pointer(k)});
      }
      if (kSchemaArrays.count(key) && value.is_array()) {
        for (size_t i = 0; i < value.size(); ++i) stack.push_back({&value[i], base, p + "/" + std::to_string(i)});
      }
    }
  }
}

Result<SchemaId> SchemaSet::load(const Json& j, const std::string& parent_base, const std::string& path) {
  auto it = ids_.find(&j);
  if (it != ids_.end()) return it->second;
  if (nodes_.size() >= 100000) return schema_error(path, "too many subschemas");
  SchemaId id = static_cast<SchemaId>(nodes_.size());
  ids_.emplace(&j, id);
  nodes_.emplace_back();
  std::string base = parent_base;
  if (j.is_object()) {
    auto idv = j.find("$id");
    if (idv != j.end() && idv->is_string()) base = split_fragment(resolve_uri(parent_base, idv->get_ref<const std::string&>())).first;
  }
  pending_.push_back({&j, std::move(base), path, id});
  return id;
}

Result<void> SchemaSet::drain() {
  while (!pending_.empty()) {
    Pending p = std::move(pending_.back());
    pending_.pop_back();
    DI_TRY(n, parse_node(*p.json, p.base, p.path));
    nodes_[p.id] = std::move(n);
  }
  return ok();
}

Result<void> SchemaSet::check_in_place_cycles() const {
  // Iterative DFS over the in-place edges; 0 = unseen, 1 = on the stack, 2 = done.
  std::vector<uint8_t> color(nodes_.size(), 0);
  auto edges = [&](SchemaId id) {
    const SchemaNode& n = nodes_[id];
    std::vector<SchemaId> out = n.in_place();
    out.insert(out.end(), n.any_of.begin(), n.any_of.end());
    out.insert(out.end(), n.one_of.begin(), n.one_of.end());
    return out;
  };
  for (SchemaId start = 0; start < nodes_.size(); ++start) {
    if (color[start]) continue;
    std::vector<std::pair<SchemaId, std::vector<SchemaId>>> stack;
    stack.push_back({start, edges(start)});
    color[start] = 1;
    while (!stack.empty()) {
      auto& [id, next] = stack.back();
      if (next.empty()) {
        color[id] = 2;
        stack.pop_back();
        continue;
      }
      SchemaId to = next.back();
      next.pop_back();
      if (color[to] == 1) {
        return schema_error(nodes_[to].path, "the schema refers to itself through $ref/allOf/anyOf/oneOf without descending into the instance");
      }
      if (color[to] == 0) {
        color[to] = 1;
        stack.push_back({to, edges(to)});
      }
    }
  }
  return ok();
}

Result<SchemaId> SchemaSet::resolve_ref(const std::string& base, const std::string& ref, const std::string& path) {
  auto [doc_uri, fragment] = split_fragment(resolve_uri(base, ref));
  fragment = percent_decode(fragment);
  auto res = resources_.find(doc_uri);
  if (res == resources_.end()) {
    return schema_error(path, fmt::format("$ref '{}' points outside this document (remote references are not supported)", ref));
  }
  if (fragment.empty()) return load(*res->second.first, doc_uri, res->second.second);
  if (fragment[0] != '/') {
    auto a = anchors_.find(doc_uri + "#" + fragment);
    if (a == anchors_.end()) return schema_error(path, fmt::format("$ref '{}': no anchor '{}'", ref, fragment));
    // The anchored node's own base: re-resolve its $id chain from the resource.
    std::string node_base = doc_uri;
    auto idv = a->second.first->find("$id");
    if (idv != a->second.first->end() && idv->is_string()) node_base = split_fragment(resolve_uri(doc_uri, idv->get<std::string>())).first;
    return load(*a->second.first, node_base, a->second.second);
  }
  // JSON pointer from the resource root; an $id met on the way changes the base.
  const Json* cur = res->second.first;
  std::string cur_base = doc_uri;
  std::string cur_path = res->second.second;
  size_t i = 1;
  while (i <= fragment.size()) {
    size_t j = fragment.find('/', i);
    if (j == std::string::npos) j = fragment.size();
    std::string token;
    for (size_t k = i; k < j; ++k) {
      if (fragment[k] == '~' && k + 1 < j && (fragment[k + 1] == '0' || fragment[k + 1] == '1')) {
        token += fragment[k + 1] == '0' ? '~' : '/';
        ++k;
      } else {
        token += fragment[k];
      }
    }
    if (cur->is_object()) {
      auto f = cur->find(token);
      if (f == cur->end()) return schema_error(path, fmt::format("$ref '{}' does not resolve", ref));
      cur = &*f;
    } else if (cur->is_array()) {
      size_t idx = 0;
      bool digits = !token.empty() && token.size() <= 9 && token.find_first_not_of("0123456789") == std::string::npos;
      if (digits) idx = static_cast<size_t>(std::stoul(token));
      if (!digits || idx >= cur->size()) return schema_error(path, fmt::format("$ref '{}' does not resolve", ref));
      cur = &(*cur)[idx];
    } else {
      return schema_error(path, fmt::format("$ref '{}' does not resolve", ref));
    }
    cur_path += "/" + escape_pointer(token);
    if (cur->is_object() && j < fragment.size()) {
      auto idv = cur->find("$id");
      if (idv != cur->end() && idv->is_string()) cur_base = split_fragment(resolve_uri(cur_base, idv->get<std::string>())).first;
    }
    i = j + 1;
  }
  if (!cur->is_object() && !cur->is_boolean()) return schema_error(path, fmt::format("$ref '{}' does not point to a schema", ref));
  return load(*cur, cur_base, cur_path);
}

// dependentRequired (name -> names), dependentSchemas (name -> schema), and draft-7 dependencies
// (either).
Result<void> SchemaSet::parse_dependencies(const std::string& key, const Json& v, const std::string& base, const std::string& path,
                                           SchemaNode& n) {
  if (!v.is_object()) return schema_error(n.path, fmt::format("{} must be an object", key));
  for (const auto& [name, dep] : v.items()) {
    if (key != "dependentSchemas" && dep.is_array()) {
      std::vector<std::string> names;
      for (const auto& d : dep) {
        if (!d.is_string()) return schema_error(n.path, fmt::format("{} must list property names", key));
        names.push_back(d.get<std::string>());
      }
      n.dependent_required.emplace_back(name, std::move(names));
    } else if (key != "dependentRequired") {
      if (!dep.is_object() && !dep.is_boolean()) return schema_error(n.path, fmt::format("{} must be a schema", key));
      DI_TRY(id, load(dep, base, path + "/" + key + "/" + escape_pointer(name)));
      n.dependent_schemas.emplace_back(name, id);
    } else {
      return schema_error(n.path, "dependentRequired must map names to arrays of names");
    }
  }
  return ok();
}

namespace {

Result<void> check_schema(const Json& v, std::string_view keyword, const std::string& path) {
  if (!v.is_object() && !v.is_boolean()) return schema_error(path, fmt::format("{} must be a schema", keyword));
  return ok();
}

}  // namespace

Result<SchemaNode> SchemaSet::parse_node(const Json& j, const std::string& base, const std::string& path) {
  SchemaNode n;
  n.path = path.empty() ? "#" : "#" + path;
  if (j.is_boolean()) {
    n.always_false = !j.get<bool>();
    return n;
  }
  if (!j.is_object()) return schema_error(n.path, "a schema must be an object or a boolean");
  // Each keyword belongs to one family; the families' parsers say whether the keyword was theirs.
  const NodeSource src{j, base, path};
  for (const auto& [key, v] : j.items()) {
    if (kUnsupported.count(key)) return schema_error(n.path, fmt::format("keyword '{}' is not supported", key));
    DI_TRY(scalar, parse_scalar_keyword(key, v, src, n));
    if (scalar) continue;
    DI_TRY(array, parse_array_keyword(key, v, src, n));
    if (array) continue;
    DI_TRY(object, parse_object_keyword(key, v, src, n));
    if (object) continue;
    DI_TRYV(parse_applicator_keyword(key, v, src, n));
  }
  if (j.contains("items") && j["items"].is_array()) {  // draft 2019 and earlier: tuple form
    auto ai = j.find("additionalItems");
    if (ai != j.end()) {
      DI_TRYV(check_schema(*ai, "additionalItems", n.path));
      DI_TRY(id, load(*ai, base, path + "/additionalItems"));
      n.items = id;
    }
  }
  return n;
}

Result<SchemaId> SchemaSet::load_keyword(const Json& v, const NodeSource& src, const std::string& key) {
  return load(v, src.base, src.path + "/" + escape_pointer(key));
}

// type, enum, const; string and number keywords.
Result<bool> SchemaSet::parse_scalar_keyword(const std::string& key, const Json& v, const NodeSource& src, SchemaNode& n) {
  if (key == "type") {
    DI_TRY(bits, type_bits(v, n.path));
    n.types = bits;
  } else if (key == "enum") {
    if (!v.is_array()) return schema_error(n.path, "enum must be an array");
    std::vector<Json> vals(v.begin(), v.end());
    n.enum_values = std::move(vals);
  } else if (key == "const") {
    n.enum_values = std::vector<Json>{v};
    if (src.j.contains("enum")) return schema_error(n.path, "const together with enum in one schema is not supported");
  } else if (key == "minLength") {
    DI_TRY(c, count_value(v, n.path, key));
    n.min_length = c;
  } else if (key == "maxLength") {
    DI_TRY(c, count_value(v, n.path, key));
    n.max_length = c;
  } else if (key == "pattern") {
    if (!v.is_string()) return schema_error(n.path, "pattern must be a string");
    n.patterns.push_back(v.get<std::string>());
  } else if (key == "format") {
    if (!v.is_string()) return schema_error(n.path, "format must be a string");
    n.formats.push_back(v.get<std::string>());
  } else if (key == "minimum" || key == "exclusiveMinimum") {
    DI_TRY(d, number_value(v, n.path, key));
    NumberBound b{d, key == "exclusiveMinimum"};
    if (!n.lower || compare(d, n.lower->value) > 0 || (compare(d, n.lower->value) == 0 && b.exclusive)) n.lower = b;
  } else if (key == "maximum" || key == "exclusiveMaximum") {
    DI_TRY(d, number_value(v, n.path, key));
    NumberBound b{d, key == "exclusiveMaximum"};
    if (!n.upper || compare(d, n.upper->value) < 0 || (compare(d, n.upper->value) == 0 && b.exclusive)) n.upper = b;
  } else if (key == "multipleOf") {
    DI_TRY(d, number_value(v, n.path, key));
    if (d.negative || d.is_zero()) return schema_error(n.path, "multipleOf must be greater than 0");
    n.multiple_of.push_back(d);
  } else {
    return false;
  }
  return true;
}

// items, prefixItems, contains and the array counts.
Result<bool> SchemaSet::parse_array_keyword(const std::string& key, const Json& v, const NodeSource& src, SchemaNode& n) {
  if (key == "items") {
    if (v.is_array()) {  // draft 2019 and earlier: tuple form
      for (size_t i = 0; i < v.size(); ++i) {
        DI_TRYV(check_schema(v[i], "items", n.path));
        DI_TRY(id, load(v[i], src.base, src.path + "/items/" + std::to_string(i)));
        n.prefix_items.push_back(id);
      }
    } else {
      DI_TRYV(check_schema(v, key, n.path));
      DI_TRY(id, load_keyword(v, src, key));
      n.items = id;
    }
  } else if (key == "prefixItems") {
    if (!v.is_array()) return schema_error(n.path, "prefixItems must be an array");
    if (src.j.contains("items") && src.j["items"].is_array()) return schema_error(n.path, "prefixItems with array-form items");
    for (size_t i = 0; i < v.size(); ++i) {
      DI_TRYV(check_schema(v[i], key, n.path));
      DI_TRY(id, load(v[i], src.base, src.path + "/prefixItems/" + std::to_string(i)));
      n.prefix_items.push_back(id);
    }
  } else if (key == "contains") {
    DI_TRYV(check_schema(v, key, n.path));
    DI_TRY(id, load_keyword(v, src, key));
    n.contains = id;
  } else if (key == "minContains") {
    DI_TRY(c, count_value(v, n.path, key));
    n.min_contains = c;
  } else if (key == "minItems") {
    DI_TRY(c, count_value(v, n.path, key));
    n.min_items = c;
  } else if (key == "maxItems") {
    DI_TRY(c, count_value(v, n.path, key));
    n.max_items = c;
  } else if (key == "uniqueItems") {
    if (!v.is_boolean()) return schema_error(n.path, "uniqueItems must be a boolean");
    n.unique_items = v.get<bool>();
  } else {
    return false;
  }
  return true;
}

// properties, required, the other property keywords and dependencies.
Result<bool> SchemaSet::parse_object_keyword(const std::string& key, const Json& v, const NodeSource& src, SchemaNode& n) {
  if (key == "properties") {
    if (!v.is_object()) return schema_error(n.path, "properties must be an object");
    for (const auto& [name, ps] : v.items()) {
      DI_TRYV(check_schema(ps, key, n.path));
      DI_TRY(id, load(ps, src.base, src.path + "/properties/" + escape_pointer(name)));
      n.properties.emplace_back(name, id);
    }
  } else if (key == "required") {
    if (!v.is_array()) return schema_error(n.path, "required must be an array of strings");
    for (const auto& r : v) {
      if (!r.is_string()) return schema_error(n.path, "required must be an array of strings");
      if (std::find(n.required.begin(), n.required.end(), r.get<std::string>()) == n.required.end()) n.required.push_back(r.get<std::string>());
    }
  } else if (key == "patternProperties") {
    if (!v.is_object()) return schema_error(n.path, "patternProperties must be an object");
    for (const auto& [pattern, ps] : v.items()) {
      DI_TRYV(check_schema(ps, key, n.path));
      auto re = parse_ecmascript_regex(pattern);
      if (!re) return schema_error(n.path, fmt::format("patternProperties: {}", re.error().message));
      DI_TRY(id, load(ps, src.base, src.path + "/patternProperties/" + escape_pointer(pattern)));
      n.pattern_properties.emplace_back(pattern, id);
    }
  } else if (key == "additionalProperties") {
    DI_TRYV(check_schema(v, key, n.path));
    DI_TRY(id, load_keyword(v, src, key));
    n.additional_properties = id;
  } else if (key == "unevaluatedProperties" || key == "unevaluatedItems") {
    DI_TRYV(check_schema(v, key, n.path));
    DI_TRY(id, load_keyword(v, src, key));
    (key == "unevaluatedItems" ? n.unevaluated_items : n.unevaluated_properties) = id;
    has_unevaluated_ = true;
  } else if (key == "propertyNames") {
    DI_TRYV(check_schema(v, key, n.path));
    DI_TRY(id, load_keyword(v, src, key));
    n.property_names = id;
  } else if (key == "minProperties") {
    DI_TRY(c, count_value(v, n.path, key));
    n.min_properties = c;
  } else if (key == "maxProperties") {
    DI_TRY(c, count_value(v, n.path, key));
    n.max_properties = c;
  } else if (key == "dependentRequired" || key == "dependentSchemas" || key == "dependencies") {
    DI_TRYV(parse_dependencies(key, v, src.base, src.path, n));
  } else {
    return false;
  }
  return true;
}

// allOf / anyOf / oneOf, not / if / then / else, $ref. Other keywords are annotations: ignored.
Result<void> SchemaSet::parse_applicator_keyword(const std::string& key, const Json& v, const NodeSource& src, SchemaNode& n) {
  if (key == "allOf" || key == "anyOf" || key == "oneOf") {
    if (!v.is_array() || v.empty()) return schema_error(n.path, fmt::format("{} must be a non-empty array", key));
    auto& dst = key == "allOf" ? n.all_of : key == "anyOf" ? n.any_of : n.one_of;
    for (size_t i = 0; i < v.size(); ++i) {
      DI_TRYV(check_schema(v[i], key, n.path));
      DI_TRY(id, load(v[i], src.base, src.path + "/" + key + "/" + std::to_string(i)));
      dst.push_back(id);
    }
  } else if (key == "not" || key == "if" || key == "then" || key == "else") {
    DI_TRYV(check_schema(v, key, n.path));
    DI_TRY(id, load_keyword(v, src, key));
    (key == "not" ? n.not_of : key == "if" ? n.if_of : key == "then" ? n.then_of : n.else_of) = id;
  } else if (key == "$ref") {
    if (!v.is_string()) return schema_error(n.path, "$ref must be a string");
    DI_TRY(id, resolve_ref(src.base, v.get<std::string>(), n.path));
    n.ref = id;
  }
  return ok();
}

}  // namespace deepinfer::grammar
