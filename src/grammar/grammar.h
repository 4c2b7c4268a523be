// The grammar every front end compiles to: a context-free grammar whose terminals are regular
// languages over bytes (one minimal DFA each). The parser is scannerless: a terminal may end at any
// accepting DFA state, so merging regular pieces into one terminal never changes the language.
//
// Dotted items are "cores": positions in one flat array holding every production's right-hand side
// followed by an end marker, so a core is a single integer and advancing the dot is core + 1.
#pragma once

#include "grammar/counted_dfa.h"
#include "grammar/dfa.h"
#include "util/result.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace deepinfer::grammar {

struct Symbol {
  bool terminal = false;
  uint32_t id = 0;
  static Symbol rule(uint32_t id) { return {false, id}; }
  static Symbol term(uint32_t id) { return {true, id}; }
};

enum class CoreKind : uint8_t { kRule, kTerminal, kEnd };

class Grammar {
 public:
  uint32_t root() const { return root_; }
  uint32_t num_rules() const { return static_cast<uint32_t>(rule_names_.size()); }
  uint32_t num_terminals() const { return static_cast<uint32_t>(terminals_.size()); }
  uint32_t num_cores() const { return static_cast<uint32_t>(core_kind_.size()); }
  const std::string& rule_name(uint32_t rule) const { return rule_names_[rule]; }

  CoreKind core_kind(uint32_t core) const { return core_kind_[core]; }
  // The rule or terminal after the dot; for an end marker, the production's left-hand side.
  uint32_t core_symbol(uint32_t core) const { return core_symbol_[core]; }
  // First core of each production of `rule`.
  std::span<const uint32_t> productions(uint32_t rule) const {
    return {prod_cores_.data() + prod_begin_[rule], prod_begin_[rule + 1] - prod_begin_[rule]};
  }
  // Cores whose next symbol is `rule` (where a completed `rule` continues).
  std::span<const uint32_t> parent_sites(uint32_t rule) const {
    return {site_cores_.data() + site_begin_[rule], site_begin_[rule + 1] - site_begin_[rule]};
  }
  bool nullable(uint32_t rule) const { return nullable_[rule] != 0; }
  // A terminal's DFA; for a counted terminal, its language without the length bound.
  const Dfa& terminal(uint32_t id) const { return *terminals_[id]; }
  const std::shared_ptr<const Dfa>& terminal_ptr(uint32_t id) const { return terminals_[id]; }
  // The length-counting automaton of a bounded string terminal, else null.
  const std::shared_ptr<const CountedDfa>& counted(uint32_t id) const { return counted_[id]; }

  // Readable listing (rules and productions; terminals as t<N>), for errors and tests.
  std::string to_string() const;

 private:
  friend class GrammarBuilder;
  // From the flattened productions: the cores that refer to each rule; the rules deriving ε.
  void index_rule_sites();
  void find_nullable_rules();
  uint32_t root_ = 0;
  std::vector<std::string> rule_names_;
  std::vector<std::shared_ptr<const Dfa>> terminals_;
  std::vector<std::shared_ptr<const CountedDfa>> counted_;
  std::vector<CoreKind> core_kind_;
  std::vector<uint32_t> core_symbol_;
  std::vector<uint32_t> prod_begin_, prod_cores_;
  std::vector<uint32_t> site_begin_, site_cores_;
  std::vector<uint8_t> nullable_;
};

// Collects rules and productions, then checks and normalizes them into a Grammar:
// terminals that match the empty string become optional rules, rules that derive no string
// and rules unreachable from the root are removed (an empty root language is an error).
class GrammarBuilder {
 public:
  // Fails with kGrammar beyond these sizes (a spec that expands too far).
  static constexpr size_t kMaxCores = 2'000'000;

  uint32_t add_rule(std::string name);
  // Terminals with the same language share an id.
  uint32_t add_terminal(std::shared_ptr<const Dfa> dfa);
  Result<uint32_t> add_regex_terminal(const Regex& regex);
  // A bounded string: `quoted` is its unbounded language, `counted` the same with the bound.
  uint32_t add_counted_terminal(std::shared_ptr<const Dfa> quoted, std::shared_ptr<const CountedDfa> counted);
  void add_production(uint32_t lhs, std::vector<Symbol> rhs);
  uint32_t num_rules() const { return static_cast<uint32_t>(names_.size()); }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }

  Result<Grammar> build(uint32_t root);

 private:
  struct Production {
    uint32_t lhs;
    std::vector<Symbol> rhs;
  };
  // Steps of build(): each terminal that matches ε becomes an optional rule (returns the terminals
  // whose language is empty); the rules that derive some string.
  std::vector<uint8_t> make_empty_terminals_optional();
  std::vector<uint8_t> productive_rules(const std::vector<uint8_t>& term_empty) const;
  std::vector<std::string> names_;
  std::vector<std::shared_ptr<const Dfa>> terminals_;
  std::vector<std::shared_ptr<const CountedDfa>> counted_;
  struct FingerprintHash {
    size_t operator()(const Dfa::Fingerprint& f) const { return static_cast<size_t>(f.a); }
  };
  std::unordered_map<Dfa::Fingerprint, uint32_t, FingerprintHash> terminal_ids_, counted_ids_;
  std::vector<Production> productions_;
  size_t num_symbols_ = 0;
};

}  // namespace deepinfer::grammar
