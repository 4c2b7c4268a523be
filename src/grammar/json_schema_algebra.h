// The algebra of JSON Schemas the compiler reasons with: a conjunction of subschemas is
// flattened (following $ref and allOf), its keywords merged into one set of constraints, and
// oneOf branches are checked to be exclusive. Shared by the lowering (json_schema_compiler.cpp).
#pragma once

#include "grammar/json_schema_set.h"
#include "grammar/json_schema_validator.h"
#include "util/result.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace deepinfer::grammar {

// A conjunction of subschemas (all must hold) plus the anyOf/oneOf groups already expanded into
// a chosen branch. Group ids: owner schema id * 2 + (1 for oneOf).
struct Conj {
  std::vector<SchemaId> members;
  std::vector<uint32_t> resolved;
  bool operator<(const Conj& o) const { return std::tie(members, resolved) < std::tie(o.members, o.resolved); }
};

void insert_sorted(std::vector<SchemaId>& v, SchemaId id);

// Constraints of a flattened conjunction, merged keyword by keyword.
struct Merged {
  uint8_t types = kTypeAll;
  std::optional<std::vector<Json>> enum_values;
  uint64_t min_length = 0, max_length = UINT64_MAX;
  std::vector<std::string> patterns, formats;
  std::optional<NumberBound> lower, upper;
  std::vector<Decimal> multiple_of;
  std::vector<std::vector<SchemaId>> prefix;  // per position: schemas that apply
  std::vector<SchemaId> items;                // schemas for positions past every prefix
  uint64_t min_items = 0, max_items = UINT64_MAX;
  std::vector<std::pair<SchemaId, uint64_t>> contains;  // (schema, minContains)
  std::vector<std::pair<std::string, std::vector<SchemaId>>> properties;
  std::set<std::string> required;
  std::vector<std::string> required_order;  // as the schemas' own `required` lists them
  // (owner member, schema) of every additionalProperties and patternProperties entry: the owner
  // decides where its additionalProperties applies (keys it neither declares nor matches).
  std::vector<std::pair<SchemaId, SchemaId>> additional;
  struct PatternRule {
    std::string pattern;
    SchemaId schema;
    SchemaId owner;
  };
  std::vector<PatternRule> pattern_properties;
  // unevaluatedProperties: the schema, and the members its evaluation sees (itself and the
  // schemas reached in place: allOf, $ref, the chosen anyOf/oneOf branch).
  struct Unevaluated {
    SchemaId schema;
    SchemaId owner;
    std::vector<SchemaId> reach;
  };
  std::vector<Unevaluated> unevaluated;
  std::vector<SchemaId> property_names;
  uint64_t min_properties = 0, max_properties = UINT64_MAX;
  // From negations (not, if, oneOf): values that may not appear, patterns strings may not match,
  // keys objects may not have.
  std::vector<Json> excluded;
  std::vector<std::string> not_patterns;
  std::set<std::string> forbidden;
  bool unique_items = false;
};

// A conjunction after following $ref and allOf: all its member schemas, whether one of them is
// `false`, and the anyOf/oneOf groups still to expand.
struct Flat {
  bool is_false = false;
  std::vector<SchemaId> members;
  std::vector<uint32_t> open_groups;
};

class SchemaAlgebra {
 public:
  SchemaAlgebra(const SchemaSet& set, SchemaValidator& validator) : set_(set), validator_(validator) {}

  // Members reached through $ref and allOf, and the anyOf/oneOf groups not yet resolved.
  Flat flatten(const Conj& c) const;
  Result<Merged> merge(const std::vector<SchemaId>& members);
  // Fails naming oneOf unless every two branches are provably exclusive.
  Result<void> check_disjoint(const std::vector<SchemaId>& branches, const std::string& where);
  // True when no value satisfies both conjunctions (a sound, incomplete test).
  Result<bool> disjoint(const std::vector<SchemaId>& a_ids, const std::vector<SchemaId>& b_ids, int depth = 0);

 private:
  std::vector<SchemaId> reach(SchemaId id, const std::vector<SchemaId>& members) const;
  Result<bool> evaluates(const Merged::Unevaluated& u, const std::string& name);
  bool requires_forbidden(const Merged& x, const Merged& y) const;

  const SchemaSet& set_;
  SchemaValidator& validator_;
};

}  // namespace deepinfer::grammar
