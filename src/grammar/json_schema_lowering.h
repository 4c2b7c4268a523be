// The lowering of a loaded JSON Schema to a grammar (internal to the JSON Schema front end:
// json_schema_compiler.cpp runs it). Each conjunction of subschemas gets a rule, created on first
// use and expanded from a pending list; the keywords of each instance type are lowered by the
// files named after them (json_schema_strings.cpp, json_schema_arrays.cpp, json_schema_objects.cpp).
#pragma once

#include "grammar/grammar.h"
#include "grammar/grammar_options.h"
#include "grammar/json_schema_algebra.h"
#include "grammar/json_schema_set.h"
#include "grammar/json_schema_validator.h"
#include "util/result.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer::grammar {

class SchemaLowering {
 public:
  // Adds synthetic nodes to `set` (oneOf branches made exclusive).
  SchemaLowering(SchemaSet& set, const GrammarOptions& options)
      : set_(set), options_(options), validator_(set), algebra_(set, validator_) {}

  Result<Grammar> run();

 private:
  // ---- core ----
  Result<uint32_t> terminal(const Regex& r);
  Result<void> make_punctuation();
  std::string rule_name(const std::vector<SchemaId>& members);
  Result<uint32_t> lower_ids(const std::vector<SchemaId>& ids);
  // The rule for a conjunction, created on first use and expanded later by expand_pending(), so
  // that nested schemas and $ref chains are lowered by a loop, not by recursion.
  Result<uint32_t> lower(const Conj& c);
  // A conjunction without the members that add nothing once expanded: nodes made only of
  // applicators whose anyOf/oneOf are resolved (their $ref and allOf targets and chosen branches
  // are members themselves). Conjunctions reached through different $refs to the same schema then
  // share one rule (anyOf of two $refs to the next level, 20 levels deep, made 2^20 rules).
  // unevaluated* keywords see the schemas on the way, so conjunctions with them keep every member.
  Conj memo_key(const Conj& c) const;
  Result<void> expand_pending();
  Result<void> expand(uint32_t rule, const Conj& key, const Flat& f);
  Result<void> lower_merged(uint32_t rule, const Merged& m, const std::vector<SchemaId>& members);
  // The branches of `owner`'s oneOf, exclusive: the schema's own when provably disjoint, else a
  // sound subset (json_schema_one_of.cpp).
  Result<const std::vector<SchemaId>*> one_of_branches(SchemaId owner);
  Result<std::optional<std::vector<SchemaId>>> discriminated_branches(const std::vector<SchemaId>& branches, const std::vector<Merged>& merged);
  Result<std::optional<std::vector<SchemaId>>> required_set_branches(const std::vector<SchemaId>& branches, const std::vector<Merged>& merged);

  // ---- strings ----
  // The JSON string bodies (between quotes) whose values meet the pattern and format constraints
  // of `m` (length bounds aside).
  Result<Dfa> string_body(const Merged& m, const std::string& where);
  // The same with the length bounds unrolled into the automaton (for keys, which the lowering
  // intersects and subtracts as languages; values use string_terminal's counter).
  Result<Dfa> string_content(const Merged& m, const std::string& where);
  // The terminal of the JSON strings (quotes included) meeting the string constraints of `m`;
  // nullopt when there is none. Length bounds become a counter (CountedDfa).
  Result<std::optional<uint32_t>> string_terminal(const Merged& m, const std::string& where);
  Result<uint32_t> quoted_terminal(const Dfa& content);
  // Unconstrained numbers keep exponents; bounds and multipleOf use exact decimal automata.
  Result<uint32_t> number_terminal(const Merged& m, const std::string& where);

  // ---- repetitions (json_schema_repeat.cpp) ----
  // Symbols deriving unit{min,max} (max may be UINT64_MAX), unambiguously, with O(log) rules.
  std::vector<Symbol> repeated(uint32_t unit, uint64_t min, uint64_t max);
  std::vector<Symbol> exactly(uint32_t unit, uint64_t count);
  uint32_t power_rule(uint32_t unit, int j);           // unit^(2^j)
  uint32_t optional_power_rule(uint32_t unit, int j);  // unit^(2^j) or nothing
  uint32_t up_to_rule(uint32_t unit, uint64_t max);    // unit{0,max}
  uint32_t star_rule(uint32_t unit);                   // unit*, left-recursive

  // ---- arrays ----
  Result<void> lower_array(uint32_t rule, const Merged& m, const std::string& where);
  Result<void> lower_unique_array(uint32_t rule, const Merged& m, const std::string& where);

  // ---- objects ----
  // Key strings allowed by propertyNames (nullopt: any).
  Result<std::optional<Dfa>> key_content(const std::vector<SchemaId>& ids, const std::string& where);
  Result<void> lower_object(uint32_t rule, const Merged& m, const std::string& where);
  Result<std::vector<std::pair<uint32_t, uint32_t>>> additional_members(const Merged& m, const std::optional<Dfa>& names_dfa,
                                                                        const std::string& where);

  SchemaSet& set_;
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
  struct Repeats {
    std::vector<uint32_t> power;
    std::map<int, uint32_t> optional_power;
    std::map<uint64_t, uint32_t> up_to;
    uint32_t star = UINT32_MAX;
  };
  std::map<uint32_t, Repeats> repeats_;  // per unit rule
  std::map<SchemaId, std::vector<SchemaId>> one_of_;  // owner -> exclusive branches
};

}  // namespace deepinfer::grammar
