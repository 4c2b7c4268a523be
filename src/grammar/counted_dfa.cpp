#include "grammar/counted_dfa.h"

#include "grammar/compile_budget.h"
#include "grammar/residual_keys.h"

#include <algorithm>
#include <unordered_map>

namespace deepinfer::grammar {
namespace {

// The span of the tabulated counts (preperiod + period) and its size in entries are bounded: a
// pattern whose lengths cycle with a longer period is refused.
constexpr uint32_t kMaxSpan = 4096;
constexpr size_t kMaxTableEntries = size_t{1} << 24;
constexpr uint32_t kMaxProductStates = 200000;

// Code point starts in a quoted JSON string, byte by byte. States: before the opening quote, at a
// character boundary, after '\', in \uXXXX, in the high half of a surrogate pair, in the low half
// (whose '\' starts no code point), after the closing quote, and a sink for bytes the string
// automaton refuses anyway.
enum T : uint8_t { kOpen, kBody, kEscape, kU0, kU1, kU2, kU3, kUD1, kH2, kH3, kH4, kEscape2, kV0, kV1, kV2, kV3, kClosed, kSink, kNumT };

bool hex(uint8_t b) { return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

// (next state, starts a code point)
std::pair<T, bool> step(T t, uint8_t b) {
  switch (t) {
    case kOpen: return {b == '"' ? kBody : kSink, false};
    case kBody:
      if (b == '"') return {kClosed, false};
      if (b == '\\') return {kEscape, true};
      return {kBody, b < 0x80 || b >= 0xC0};  // continuation bytes start nothing
    case kEscape: return {b == 'u' ? kU0 : kBody, false};
    case kU0:
      if (b == 'd' || b == 'D') return {kUD1, false};
      return {hex(b) ? kU1 : kSink, false};
    case kUD1:
      if (b == '8' || b == '9' || b == 'a' || b == 'b' || b == 'A' || b == 'B') return {kH2, false};
      return {hex(b) ? kU2 : kSink, false};
    case kU1: return {hex(b) ? kU2 : kSink, false};
    case kU2: return {hex(b) ? kU3 : kSink, false};
    case kU3: return {hex(b) ? kBody : kSink, false};
    case kH2: return {hex(b) ? kH3 : kSink, false};
    case kH3: return {hex(b) ? kH4 : kSink, false};
    case kH4: return {b == '\\' ? kEscape2 : kSink, false};
    case kEscape2: return {b == 'u' ? kV0 : kSink, false};
    case kV0: return {hex(b) ? kV1 : kSink, false};
    case kV1: return {hex(b) ? kV2 : kSink, false};
    case kV2: return {hex(b) ? kV3 : kSink, false};
    case kV3: return {hex(b) ? kBody : kSink, false};
    default: return {kSink, false};
  }
}

inline uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

}  // namespace

Result<std::shared_ptr<const CountedDfa>> CountedDfa::create(const Dfa& quoted, uint32_t min, uint32_t max) {
  auto out = std::make_shared<CountedDfa>();
  out->min_ = min;
  out->max_ = max;
  DI_TRYV(out->build_product(quoted));
  DI_TRYV(out->tabulate_counts());
  out->fingerprint_ = {mix(mix(quoted.fingerprint().a, min), max), mix(mix(quoted.fingerprint().b, max), min + 0x51ed27)};
  return std::shared_ptr<const CountedDfa>(std::move(out));
}

Result<void> CountedDfa::build_product(const Dfa& quoted) {
  CountedDfa& c = *this;
  // Byte classes: bytes the string DFA and the transducer both treat alike.
  {
    std::unordered_map<uint64_t, uint8_t> ids;
    for (int b = 0; b < 256; ++b) {
      uint64_t key = quoted.byte_classes()[b];
      for (int t = 0; t < kNumT; ++t) {
        auto [next, starts] = step(static_cast<T>(t), static_cast<uint8_t>(b));
        key = mix(key, static_cast<uint64_t>(next) * 2 + starts);
      }
      auto [it, fresh] = ids.emplace(key, static_cast<uint8_t>(ids.size()));
      c.byte_class_[static_cast<size_t>(b)] = it->second;
    }
    c.num_classes_ = static_cast<uint32_t>(ids.size());
  }
  std::vector<uint8_t> rep(c.num_classes_);
  for (int b = 255; b >= 0; --b) rep[c.byte_class_[static_cast<size_t>(b)]] = static_cast<uint8_t>(b);

  // Product states (string state, transducer state), breadth first; 0 is dead.
  std::unordered_map<uint64_t, uint32_t> ids;
  std::vector<std::pair<uint32_t, T>> pairs{{Dfa::kDead, kSink}};
  c.accepting_.push_back(0);
  auto intern = [&](uint32_t d, T t) -> Result<uint32_t> {
    if (d == Dfa::kDead || t == kSink) return uint32_t{kDead};
    uint64_t key = static_cast<uint64_t>(d) * kNumT + t;
    auto it = ids.find(key);
    if (it != ids.end()) return it->second;
    if (pairs.size() >= kMaxProductStates) return make_error(Code::kGrammar, "string constraints too complex to count (more than {} states)", kMaxProductStates);
    auto id = static_cast<uint32_t>(pairs.size());
    ids.emplace(key, id);
    pairs.push_back({d, t});
    c.accepting_.push_back(quoted.accepting(d) ? 1 : 0);
    return id;
  };
  DI_TRY(start, intern(quoted.start(), kOpen));
  c.start_ = start;
  for (uint32_t i = 1; i < pairs.size(); ++i) {
    DI_TRYV(CompileBudget::spend(c.num_classes_));
    auto [d, t] = pairs[i];
    c.table_.resize(pairs.size() * c.num_classes_, 0);
    for (uint32_t k = 0; k < c.num_classes_; ++k) {
      auto [nt, starts] = step(t, rep[k]);
      DI_TRY(target, intern(quoted.next(d, rep[k]), nt));
      if (target == kDead) continue;
      c.table_[static_cast<size_t>(i) * c.num_classes_ + k] = target | (starts ? kCountBit : 0) | (c.accepting_[target] ? kAcceptBit : 0);
    }
  }
  c.table_.resize(pairs.size() * c.num_classes_, 0);
  c.string_state_.resize(pairs.size());
  for (uint32_t i = 0; i < pairs.size(); ++i) c.string_state_[i] = pairs[i].first;
  return ok();
}

Result<void> CountedDfa::tabulate_counts() {
  CountedDfa& c = *this;
  const auto n = static_cast<uint32_t>(c.accepting_.size());

  // Reverse edges, split by whether they count.
  std::vector<std::vector<uint32_t>> pred0(n), pred1(n);
  for (uint32_t s = 1; s < n; ++s) {
    for (uint32_t k = 0; k < c.num_classes_; ++k) {
      uint32_t e = c.table_[static_cast<size_t>(s) * c.num_classes_ + k];
      uint32_t t = e & kStateMask;
      if (t == kDead) continue;
      auto& list = (e & kCountBit) ? pred1[t] : pred0[t];
      if (list.empty() || list.back() != s) list.push_back(s);
    }
  }
  // A_j = the states from which some completion counts exactly j more code points:
  // A_0 = states reaching acceptance without counting, A_{j+1} = those reaching A_j through one
  // counting edge and then none. The sequence of sets repeats: preperiod, then period.
  const size_t words = (n + 63) / 64;
  auto close0 = [&](std::vector<uint64_t> set) {
    std::vector<uint32_t> stack;
    for (uint32_t s = 0; s < n; ++s) {
      if ((set[s / 64] >> (s % 64)) & 1) stack.push_back(s);
    }
    while (!stack.empty()) {
      uint32_t s = stack.back();
      stack.pop_back();
      for (uint32_t p : pred0[s]) {
        if (!((set[p / 64] >> (p % 64)) & 1)) {
          set[p / 64] |= uint64_t{1} << (p % 64);
          stack.push_back(p);
        }
      }
    }
    return set;
  };
  std::vector<std::vector<uint64_t>> sets;
  std::unordered_map<uint64_t, std::vector<uint32_t>> seen;  // hash -> indices
  std::vector<uint64_t> a(words, 0);
  for (uint32_t s = 1; s < n; ++s) {
    if (c.accepting_[s]) a[s / 64] |= uint64_t{1} << (s % 64);
  }
  a = close0(std::move(a));
  while (true) {
    uint64_t h = 0x243f6a8885a308d3ull;
    for (uint64_t w : a) h = mix(h, w);
    auto& same = seen[h];
    auto repeat = std::find_if(same.begin(), same.end(), [&](uint32_t i) { return sets[i] == a; });
    if (repeat != same.end()) {
      c.preperiod_ = *repeat;
      c.period_ = static_cast<uint32_t>(sets.size()) - *repeat;
      break;
    }
    if (sets.size() >= kMaxSpan || (sets.size() + 1) * n > kMaxTableEntries) {
      return make_error(Code::kGrammar, "the lengths this pattern allows do not repeat within {} code points: length bounds cannot be counted",
                        kMaxSpan);
    }
    DI_TRYV(CompileBudget::spend(n + words));
    same.push_back(static_cast<uint32_t>(sets.size()));
    sets.push_back(a);
    std::vector<uint64_t> b(words, 0);
    for (uint32_t s = 1; s < n; ++s) {
      if (!((a[s / 64] >> (s % 64)) & 1)) continue;
      for (uint32_t p : pred1[s]) b[p / 64] |= uint64_t{1} << (p % 64);
    }
    a = close0(std::move(b));
  }
  const uint32_t span = c.preperiod_ + c.period_;
  c.next_.assign(static_cast<size_t>(n) * span, UINT32_MAX);
  auto member = [&](uint32_t s, uint32_t j) { return (sets[j][s / 64] >> (s % 64)) & 1; };
  for (uint32_t s = 1; s < n; ++s) {
    uint32_t* row = c.next_.data() + static_cast<size_t>(s) * span;
    uint32_t first = UINT32_MAX;
    for (uint32_t j = c.preperiod_; j < span && first == UINT32_MAX; ++j) {
      if (member(s, j)) first = j;
    }
    uint32_t carry = first == UINT32_MAX ? UINT32_MAX : first + c.period_;
    for (uint32_t j = span; j-- > c.preperiod_;) {
      if (member(s, j)) carry = j;
      row[j] = carry;
    }
    carry = c.preperiod_ < span ? row[c.preperiod_] : UINT32_MAX;
    for (uint32_t j = c.preperiod_; j-- > 0;) {
      if (member(s, j)) carry = j;
      row[j] = carry;
    }
  }
  c.cofinite_.assign(n, 0);
  c.least_.assign(n, 0);
  for (uint32_t s = 1; s < n; ++s) {
    const uint32_t* row = c.next_.data() + static_cast<size_t>(s) * span;
    uint32_t least = row[0];
    bool all = least != UINT32_MAX;
    for (uint32_t j = 0; j < span && all; ++j) all = row[j] == std::max(j, least);
    // Every count from `least` through the period's span, with the whole period in it: the set
    // is [least, infinity).
    all = all && least <= c.preperiod_;
    c.cofinite_[s] = all ? 1 : 0;
    c.least_[s] = least;
    // A closed string (accepting, every byte refused) completes with count 0 alone.
    bool closed = c.accepting_[s] != 0;
    for (uint32_t k = 0; k < c.num_classes_ && closed; ++k) closed = (c.table_[size_t{s} * c.num_classes_ + k] & kStateMask) == kDead;
    c.cofinite_or_closed_ = c.cofinite_or_closed_ && (all || closed);
    if (all) c.max_least_ = std::max(c.max_least_, least);
  }
  return ok();
}

uint64_t CountedDfa::next_member(uint32_t state, uint64_t x) const {
  const uint32_t span = preperiod_ + period_;
  uint64_t shift = 0;
  if (x >= span) {
    uint64_t r = preperiod_ + (x - preperiod_) % period_;
    shift = x - r;
    x = r;
  }
  uint32_t v = next_[static_cast<size_t>(state) * span + x];
  return v == UINT32_MAX ? kNever : v + shift;
}

bool CountedDfa::window_alive(uint32_t state, uint64_t lo, uint64_t hi) const {
  if (state == kDead) return false;
  uint64_t v = cofinite_[state] ? std::max<uint64_t>(lo, least_[state]) : next_member(state, lo);
  return v != kNever && v <= hi;
}

bool CountedDfa::alive(uint32_t state, uint32_t count) const {
  if (max_ != kUnbounded && count > max_) return false;
  uint64_t lo = count < min_ ? min_ - count : 0;
  uint64_t hi = max_ == kUnbounded ? kNever : max_ - count;
  return window_alive(state, lo, hi);
}

CountedDfa::Window CountedDfa::window(uint32_t count, uint32_t depth) const {
  uint64_t lo = count < min_ ? min_ - count : 0;
  uint64_t hi = max_ == kUnbounded ? kNever : (count <= max_ ? max_ - count : 0);
  return canonical(lo, hi, depth);
}

CountedDfa::Window CountedDfa::canonical(uint64_t lo, uint64_t hi, uint32_t depth) const {
  // Within `depth` counts of a token the lengths left are periodic once lo - depth passes the
  // preperiod: shift by whole periods. A maximum beyond every member reachable from the shifted
  // lo decides nothing: clamp it.
  const uint64_t a = uint64_t{depth} + preperiod_ + 1;
  if (lo >= a + period_) {
    uint64_t shifted = a + (lo - a) % period_;
    if (hi != kNever) hi -= lo - shifted;
    lo = shifted;
  }
  const uint64_t cap = 2 * uint64_t{depth} + preperiod_ + 2 * uint64_t{period_} + 2;
  return {static_cast<uint32_t>(lo), static_cast<uint32_t>(std::min(hi, cap))};
}

bool CountedDfa::alive_in(uint32_t state, uint32_t k, const Window& w) const {
  if (k > w.hi) return false;
  return window_alive(state, w.lo > k ? w.lo - k : 0, w.hi - k);
}

std::vector<uint32_t> CountedDfa::bounded_classes(uint32_t depth) const {
  // Round 0: dead, accepting, and the counts that can still complete (what alive_in reads).
  const auto n = static_cast<uint32_t>(accepting_.size());
  const uint32_t span = preperiod_ + period_;
  auto row = [&](uint32_t s) { return next_.data() + size_t{s} * span; };
  auto same = [&](uint32_t a, uint32_t b) {
    if ((a == kDead) != (b == kDead) || accepting_[a] != accepting_[b] || cofinite_[a] != cofinite_[b]) return false;
    return cofinite_[a] ? least_[a] == least_[b] : std::equal(row(a), row(a) + span, row(b));
  };
  std::vector<uint64_t> sig(n);
  std::vector<uint32_t> order(n), cls(n), reps;
  for (uint32_t s = 0; s < n; ++s) {
    uint64_t h = hash_mix(hash_mix(0x6a09e667f3bcc909ull, s == kDead), accepting_[s] * 2 + cofinite_[s]);
    if (cofinite_[s]) {
      h = hash_mix(h, least_[s]);
    } else {
      for (uint32_t j = 0; j < span; ++j) h = hash_mix(h, row(s)[j]);
    }
    sig[s] = h;
    order[s] = s;
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return sig[a] != sig[b] ? sig[a] < sig[b] : a < b; });
  uint32_t classes = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t s = order[i];
    if (i == 0 || sig[order[i - 1]] != sig[s]) reps.clear();
    auto it = std::find_if(reps.begin(), reps.end(), [&](uint32_t r) { return same(r, s); });
    if (it != reps.end()) {
      cls[s] = cls[*it];
    } else {
      cls[s] = classes++;
      reps.push_back(s);
    }
  }
  return refine_classes(std::move(cls), table_.data(), num_classes_, kStateMask, depth);
}

}  // namespace deepinfer::grammar
