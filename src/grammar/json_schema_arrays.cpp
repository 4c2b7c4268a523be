#include "grammar/json_schema_lowering.h"

#include "grammar/json_lexemes.h"

#include <fmt/format.h>

#include <algorithm>

namespace deepinfer::grammar {
namespace {

// Positions lowered as their own rules (each prefixItems position, and counts up to this); the
// elements past them repeat a unit rule (json_schema_repeat.cpp).
constexpr uint64_t kExplicitPositions = 64;
constexpr uint64_t kMaxPrefixItems = 4096;
constexpr uint64_t kMaxCountingRules = 100000;
// uniqueItems tracks the set of values used: at most this many distinct item values.
constexpr size_t kMaxUniqueValues = 12;

}  // namespace

// item(k, c) ::= value(k) after(k+1, c) | value(k) & contains after(k+1, c+1)
// after(k, c) ::= "," item(k, c) | "]" (when k and c are enough)
// for positions k < n, c counting the elements made to match `contains` up to minContains. Past
// position n, elements repeat ", value" units: any number (left-recursive), or a bounded count
// through binary powers. A bounded tail only continues arrays whose `contains` count was reached
// within the first n (at least 64) elements: a sound subset, exact for all but arrays longer than
// 64 with maxItems above 64 whose matching elements all come late.
Result<void> SchemaLowering::lower_array(uint32_t rule, const Merged& m, const std::string& where) {
  if (m.min_items > m.max_items) return ok();
  if (m.unique_items) return lower_unique_array(rule, m, where);
  if (m.contains.size() > 1) {
    return make_error(Code::kGrammar, "json schema: more than one 'contains' on one array is not supported (at {})", where);
  }
  const uint64_t need = m.contains.empty() ? 0 : m.contains[0].second;
  const uint64_t prefix = m.prefix.size();
  if (prefix > kMaxPrefixItems) {
    return make_error(Code::kGrammar, "json schema: more than {} prefixItems are not supported (at {})", kMaxPrefixItems, where);
  }
  const uint64_t min = m.min_items, max = m.max_items;
  const bool tail = max > std::max(prefix, kExplicitPositions);
  // With `contains` and a bounded tail, the count must be reached within the explicit positions:
  // give it all of them.
  const uint64_t explicit_min = need > 0 && max != UINT64_MAX ? kExplicitPositions : std::min(min, kExplicitPositions);
  const uint64_t n = tail ? std::max({prefix, explicit_min, need, uint64_t{1}}) : max;
  if ((n + 1) * (need + 1) > kMaxCountingRules) {
    return make_error(Code::kGrammar, "json schema: minContains or prefixItems too large for this array (at {})", where);
  }
  if (min == 0 && need == 0) builder_.add_production(rule, {Symbol::term(arr_empty_)});
  if (max == 0) return ok();
  auto elem = [&](uint64_t k, bool matching) -> Result<uint32_t> {
    std::vector<SchemaId> ids = k < prefix ? m.prefix[k] : m.items;
    if (matching) ids.push_back(m.contains[0].first);
    return lower_ids(ids);
  };
  auto idx = [&](uint64_t k, uint64_t c) { return k * (need + 1) + c; };
  std::vector<uint32_t> item(n * (need + 1)), after((n + 1) * (need + 1));
  for (uint64_t k = 0; k <= n; ++k) {
    for (uint64_t c = 0; c <= need; ++c) {
      if (k < n) item[idx(k, c)] = builder_.add_rule(fmt::format("{}/item{}.{}", where, k, c));
      after[idx(k, c)] = builder_.add_rule(fmt::format("{}/after{}.{}", where, k, c));
    }
  }
  for (uint64_t k = 0; k < n; ++k) {
    DI_TRY(plain, elem(k, false));
    std::optional<uint32_t> matching;
    if (need > 0) {
      DI_TRY(v, elem(k, true));
      matching = v;
    }
    for (uint64_t c = 0; c <= need; ++c) {
      builder_.add_production(item[idx(k, c)], {Symbol::rule(plain), Symbol::rule(after[idx(k + 1, c)])});
      if (matching) builder_.add_production(item[idx(k, c)], {Symbol::rule(*matching), Symbol::rule(after[idx(k + 1, std::min(c + 1, need))])});
    }
  }
  for (uint64_t k = 1; k <= n; ++k) {
    for (uint64_t c = 0; c <= need; ++c) {
      if (k < n) builder_.add_production(after[idx(k, c)], {Symbol::term(comma_), Symbol::rule(item[idx(k, c)])});
      if (k >= min && c == need) builder_.add_production(after[idx(k, c)], {Symbol::term(arr_close_)});
    }
  }
  if (tail) {
    auto unit = [&](bool matching) -> Result<uint32_t> {
      DI_TRY(value, elem(n, matching));
      uint32_t u = builder_.add_rule(fmt::format("{}/{}", where, matching ? "match" : "more"));
      builder_.add_production(u, {Symbol::term(comma_), Symbol::rule(value)});
      return u;
    };
    DI_TRY(more, unit(false));
    const uint64_t lo = min > n ? min - n : 0;
    const uint64_t hi = max == UINT64_MAX ? UINT64_MAX : max - n;
    if (need > 0 && max == UINT64_MAX && lo == 0) {
      // Any number of elements, at least need - c of them matching: x(j) = (more* match){j} more*,
      // left-recursive.
      DI_TRY(match, unit(true));
      std::vector<uint32_t> x(need + 1);
      for (uint64_t j = 0; j <= need; ++j) {
        x[j] = builder_.add_rule(fmt::format("{}/tail{}", where, j));
        builder_.add_production(x[j], {Symbol::rule(x[j]), Symbol::rule(more)});
        builder_.add_production(x[j], j == 0 ? std::vector<Symbol>{} : std::vector<Symbol>{Symbol::rule(x[j - 1]), Symbol::rule(match)});
      }
      for (uint64_t c = 0; c <= need; ++c) {
        builder_.add_production(after[idx(n, c)], {Symbol::rule(x[need - c]), Symbol::term(arr_close_)});
      }
    } else {
      std::vector<Symbol> rest = repeated(more, std::max<uint64_t>(lo, 1), hi);
      rest.push_back(Symbol::term(arr_close_));
      builder_.add_production(after[idx(n, need)], std::move(rest));
    }
  }
  builder_.add_production(rule, {Symbol::term(arr_open_), Symbol::rule(item[idx(0, 0)])});
  return ok();
}

// uniqueItems, exact when the items are a few enumerated scalars: the state is the set of values
// used so far, and each next element is one of the others. after(S) ::= "," item(S) | "]";
// item(S) ::= value(v) after(S + v) for v not in S.
Result<void> SchemaLowering::lower_unique_array(uint32_t rule, const Merged& m, const std::string& where) {
  auto unsupported = [&] {
    return make_error(Code::kGrammar,
                      "json schema: uniqueItems is supported for arrays whose items are at most {} enumerated scalars (no prefixItems or "
                      "contains) (at {})",
                      kMaxUniqueValues, where);
  };
  if (!m.prefix.empty() || !m.contains.empty()) return unsupported();
  Conj c;
  for (SchemaId id : m.items) insert_sorted(c.members, id);
  Flat f = algebra_.flatten(c);
  if (!f.open_groups.empty()) return unsupported();
  DI_TRY(items, algebra_.merge(f.members));
  std::vector<Json> candidates;
  if (f.is_false) {
    // no item: only the empty array
  } else if (items.enum_values) {
    candidates = *items.enum_values;
  } else if (!(items.types & ~(kTypeNull | kTypeBoolean))) {
    candidates = {Json(nullptr), Json(true), Json(false)};
  } else {
    return unsupported();
  }
  std::vector<Json> values;
  for (const auto& v : candidates) {
    if (v.is_structured()) return unsupported();
    bool all = true;
    for (SchemaId id : f.members) {
      DI_TRY(r, validator_.valid(id, v));
      all = all && r;
    }
    bool fresh = std::none_of(values.begin(), values.end(), [&](const Json& x) { return json_equal(x, v); });
    if (all && fresh) values.push_back(v);
  }
  if (values.size() > kMaxUniqueValues) return unsupported();
  const size_t k = values.size();
  const uint64_t max = std::min<uint64_t>(m.max_items, k);
  if (m.min_items > max) return ok();
  if (m.min_items == 0) builder_.add_production(rule, {Symbol::term(arr_empty_)});
  if (max == 0) return ok();
  std::vector<uint32_t> value(k);
  for (size_t i = 0; i < k; ++i) {
    DI_TRY(t, terminal(json_value_regex(values[i], ws_)));
    value[i] = t;
  }
  const size_t states = size_t{1} << k;
  std::vector<uint32_t> item(states), after(states);
  for (size_t used = 0; used < states; ++used) {
    item[used] = builder_.add_rule(fmt::format("{}/unique{}", where, used));
    after[used] = builder_.add_rule(fmt::format("{}/unique_after{}", where, used));
  }
  for (size_t used = 0; used < states; ++used) {
    auto count = static_cast<uint64_t>(__builtin_popcountll(used));
    for (size_t i = 0; i < k; ++i) {
      if (!((used >> i) & 1)) builder_.add_production(item[used], {Symbol::term(value[i]), Symbol::rule(after[used | (size_t{1} << i)])});
    }
    if (count > 0 && count < max) builder_.add_production(after[used], {Symbol::term(comma_), Symbol::rule(item[used])});
    if (count >= m.min_items && count > 0) builder_.add_production(after[used], {Symbol::term(arr_close_)});
  }
  builder_.add_production(rule, {Symbol::term(arr_open_), Symbol::rule(item[0])});
  return ok();
}

}  // namespace deepinfer::grammar
