// Checks JSON values against schemas of a SchemaSet with the same keyword semantics the compiler
// enforces. The compiler uses it where it reasons about values rather than text: keeping the
// enum/const values that satisfy the sibling constraints, and proving oneOf branches disjoint.
#pragma once

#include "grammar/dfa.h"
#include "grammar/json_schema_set.h"
#include "util/result.h"

#include <map>
#include <memory>
#include <string>
#include <unordered_set>

namespace deepinfer::grammar {

// JSON Schema equality: numbers by value (1 == 1.0), objects regardless of key order.
bool json_equal(const Json& a, const Json& b);
// A text equal for exactly the values json_equal calls equal (numbers normalized, keys sorted):
// large enums are compared through hash sets of it.
std::string json_canonical(const Json& v);

class SchemaValidator {
 public:
  explicit SchemaValidator(const SchemaSet& set) : set_(set) {}
  Result<bool> valid(SchemaId id, const Json& value);
  // ECMAScript search semantics (the pattern may match anywhere unless anchored).
  Result<bool> pattern_matches(const std::string& pattern, const std::string& value);

 private:
  Result<const Dfa*> pattern_dfa(const std::string& pattern);
  bool in_enum(SchemaId id, const std::vector<Json>& values, const Json& v);
  // The keywords of one instance type (valid() checks the type and the applicators).
  Result<bool> valid_string(const SchemaNode& n, const Json& v);
  Result<bool> valid_number(const SchemaNode& n, const Json& v);
  Result<bool> valid_array(const SchemaNode& n, const Json& v);
  Result<bool> valid_object(const SchemaNode& n, const Json& v);
  Result<const Dfa*> format_dfa(const std::string& format);

  const SchemaSet& set_;
  std::map<std::string, std::unique_ptr<Dfa>> patterns_, formats_;
  std::map<SchemaId, std::unordered_set<std::string>> enum_sets_;  // canonical values of large enums
  int depth_ = 0;
};

}  // namespace deepinfer::grammar
