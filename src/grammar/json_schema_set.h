// A JSON Schema document loaded for compilation: every reachable subschema parsed once into a
// SchemaNode (the keywords the compiler enforces, checked for well-formedness), with $ref resolved
// through $id / $anchor / JSON-pointer fragments. A keyword that would constrain instances but
// cannot be enforced is an error naming it; annotations and unknown keywords are ignored, as the
// specification says.
#pragma once

#include "grammar/json_lexemes.h"
#include "grammar/number_range.h"
#include "util/result.h"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace deepinfer::grammar {

using SchemaId = uint32_t;

// Instance types as bits; "number" is kInteger | kFraction.
enum TypeBits : uint8_t {
  kTypeNull = 1,
  kTypeBoolean = 2,
  kTypeObject = 4,
  kTypeArray = 8,
  kTypeString = 16,
  kTypeInteger = 32,
  kTypeFraction = 64,
  kTypeAll = 127,
};

struct SchemaNode {
  std::string path;  // JSON pointer in the document, for messages
  bool always_false = false;
  uint8_t types = kTypeAll;
  std::optional<std::vector<Json>> enum_values;  // from const and enum
  // strings
  uint64_t min_length = 0, max_length = UINT64_MAX;
  std::vector<std::string> patterns;
  std::vector<std::string> formats;
  // numbers
  std::optional<NumberBound> lower, upper;
  std::vector<Decimal> multiple_of;
  // arrays
  std::vector<SchemaId> prefix_items;
  std::optional<SchemaId> items;
  std::optional<SchemaId> unevaluated_items;
  uint64_t min_items = 0, max_items = UINT64_MAX;
  std::optional<SchemaId> contains;
  uint64_t min_contains = 1;
  // objects
  std::vector<std::pair<std::string, SchemaId>> properties;
  std::vector<std::string> required;
  std::vector<std::pair<std::string, SchemaId>> pattern_properties;  // (ECMAScript pattern, schema)
  std::optional<SchemaId> additional_properties;
  std::optional<SchemaId> unevaluated_properties;
  std::optional<SchemaId> property_names;
  uint64_t min_properties = 0, max_properties = UINT64_MAX;
  bool unique_items = false;
  // applicators
  std::vector<SchemaId> all_of;
  std::vector<SchemaId> any_of;
  std::vector<SchemaId> one_of;
  std::optional<SchemaId> ref;
  // Keywords rewritten by SchemaSet into `logic` members (kept for negation): not, if/then/else,
  // dependentRequired, dependentSchemas (and draft-7 dependencies).
  std::optional<SchemaId> not_of, if_of, then_of, else_of;
  std::vector<std::pair<std::string, std::vector<std::string>>> dependent_required;
  std::vector<std::pair<std::string, SchemaId>> dependent_schemas;
  // Synthetic in-place members that say what those keywords mean (allOf semantics).
  std::vector<SchemaId> logic;
  // Constraints only synthetic nodes carry (negations): values that may not appear, patterns a
  // string may not match, keys an object may not have.
  std::vector<Json> excluded;
  std::vector<std::string> not_patterns;
  std::vector<std::string> forbidden;
  // Made by SchemaSet, not written in the schema: it evaluates nothing for unevaluated* (a failed
  // `if` or a `not` gives no annotations).
  bool synthetic = false;
  // A negation: what lies below it gives no annotations either (reach() stops here).
  bool opaque = false;

  // Nothing but $ref / allOf / anyOf / oneOf / logic: once those are followed, the node adds no
  // constraint.
  bool only_applicators() const;
  // The in-place members: allOf, $ref and the logic members.
  std::vector<SchemaId> in_place() const;
};

class SchemaSet {
 public:
  // JSON nesting beyond this (the schema document, const and enum values included) is an error:
  // what follows recurses over values, and a schema must compile on a small thread stack.
  static constexpr size_t kMaxJsonDepth = 128;

