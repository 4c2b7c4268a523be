// not, if/then/else, dependentRequired, dependentSchemas and draft-7 dependencies, rewritten as
// synthetic in-place members (SchemaNode::logic) built from the keywords the compiler already
// enforces, and the negation of a schema that they need:
//   not S                 -> negation(S)
//   if I then T else E    -> anyOf [allOf [I, T], allOf [negation(I), E]]
//   dependentRequired k:D -> anyOf [k absent, required [k, D...]]
//   dependentSchemas k:S  -> anyOf [k absent, allOf [required [k], S]]
// A negation is the disjunction of its keywords' negations, each written with the keyword's
// instance type: not {minLength: 3} is a string of at most 2 code points, not {required: [k]} an
// object without k, not {properties: {k: S}} an object with k whose value is not S. A keyword
// whose negation cannot be written exactly (additionalProperties, multipleOf, ...) is an error.
#include "grammar/json_formats.h"
#include "grammar/json_schema_set.h"

#include <fmt/format.h>

namespace deepinfer::grammar {
namespace {

Error schema_error(const std::string& path, std::string_view what) {
  return make_error(Code::kGrammar, "json schema: {} (at {})", what, path.empty() ? "#" : path);
}

}  // namespace

Result<void> SchemaSet::add_logic() {
  const auto original = static_cast<SchemaId>(nodes_.size());
  for (SchemaId id = 0; id < original; ++id) {
    const SchemaNode n = nodes_[id];  // a copy: nodes are added below
    std::vector<SchemaId> logic;
    auto make = [&](SchemaNode x) {
      x.path = n.path;
      return add_node(std::move(x));
    };
    if (n.not_of) logic.push_back(negation(*n.not_of));
    if (n.if_of && (n.then_of || n.else_of)) {
      SchemaNode yes, no, either;
      yes.all_of = {*n.if_of};
      if (n.then_of) yes.all_of.push_back(*n.then_of);
      no.all_of = {negation(*n.if_of)};
      if (n.else_of) no.all_of.push_back(*n.else_of);
      either.any_of = {make(std::move(yes)), make(std::move(no))};
      logic.push_back(make(std::move(either)));
    }
    auto dependency = [&](const std::string& name, SchemaNode present) {
      SchemaNode absent, either;
      absent.forbidden = {name};
      present.required.insert(present.required.begin(), name);
      either.any_of = {make(std::move(absent)), make(std::move(present))};
      logic.push_back(make(std::move(either)));
    };
    for (const auto& [name, names] : n.dependent_required) {
      SchemaNode present;
      present.required = names;
      dependency(name, std::move(present));
    }
    for (const auto& [name, schema] : n.dependent_schemas) {
      SchemaNode present;
      present.all_of = {schema};
      dependency(name, std::move(present));
    }
    nodes_[id].logic = std::move(logic);
  }
  return build_negations();
}

SchemaId SchemaSet::negation(SchemaId id) {
  auto it = negations_.find(id);
  if (it != negations_.end()) return it->second;
  SchemaNode placeholder;
  placeholder.path = nodes_[id].path;
  SchemaId out = add_node(std::move(placeholder));
  negations_.emplace(id, out);
  pending_negations_.push_back({id, out});
  return out;
}

Result<void> SchemaSet::build_negations() {
  while (!pending_negations_.empty()) {
    auto [id, out] = pending_negations_.back();
    pending_negations_.pop_back();
    if (nodes_.size() >= 200000) return schema_error(nodes_[id].path, "too many subschemas");
    DI_TRYV(negate_into(id, out));
  }
  return ok();
}

namespace {

SchemaNode typed(uint8_t types) {
  SchemaNode p;
  p.types = types;
  return p;
}

Error not_negatable(const SchemaNode& n, std::string_view keyword) {
  return schema_error(n.path, fmt::format("'{}' cannot be negated exactly (under not, if or oneOf)", keyword));
}

}  // namespace

SchemaId SchemaSet::add_part(const SchemaNode& owner, SchemaNode part) {
  part.path = owner.path;
  return add_node(std::move(part));
}

Result<void> SchemaSet::negate_into(SchemaId id, SchemaId out) {
  const SchemaNode n = nodes_[id];  // a copy: nodes are added below
  if (n.always_false) {
    nodes_[out].opaque = true;  // not false: anything
    return ok();
  }
  if (!n.excluded.empty() || !n.not_patterns.empty() || !n.forbidden.empty()) return not_negatable(n, "not");
  std::vector<SchemaId> parts;
  DI_TRYV(negate_scalars(n, parts));
  DI_TRYV(negate_containers(n, parts));
  DI_TRYV(negate_applicators(n, parts));
  SchemaNode& result = nodes_[out];
  result.synthetic = true;
  result.opaque = true;
  if (parts.empty()) {
    result.always_false = true;  // not true: nothing
  } else if (parts.size() == 1) {
    result.all_of = {parts[0]};
  } else {
    result.any_of = std::move(parts);
  }
  return ok();
}

// type, enum/const, string and number keywords.
Result<void> SchemaSet::negate_scalars(const SchemaNode& n, std::vector<SchemaId>& parts) {
  auto part = [&](SchemaNode p) { parts.push_back(add_part(n, std::move(p))); };
  if (n.types != kTypeAll) part(typed(static_cast<uint8_t>(kTypeAll & ~n.types)));
  if (n.enum_values) {
    SchemaNode p;
    p.excluded = *n.enum_values;
    part(std::move(p));
  }
  if (n.min_length > 0) {
    SchemaNode p = typed(kTypeString);
    p.max_length = n.min_length - 1;
    part(std::move(p));
  }
  if (n.max_length != UINT64_MAX) {
    SchemaNode p = typed(kTypeString);
    p.min_length = n.max_length + 1;
    part(std::move(p));
  }
  for (const auto& pattern : n.patterns) {
    SchemaNode p = typed(kTypeString);
    p.not_patterns = {pattern};
    part(std::move(p));
  }
  for (const auto& f : n.formats) {
    DI_TRY(rule, format_rule(f));
    if (rule.kind != FormatRule::Kind::kAnnotation) return not_negatable(n, "format");
  }
  const auto number = static_cast<uint8_t>(kTypeInteger | kTypeFraction);
  if (n.lower) {
    SchemaNode p = typed(number);
    p.upper = NumberBound{n.lower->value, !n.lower->exclusive};
    part(std::move(p));
  }
  if (n.upper) {
    SchemaNode p = typed(number);
    p.lower = NumberBound{n.upper->value, !n.upper->exclusive};
    part(std::move(p));
  }
  if (!n.multiple_of.empty()) return not_negatable(n, "multipleOf");
  return ok();
}

// Array and object keywords.
Result<void> SchemaSet::negate_containers(const SchemaNode& n, std::vector<SchemaId>& parts) {
  auto part = [&](SchemaNode p) { parts.push_back(add_part(n, std::move(p))); };
  if (!n.prefix_items.empty()) return not_negatable(n, "prefixItems");
  if (n.unevaluated_items) return not_negatable(n, "unevaluatedItems");
  if (n.unique_items) return not_negatable(n, "uniqueItems");
  if (n.items) {  // some element is not an item
    SchemaNode p = typed(kTypeArray);
    p.contains = negation(*n.items);
    part(std::move(p));
  }
  if (n.contains && n.min_contains > 0) {
    if (n.min_contains > 1) return not_negatable(n, "minContains");
    SchemaNode p = typed(kTypeArray);  // no element matches
    p.items = negation(*n.contains);
    part(std::move(p));
  }
  if (n.min_items > 0) {
    SchemaNode p = typed(kTypeArray);
    p.max_items = n.min_items - 1;
    part(std::move(p));
  }
  if (n.max_items != UINT64_MAX) {
    SchemaNode p = typed(kTypeArray);
    p.min_items = n.max_items + 1;
    part(std::move(p));
  }
  if (n.additional_properties) return not_negatable(n, "additionalProperties");
  if (!n.pattern_properties.empty()) return not_negatable(n, "patternProperties");
  if (n.property_names) return not_negatable(n, "propertyNames");
  if (n.unevaluated_properties) return not_negatable(n, "unevaluatedProperties");
  if (!n.dependent_required.empty()) return not_negatable(n, "dependentRequired");
  if (!n.dependent_schemas.empty()) return not_negatable(n, "dependentSchemas");
  for (const auto& [name, schema] : n.properties) {  // present with a value that is not `schema`
    SchemaNode p = typed(kTypeObject);
    p.required = {name};
    p.properties = {{name, negation(schema)}};
    part(std::move(p));
  }
  for (const auto& name : n.required) {
    SchemaNode p = typed(kTypeObject);
    p.forbidden = {name};
    part(std::move(p));
  }
  if (n.min_properties > 0) {
    SchemaNode p = typed(kTypeObject);
    p.max_properties = n.min_properties - 1;
    part(std::move(p));
  }
  if (n.max_properties != UINT64_MAX) {
    SchemaNode p = typed(kTypeObject);
    p.min_properties = n.max_properties + 1;
    part(std::move(p));
  }
  return ok();
}

// not (allOf A B) = not A or not B; not (anyOf A B) = not A and not B; not not S = S.
Result<void> SchemaSet::negate_applicators(const SchemaNode& n, std::vector<SchemaId>& parts) {
  for (SchemaId a : n.all_of) parts.push_back(negation(a));
  if (n.ref) parts.push_back(negation(*n.ref));
  if (!n.any_of.empty()) {
    SchemaNode p;
    for (SchemaId a : n.any_of) p.all_of.push_back(negation(a));
    parts.push_back(add_part(n, std::move(p)));
  }
  if (!n.one_of.empty()) return not_negatable(n, "oneOf");
  if (n.not_of) parts.push_back(*n.not_of);
  if (n.if_of && (n.then_of || n.else_of)) {  // (if and not then) or (not if and not else)
    SchemaNode p;
    if (n.then_of) {
      SchemaNode yes;
      yes.all_of = {*n.if_of, negation(*n.then_of)};
      p.any_of.push_back(add_part(n, std::move(yes)));
    }
    if (n.else_of) {
      SchemaNode no;
      no.all_of = {negation(*n.if_of), negation(*n.else_of)};
      p.any_of.push_back(add_part(n, std::move(no)));
    }
    parts.push_back(add_part(n, std::move(p)));
  }
  return ok();
}

}  // namespace deepinfer::grammar
