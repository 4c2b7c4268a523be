#include "grammar/grammar.h"

#include "grammar/compile_budget.h"

#include <fmt/format.h>

namespace deepinfer::grammar {

uint32_t GrammarBuilder::add_rule(std::string name) {
  names_.push_back(std::move(name));
  return static_cast<uint32_t>(names_.size() - 1);
}

uint32_t GrammarBuilder::add_terminal(std::shared_ptr<const Dfa> dfa) {
  auto [it, inserted] = terminal_ids_.emplace(dfa->fingerprint(), static_cast<uint32_t>(terminals_.size()));
  if (inserted) {
    terminals_.push_back(std::move(dfa));
    counted_.emplace_back();
  }
  return it->second;
}

uint32_t GrammarBuilder::add_counted_terminal(std::shared_ptr<const Dfa> quoted, std::shared_ptr<const CountedDfa> counted) {
  auto [it, inserted] = counted_ids_.emplace(counted->fingerprint(), static_cast<uint32_t>(terminals_.size()));
  if (inserted) {
    terminals_.push_back(std::move(quoted));
    counted_.push_back(std::move(counted));
  }
  return it->second;
}

Result<uint32_t> GrammarBuilder::add_regex_terminal(const Regex& regex) {
  DI_TRY(dfa, Dfa::from_regex(regex));
  return add_terminal(std::make_shared<const Dfa>(std::move(dfa)));
}

void GrammarBuilder::add_production(uint32_t lhs, std::vector<Symbol> rhs) {
  num_symbols_ += rhs.size() + 1;
  CompileBudget::charge(rhs.size() + 1);
  productions_.push_back({lhs, std::move(rhs)});
}

// Terminals matching the empty string: T becomes rule opt_T -> T' | ε with T' = T minus ε. Returns
// which terminals match nothing at all (empty language).
std::vector<uint8_t> GrammarBuilder::make_empty_terminals_optional() {
  std::vector<int64_t> term_as_rule(terminals_.size(), -1);
  std::vector<uint8_t> term_empty(terminals_.size(), 0);
  uint32_t optionals = 0;
  for (uint32_t t = 0; t < terminals_.size(); ++t) {
    const Dfa& d = *terminals_[t];
    term_empty[t] = d.empty_language() || (counted_[t] && counted_[t]->empty());
    if (term_empty[t] || counted_[t] || !d.accepting(d.start())) continue;
    uint32_t r = add_rule(fmt::format("optional{}", optionals++));
    term_as_rule[t] = r;
    Dfa nonempty = d.without_empty();
    if (!nonempty.empty_language()) {
      uint32_t nt = add_terminal(std::make_shared<const Dfa>(std::move(nonempty)));
      term_as_rule.resize(terminals_.size(), -1);
      term_empty.resize(terminals_.size(), 0);
      add_production(r, {Symbol::term(nt)});
    }
    add_production(r, {});
  }
  for (auto& p : productions_) {
    for (auto& s : p.rhs) {
      if (s.terminal && term_as_rule[s.id] >= 0) s = Symbol::rule(static_cast<uint32_t>(term_as_rule[s.id]));
    }
  }
  return term_empty;
}

// Rules that derive some string, by fixpoint.
std::vector<uint8_t> GrammarBuilder::productive_rules(const std::vector<uint8_t>& term_empty) const {
  const uint32_t nr = num_rules();
  std::vector<uint8_t> productive(nr, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& p : productions_) {
      if (productive[p.lhs]) continue;
      bool ok = true;
      for (const auto& s : p.rhs) {
        if (s.terminal ? term_empty[s.id] != 0 : productive[s.id] == 0) {
          ok = false;
          break;
        }
      }
      if (ok) {
        productive[p.lhs] = 1;
        changed = true;
      }
    }
  }
  return productive;
}