  static Result<SchemaSet> parse(std::string_view text);

  SchemaId root() const { return root_; }
  // References stay valid when nodes are added (the nodes live in a deque).
  const SchemaNode& node(SchemaId id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  // Some schema uses unevaluatedProperties or unevaluatedItems.
  bool has_unevaluated() const { return has_unevaluated_; }
  // A synthetic node (the lowering adds some for oneOf); `n.synthetic` is set.
  SchemaId add_node(SchemaNode n);

 private:
  struct Location {
    const Json* json;
    std::string base;  // base URI
    std::string path;
  };
  void register_resources(const Json& root, const std::string& base);
  // Assigns an id; the node is parsed later by drain() (so that no chain of subschemas or $refs
  // recurses).
  Result<SchemaId> load(const Json& j, const std::string& base, const std::string& path);
  Result<void> drain();
  Result<SchemaNode> parse_node(const Json& j, const std::string& base, const std::string& path);
  // The schema object a node is parsed from and where it sits (base URI, JSON pointer).
  struct NodeSource {
    const Json& j;
    const std::string& base;
    const std::string& path;
  };
  // The subschema `v` of keyword `key`.
  Result<SchemaId> load_keyword(const Json& v, const NodeSource& src, const std::string& key);
  // A keyword of one family into `n`; false when the keyword is not of that family.
  Result<bool> parse_scalar_keyword(const std::string& key, const Json& v, const NodeSource& src, SchemaNode& n);
  Result<bool> parse_array_keyword(const std::string& key, const Json& v, const NodeSource& src, SchemaNode& n);
  Result<bool> parse_object_keyword(const std::string& key, const Json& v, const NodeSource& src, SchemaNode& n);
  // The applicators and $ref; any other keyword is an annotation, ignored.
  Result<void> parse_applicator_keyword(const std::string& key, const Json& v, const NodeSource& src, SchemaNode& n);
  Result<void> parse_dependencies(const std::string& key, const Json& v, const std::string& base, const std::string& path,
                                  SchemaNode& n);
  Result<SchemaId> resolve_ref(const std::string& base, const std::string& ref, const std::string& path);
  // A schema that reaches itself through $ref / allOf / anyOf / oneOf alone has no meaning
  // (validators loop on it): an error.
  Result<void> check_in_place_cycles() const;
  // Rewrites not, if/then/else and the dependency keywords as logic members (schema_logic.cpp).
  Result<void> add_logic();
  // A node equal to the negation of `id`, built from a work list (no recursion); kGrammar for a
  // keyword whose negation cannot be written.
  SchemaId negation(SchemaId id);
  Result<void> build_negations();
  Result<void> negate_into(SchemaId id, SchemaId out);
  Result<void> negate_scalars(const SchemaNode& n, std::vector<SchemaId>& parts);
  Result<void> negate_containers(const SchemaNode& n, std::vector<SchemaId>& parts);
  Result<void> negate_applicators(const SchemaNode& n, std::vector<SchemaId>& parts);
  SchemaId add_part(const SchemaNode& owner, SchemaNode part);

  std::unique_ptr<Json> doc_;  // boxed: the tables point into it
  SchemaId root_ = 0;
  std::deque<SchemaNode> nodes_;
  bool has_unevaluated_ = false;
  std::map<SchemaId, SchemaId> negations_;                   // node -> its negation
  std::vector<std::pair<SchemaId, SchemaId>> pending_negations_;
  struct Pending {
    const Json* json;
    std::string base, path;
    SchemaId id;
  };
  std::vector<Pending> pending_;
  std::unordered_map<const Json*, SchemaId> ids_;
  std::map<std::string, std::pair<const Json*, std::string>> resources_;  // URI -> (node, path)
  std::map<std::string, std::pair<const Json*, std::string>> anchors_;    // URI#name -> (node, path)
};

}  // namespace deepinfer::grammar
