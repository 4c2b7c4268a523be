// oneOf: a value must match exactly one branch. Branches that are provably disjoint lower as they
// are; otherwise each branch is narrowed to a part that excludes every other branch, and the
// narrowing is kept only when the disjointness test proves it (a sound subset: never a value that
// matches two branches):
// - a discriminator: a property every branch constrains to its own constants (a function-call
//   union's "type": "circle" / "square" ...) is made required, in objects;
// - required sets: each branch is written with its required properties present and the
//   properties only other branches require absent.
#include "grammar/json_schema_lowering.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

namespace deepinfer::grammar {

Result<const std::vector<SchemaId>*> SchemaLowering::one_of_branches(SchemaId owner) {
  auto cached = one_of_.find(owner);
  if (cached != one_of_.end()) return &cached->second;
  const std::vector<SchemaId> branches = set_.node(owner).one_of;
  const std::string where = set_.node(owner).path;
  if (algebra_.check_disjoint(branches, where)) return &one_of_.emplace(owner, branches).first->second;
  std::vector<Merged> merged;
  for (SchemaId b : branches) {
    Conj c;
    insert_sorted(c.members, b);
    Flat f = algebra_.flatten(c);
    if (!f.open_groups.empty()) {
      return make_error(Code::kGrammar, "json schema: oneOf branches may overlap and a branch has its own anyOf/oneOf (at {})", where);
    }
    DI_TRY(m, algebra_.merge(f.members));
    merged.push_back(std::move(m));
  }
  DI_TRY(by_value, discriminated_branches(branches, merged));
  std::optional<std::vector<SchemaId>> narrowed = std::move(by_value);
  if (!narrowed) {
    DI_TRY(by_keys, required_set_branches(branches, merged));
    narrowed = std::move(by_keys);
  }
  if (!narrowed) {
    return make_error(Code::kGrammar,
                      "json schema: oneOf branches may overlap and no discriminating property or required set separates them (at {})",
                      where);
  }
  // Sound only if each narrowed branch excludes every other original branch.
  for (size_t i = 0; i < branches.size(); ++i) {
    for (size_t j = 0; j < branches.size(); ++j) {
      if (i == j) continue;
      DI_TRY(d, algebra_.disjoint({(*narrowed)[i]}, {branches[j]}));
      if (!d) {
        return make_error(Code::kGrammar, "json schema: oneOf branches {} and {} may both match (at {})", std::min(i, j), std::max(i, j),
                          where);
      }
    }
  }
  return &one_of_.emplace(owner, std::move(*narrowed)).first->second;
}

Result<std::optional<std::vector<SchemaId>>> SchemaLowering::discriminated_branches(const std::vector<SchemaId>& branches,
                                                                                     const std::vector<Merged>& merged) {
  // The constants a branch allows for property `name` (nullopt: not a finite set).
  auto constants = [&](const Merged& m, const std::string& name) -> Result<std::optional<std::unordered_set<std::string>>> {
    auto it = std::find_if(m.properties.begin(), m.properties.end(), [&](const auto& p) { return p.first == name; });
    if (it == m.properties.end()) return std::optional<std::unordered_set<std::string>>();
    Conj c;
    for (SchemaId id : it->second) insert_sorted(c.members, id);
    Flat f = algebra_.flatten(c);
    if (!f.open_groups.empty()) return std::optional<std::unordered_set<std::string>>();
    DI_TRY(v, algebra_.merge(f.members));
    if (!v.enum_values) return std::optional<std::unordered_set<std::string>>();
    std::unordered_set<std::string> out;
    for (const auto& x : *v.enum_values) out.insert(json_canonical(x));
    return std::optional<std::unordered_set<std::string>>(std::move(out));
  };
  for (const auto& [name, _] : merged[0].properties) {
    std::vector<std::unordered_set<std::string>> sets;
    for (const Merged& m : merged) {
      DI_TRY(s, constants(m, name));
      if (!s) break;
      sets.push_back(std::move(*s));
    }
    if (sets.size() != merged.size()) continue;
    bool apart = true;
    for (size_t i = 0; i < sets.size() && apart; ++i) {
      for (size_t j = i + 1; j < sets.size() && apart; ++j) {
        for (const auto& x : sets[i]) apart = apart && !sets[j].count(x);
      }
    }
    if (!apart) continue;
    std::vector<SchemaId> out;
    for (SchemaId b : branches) {
      SchemaNode n;
      n.path = set_.node(b).path;
      n.all_of = {b};
      n.types = kTypeObject;
      n.required = {name};
      out.push_back(set_.add_node(std::move(n)));
    }
    return std::optional<std::vector<SchemaId>>(std::move(out));
  }
  return std::optional<std::vector<SchemaId>>();
}

Result<std::optional<std::vector<SchemaId>>> SchemaLowering::required_set_branches(const std::vector<SchemaId>& branches,
                                                                                    const std::vector<Merged>& merged) {
  std::vector<SchemaId> out;
  for (size_t i = 0; i < branches.size(); ++i) {
    SchemaNode n;
    n.path = set_.node(branches[i]).path;
    n.all_of = {branches[i]};
    n.types = kTypeObject;
    for (size_t j = 0; j < branches.size(); ++j) {
      if (j == i) continue;
      for (const auto& name : merged[j].required) {
        if (!merged[i].required.count(name) && std::find(n.forbidden.begin(), n.forbidden.end(), name) == n.forbidden.end()) {
          n.forbidden.push_back(name);
        }
      }
    }
    if (n.forbidden.empty() && merged[i].required.empty()) return std::optional<std::vector<SchemaId>>();
    out.push_back(set_.add_node(std::move(n)));
  }
  return std::optional<std::vector<SchemaId>>(std::move(out));
}

}  // namespace deepinfer::grammar
