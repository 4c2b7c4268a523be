// Counted repetitions of a unit rule (", element" or ", key: value") without one rule per count:
// unit^(2^j) rules doubled from the unit, a count written as its binary digits, and unit{0, m} as
// choices between such powers. The grammars are unambiguous and use O(log m) rules; Earley sets
// hold O(log^2 m) items, so bounds up to 2^63 cost little.
#include "grammar/json_schema_lowering.h"

#include <fmt/format.h>

#include <bit>

namespace deepinfer::grammar {

uint32_t SchemaLowering::power_rule(uint32_t unit, int j) {
  Repeats& r = repeats_[unit];
  while (static_cast<int>(r.power.size()) <= j) {
    if (r.power.empty()) {
      r.power.push_back(unit);
      continue;
    }
    uint32_t half = r.power.back();
    uint32_t rule = builder_.add_rule(fmt::format("{}^{}", builder_.rule_name(unit), uint64_t{1} << r.power.size()));
    builder_.add_production(rule, {Symbol::rule(half), Symbol::rule(half)});
    r.power.push_back(rule);
  }
  return r.power[static_cast<size_t>(j)];
}

std::vector<Symbol> SchemaLowering::exactly(uint32_t unit, uint64_t count) {
  std::vector<Symbol> out;
  for (int j = 63; j >= 0; --j) {
    if ((count >> j) & 1) out.push_back(Symbol::rule(power_rule(unit, j)));
  }
  return out;
}

uint32_t SchemaLowering::up_to_rule(uint32_t unit, uint64_t max) {
  Repeats& r = repeats_[unit];
  auto it = r.up_to.find(max);
  if (it != r.up_to.end()) return it->second;
  uint32_t rule = builder_.add_rule(fmt::format("{}{{0,{}}}", builder_.rule_name(unit), max));
  r.up_to.emplace(max, rule);
  if (max == 0) {
    builder_.add_production(rule, {});
    return rule;
  }
  // 2^j - 1 <= max < 2^(j+1) - 1: counts below 2^j are optional powers 2^(j-1) ... 1, each taken
  // or not; counts from 2^j on are 2^j followed by up to max - 2^j more.
  int j = std::bit_width(max + 1) - 1;
  std::vector<Symbol> digits;
  for (int i = j - 1; i >= 0; --i) digits.push_back(Symbol::rule(optional_power_rule(unit, i)));
  builder_.add_production(rule, std::move(digits));
  uint64_t high = uint64_t{1} << j;
  if (max >= high) {
    std::vector<Symbol> rest{Symbol::rule(power_rule(unit, j))};
    if (max > high) rest.push_back(Symbol::rule(up_to_rule(unit, max - high)));
    builder_.add_production(rule, std::move(rest));
  }
  return rule;
}

uint32_t SchemaLowering::optional_power_rule(uint32_t unit, int j) {
  Repeats& r = repeats_[unit];
  auto it = r.optional_power.find(j);
  if (it != r.optional_power.end()) return it->second;
  uint32_t rule = builder_.add_rule(fmt::format("{}^{}?", builder_.rule_name(unit), uint64_t{1} << j));
  builder_.add_production(rule, {Symbol::rule(power_rule(unit, j))});
  builder_.add_production(rule, {});
  repeats_[unit].optional_power.emplace(j, rule);
  return rule;
}

uint32_t SchemaLowering::star_rule(uint32_t unit) {
  Repeats& r = repeats_[unit];
  if (r.star != UINT32_MAX) return r.star;
  // Left-recursive: a long repetition completes one item per unit, not a chain at its end.
  uint32_t rule = builder_.add_rule(fmt::format("{}*", builder_.rule_name(unit)));
  builder_.add_production(rule, {Symbol::rule(rule), Symbol::rule(unit)});
  builder_.add_production(rule, {});
  repeats_[unit].star = rule;
  return rule;
}

std::vector<Symbol> SchemaLowering::repeated(uint32_t unit, uint64_t min, uint64_t max) {
  std::vector<Symbol> out = exactly(unit, min);
  if (max == UINT64_MAX) {
    out.push_back(Symbol::rule(star_rule(unit)));
  } else if (max > min) {
    out.push_back(Symbol::rule(up_to_rule(unit, max - min)));
  }
  return out;
}

}  // namespace deepinfer::grammar
