#include "grammar/earley_chart.h"

#include <algorithm>

namespace deepinfer::grammar {
namespace {

// Sets larger than this index their waiting items for completion.
constexpr size_t kIndexedSetSize = 48;

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

inline uint64_t item_key(uint32_t core, uint32_t origin, uint32_t state, uint32_t flags, uint32_t count) {
  return mix64((static_cast<uint64_t>(core) << 32 | origin) ^ mix64((static_cast<uint64_t>(state) << 1 | flags) + (uint64_t{count} << 40)));
}

}  // namespace

EarleyChart::EarleyChart(const Grammar& grammar) : g_(grammar) {
  core_dfa_.assign(g_.num_cores(), nullptr);
  core_counted_.assign(g_.num_cores(), nullptr);
  for (uint32_t c = 0; c < g_.num_cores(); ++c) {
    if (g_.core_kind(c) != CoreKind::kTerminal) continue;
    core_dfa_[c] = &g_.terminal(g_.core_symbol(c));
    core_counted_[c] = g_.counted(g_.core_symbol(c)).get();
  }
  slot_item_.assign(64, 0);
  slot_stamp_.assign(64, 0);
}

void EarleyChart::begin_set() {
  building_begin_ = static_cast<uint32_t>(items_.size());
  ++stamp_;
  if (stamp_ == 0) {  // wrapped: clear stale stamps
    std::fill(slot_stamp_.begin(), slot_stamp_.end(), 0);
    stamp_ = 1;
  }
}

void EarleyChart::add(uint32_t core, uint32_t origin, uint32_t state, uint32_t flags, uint32_t count) {
  size_t mask = slot_item_.size() - 1;
  size_t h = item_key(core, origin, state, flags, count) & mask;
  while (slot_stamp_[h] == stamp_) {
    const EarleyItem& it = items_[slot_item_[h]];
    if (it.core == core && it.origin == origin && it.state == state && it.flags == flags && it.count == count) return;
    h = (h + 1) & mask;
  }
  if (items_.size() - building_begin_ >= kMaxItemsPerSet) {
    overflowed_ = true;
    return;
  }
  slot_stamp_[h] = stamp_;
  slot_item_[h] = static_cast<uint32_t>(items_.size());
  items_.push_back({core, origin, state, flags, count});
  size_t size = items_.size() - building_begin_;
  if (size * 2 > slot_item_.size()) {  // grow and rehash the set being built
    size_t n = slot_item_.size() * 2;
    slot_item_.assign(n, 0);
    slot_stamp_.assign(n, 0);
    ++stamp_;
    for (uint32_t i = building_begin_; i < items_.size(); ++i) {
      const EarleyItem& it = items_[i];
      size_t k = item_key(it.core, it.origin, it.state, it.flags, it.count) & (n - 1);
      while (slot_stamp_[k] == stamp_) k = (k + 1) & (n - 1);
      slot_stamp_[k] = stamp_;
      slot_item_[k] = i;
    }
  }
}

void EarleyChart::add_at(uint32_t core, uint32_t origin, uint32_t flags) {
  const Dfa* d = core_dfa_[core];
  if (const CountedDfa* cd = core_counted_[core]) {
    add(core, origin, cd->start(), flags);
    return;
  }
  add(core, origin, d ? d->start() : 0, flags);
}

void EarleyChart::ascend(uint32_t rule, uint32_t flags) {
  auto sites = g_.parent_sites(rule);
  bool top = rule == g_.root();
  if (sites.size() == 1 && !top) {
    add_at(sites[0] + 1, kContextOrigin, flags);
    return;
  }
  for (uint32_t site : sites) add_at(site + 1, kContextOrigin, flags | kSpeculative);
}

void EarleyChart::complete(const EarleyItem& item, uint32_t current) {
  uint32_t rule = g_.core_symbol(item.core);
  if (item.origin == kContextOrigin) {
    ascend(rule, item.flags);
    return;
  }
  if (item.origin == current) return;  // empty completion: handled when the rule was predicted
  uint32_t wb = wait_begin_[item.origin], we = wait_begin_[item.origin + 1];
  if (wb != we) {
    auto first = std::lower_bound(waits_.begin() + wb, waits_.begin() + we, std::make_pair(rule, 0u));
    for (auto it = first; it != waits_.begin() + we && it->first == rule; ++it) {
      const EarleyItem w = items_[it->second];
      add_at(w.core + 1, w.origin, w.flags);
    }
    return;
  }
  uint32_t begin = set_begin_[item.origin], end = set_begin_[item.origin + 1];
  for (uint32_t i = begin; i < end; ++i) {
    const EarleyItem w = items_[i];
    if (g_.core_kind(w.core) == CoreKind::kRule && g_.core_symbol(w.core) == rule) add_at(w.core + 1, w.origin, w.flags);
  }
}

void EarleyChart::close_set() {
  uint32_t current = static_cast<uint32_t>(set_begin_.size() - 1);
  for (uint32_t i = building_begin_; i < items_.size(); ++i) {
    const EarleyItem it = items_[i];
    switch (g_.core_kind(it.core)) {
      case CoreKind::kTerminal: break;
      case CoreKind::kRule: {
        uint32_t rule = g_.core_symbol(it.core);
        for (uint32_t p : g_.productions(rule)) add_at(p, current, it.flags);
        if (g_.nullable(rule)) add_at(it.core + 1, it.origin, it.flags);
        break;
      }
      case CoreKind::kEnd: complete(it, current); break;
    }
  }
}

void EarleyChart::end_set() {
  uint32_t current = static_cast<uint32_t>(set_begin_.size() - 1);
  ChartSignature sig{0x9e3779b97f4a7c15ull, 0x632be59bd9b4e019ull};
  if (!context_free_) {
    for (uint32_t i = building_begin_; i < items_.size(); ++i) {
      const EarleyItem& it = items_[i];
      ChartSignature o = it.origin == current ? ChartSignature{1, 2} : signatures_[it.origin];
      uint64_t base = (static_cast<uint64_t>(it.core) << 32) ^ (static_cast<uint64_t>(it.state) << 1) ^ it.flags ^ mix64(it.count);
      sig.a += mix64(base ^ mix64(o.a));
      sig.b += mix64(mix64(base + 0x5851f42d4c957f2dull) ^ o.b);
    }
  }
  set_begin_.push_back(static_cast<uint32_t>(items_.size()));
  signatures_.push_back(sig);
  if (items_.size() - building_begin_ > kIndexedSetSize) {
    size_t first = waits_.size();
    for (uint32_t i = building_begin_; i < items_.size(); ++i) {
      if (g_.core_kind(items_[i].core) == CoreKind::kRule) waits_.push_back({g_.core_symbol(items_[i].core), i});
    }
    std::sort(waits_.begin() + static_cast<std::ptrdiff_t>(first), waits_.end());
  }
  wait_begin_.push_back(static_cast<uint32_t>(waits_.size()));
}

void EarleyChart::start_full() {
  context_free_ = false;
  items_.clear();
  set_begin_.assign(1, 0);
  signatures_.clear();
  waits_.clear();
  wait_begin_.assign(1, 0);
  begin_set();
  for (uint32_t p : g_.productions(g_.root())) add_at(p, 0, 0);
  close_set();
  end_set();
}

void EarleyChart::start_context_free(uint32_t core) {
  context_free_ = true;
  items_.clear();
  set_begin_.assign(1, 0);
  signatures_.clear();
  waits_.clear();
  wait_begin_.assign(1, 0);
  begin_set();
  add_at(core, kContextOrigin, 0);
  close_set();
  end_set();
}

bool EarleyChart::push_byte(uint8_t byte) {
  uint32_t prev_begin = set_begin_[num_sets() - 1], prev_end = set_begin_[num_sets()];
  overflowed_ = false;
  begin_set();
  for (uint32_t i = prev_begin; i < prev_end; ++i) {
    const EarleyItem it = items_[i];
    const Dfa* d = core_dfa_[it.core];
    if (!d) continue;
    if (const CountedDfa* cd = core_counted_[it.core]) {
      uint32_t e = cd->entry(it.state, byte);
      uint32_t s = e & CountedDfa::kStateMask;
      uint32_t count = it.count + ((e & CountedDfa::kCountBit) ? 1 : 0);
      if (s == CountedDfa::kDead || !cd->alive(s, count)) continue;
      add(it.core, it.origin, s, it.flags, count);
      if (cd->complete(s, count)) add_at(it.core + 1, it.origin, it.flags);
      continue;
    }
    uint32_t s = d->next(it.state, byte);
    if (s == Dfa::kDead) continue;
    add(it.core, it.origin, s, it.flags);
    if (d->accepting(s)) add_at(it.core + 1, it.origin, it.flags);
  }
  if (items_.size() == building_begin_) return false;
  close_set();
  if (overflowed_) {
    items_.resize(building_begin_);
    return false;
  }
  end_set();
  return true;
}

void EarleyChart::pop_to(size_t num_sets) {
  if (num_sets >= this->num_sets() || num_sets == 0) return;
  items_.resize(set_begin_[num_sets]);
  set_begin_.resize(num_sets + 1);
  signatures_.resize(num_sets);
  waits_.resize(wait_begin_[num_sets]);
  wait_begin_.resize(num_sets + 1);
}

bool EarleyChart::can_end() const {
  for (const auto& it : last_set()) {
    if (it.origin == 0 && g_.core_kind(it.core) == CoreKind::kEnd && g_.core_symbol(it.core) == g_.root()) return true;
  }
  return false;
}

bool EarleyChart::has_certain_item() const {
  for (const auto& it : last_set()) {
    if (!(it.flags & kSpeculative)) return true;
  }
  return false;
}

}  // namespace deepinfer::grammar