Result<Grammar> GrammarBuilder::build(uint32_t root) {
  DI_TRYV(CompileBudget::check());
  if (num_symbols_ > kMaxCores) {
    return make_error(Code::kGrammar, "grammar too large ({} symbols, limit {})", num_symbols_, kMaxCores);
  }
  const std::vector<uint8_t> term_empty = make_empty_terminals_optional();

  uint32_t nr = num_rules();
  if (root >= nr) return make_error(Code::kInternal, "grammar root {} out of range", root);
  const std::vector<uint8_t> productive = productive_rules(term_empty);
  if (!productive[root]) return make_error(Code::kGrammar, "the grammar matches no string");
  auto usable = [&](const Production& p) {
    for (const auto& s : p.rhs) {
      if (s.terminal ? term_empty[s.id] != 0 : productive[s.id] == 0) return false;
    }
    return true;
  };
  // Reachable rules from the root through usable productions.
  std::vector<std::vector<uint32_t>> by_lhs(nr);
  for (uint32_t i = 0; i < productions_.size(); ++i) {
    if (usable(productions_[i])) by_lhs[productions_[i].lhs].push_back(i);
  }
  std::vector<int64_t> new_rule(nr, -1);
  std::vector<uint32_t> order{root};
  new_rule[root] = 0;
  std::vector<int64_t> new_term(terminals_.size(), -1);
  Grammar g;
  for (size_t i = 0; i < order.size(); ++i) {
    for (uint32_t pi : by_lhs[order[i]]) {
      for (const auto& s : productions_[pi].rhs) {
        if (s.terminal) {
          if (new_term[s.id] < 0) {
            new_term[s.id] = static_cast<int64_t>(g.terminals_.size());
            g.terminals_.push_back(terminals_[s.id]);
            g.counted_.push_back(counted_[s.id]);
          }
        } else if (new_rule[s.id] < 0) {
          new_rule[s.id] = static_cast<int64_t>(order.size());
          order.push_back(s.id);
        }
      }
    }
  }

  uint32_t n = static_cast<uint32_t>(order.size());
  g.root_ = 0;
  g.rule_names_.resize(n);
  g.prod_begin_.assign(n + 1, 0);
  for (uint32_t r = 0; r < n; ++r) {
    g.rule_names_[r] = names_[order[r]];
    g.prod_begin_[r + 1] = g.prod_begin_[r] + static_cast<uint32_t>(by_lhs[order[r]].size());
  }
  for (uint32_t r = 0; r < n; ++r) {
    for (uint32_t pi : by_lhs[order[r]]) {
      g.prod_cores_.push_back(g.num_cores());
      for (const auto& s : productions_[pi].rhs) {
        if (s.terminal) {
          g.core_kind_.push_back(CoreKind::kTerminal);
          g.core_symbol_.push_back(static_cast<uint32_t>(new_term[s.id]));
        } else {
          g.core_kind_.push_back(CoreKind::kRule);
          g.core_symbol_.push_back(static_cast<uint32_t>(new_rule[s.id]));
        }
      }
      g.core_kind_.push_back(CoreKind::kEnd);
      g.core_symbol_.push_back(r);
    }
  }
  g.index_rule_sites();
  g.find_nullable_rules();
  return g;
}

// For each rule, the cores that refer to it (the sites a completed rule advances).
void Grammar::index_rule_sites() {
  const uint32_t n = num_rules();
  std::vector<uint32_t> site_count(n, 0);
  for (uint32_t c = 0; c < num_cores(); ++c) {
    if (core_kind_[c] == CoreKind::kRule) ++site_count[core_symbol_[c]];
  }
  site_begin_.assign(n + 1, 0);
  for (uint32_t r = 0; r < n; ++r) site_begin_[r + 1] = site_begin_[r] + site_count[r];
  site_cores_.resize(site_begin_[n]);
  std::vector<uint32_t> fill(site_begin_.begin(), site_begin_.end() - 1);
  for (uint32_t c = 0; c < num_cores(); ++c) {
    if (core_kind_[c] == CoreKind::kRule) site_cores_[fill[core_symbol_[c]]++] = c;
  }
}

// Rules that derive the empty string, by fixpoint over the flattened productions.
void Grammar::find_nullable_rules() {
  const uint32_t n = num_rules();
  nullable_.assign(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < n; ++r) {
      if (nullable_[r]) continue;
      for (uint32_t c : productions(r)) {
        while (core_kind_[c] == CoreKind::kRule && nullable_[core_symbol_[c]]) ++c;
        if (core_kind_[c] == CoreKind::kEnd) {
          nullable_[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
}

std::string Grammar::to_string() const {
  std::string out;
  for (uint32_t r = 0; r < num_rules(); ++r) {
    for (uint32_t c : productions(r)) {
      out += fmt::format("{} ::=", rule_name(r));
      for (; core_kind_[c] != CoreKind::kEnd; ++c) {
        if (core_kind_[c] == CoreKind::kRule) {
          out += " " + rule_name(core_symbol_[c]);
        } else {
          out += fmt::format(" t{}", core_symbol_[c]);
        }
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace deepinfer::grammar
