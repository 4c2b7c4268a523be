#include "grammar/residual_keys.h"

#include <algorithm>
#include <bit>
#include <unordered_map>

namespace deepinfer::grammar {

ResidualKeys::ResidualKeys(std::shared_ptr<const Dfa> dfa) : dfa_(std::move(dfa)) {
  const uint8_t* cls = dfa_->byte_classes();
  for (int b = 0; b < 256; ++b) {
    if (b == 0 || cls[b] != cls[b - 1]) runs_.push_back(static_cast<uint16_t>(b));
  }
  keys_.resize(dfa_->num_states());
  known_.assign(dfa_->num_states(), 0);
}

ResidualKey ResidualKeys::of(uint32_t state) {
  std::lock_guard lock(mutex_);
  if (!known_[state]) {
    keys_[state] = compute(state);
    known_[state] = 1;
  }
  return keys_[state];
}

// Numbers the states reachable from `state` in BFS order (bytes ascending) and hashes acceptance
// plus transitions as byte runs: equal residual languages give equal keys (minimal DFAs), whatever
// the DFAs' byte classes.
ResidualKey ResidualKeys::compute(uint32_t state) {
  if (ids_.empty()) ids_.assign(dfa_->num_states(), -1);
  ResidualKey key{0x243f6a8885a308d3ull, 0x13198a2e03707344ull};
  std::vector<uint32_t> order{state};
  ids_[Dfa::kDead] = 0;
  ids_[state] = 1;
  bool canonical = true;
  for (size_t i = 0; i < order.size() && canonical; ++i) {
    uint32_t s = order[i];
    key.a = hash_mix(key.a, dfa_->accepting(s) ? 0xacce : 0x0);
    key.b = hash_mix(key.b, dfa_->accepting(s) ? 0xbeef : 0x1);
    uint32_t run_target = UINT32_MAX;
    for (uint16_t b : runs_) {
      uint32_t t = dfa_->next(s, static_cast<uint8_t>(b));
      if (ids_[t] < 0) {
        if (order.size() >= kMaxCanonicalReach) {
          canonical = false;
          break;
        }
        ids_[t] = static_cast<int32_t>(order.size() + 1);
        order.push_back(t);
      }
      if (static_cast<uint32_t>(ids_[t]) != run_target) {  // a new run starts at byte b
        run_target = static_cast<uint32_t>(ids_[t]);
        key.a = hash_mix(key.a, (static_cast<uint64_t>(b) << 32) | run_target);
        key.b = hash_mix(key.b, (static_cast<uint64_t>(run_target) << 9) ^ static_cast<uint64_t>(b));
      }
    }
  }
  for (uint32_t s : order) ids_[s] = -1;
  ids_[Dfa::kDead] = -1;
  if (!canonical) {
    key.a = hash_mix(hash_mix(0x243f6a8885a308d3ull, dfa_->fingerprint().a), state | (1ull << 40));
    key.b = hash_mix(hash_mix(0x13198a2e03707344ull, dfa_->fingerprint().b), state | (1ull << 41));
  }
  return key;
}

std::optional<ResidualKey> bounded_residual_key(const Dfa& dfa, uint32_t state, uint32_t depth, size_t max_nodes) {
  ResidualKey key{0x452821e638d01377ull, 0xbe5466cf34e90c6cull};
  std::unordered_map<uint64_t, uint32_t> ids;  // (state, depth) -> canonical id; 0 = dead
  std::vector<std::pair<uint32_t, uint32_t>> order{{state, 0}};
  ids.emplace(static_cast<uint64_t>(state) << 8, 1);
  const uint8_t* cls = dfa.byte_classes();
  std::vector<uint32_t> by_class(dfa.num_classes());
  std::vector<int> run_starts;  // bytes where the class changes: transitions are emitted per run
  for (int b = 0; b < 256; ++b) {
    if (b == 0 || cls[b] != cls[b - 1]) run_starts.push_back(b);
  }
  for (size_t i = 0; i < order.size(); ++i) {
    auto [s, d] = order[i];
    key.a = hash_mix(key.a, dfa.accepting(s) ? 0xacce : 0x0);
    key.b = hash_mix(key.b, dfa.accepting(s) ? 0xbeef : 0x1);
    if (d == depth) continue;
    for (uint32_t c = 0; c < dfa.num_classes(); ++c) {
      uint32_t t = dfa.transitions()[static_cast<size_t>(s) * dfa.num_classes() + c] & ~Dfa::kAcceptBit;
      if (t == Dfa::kDead) {
        by_class[c] = 0;
        continue;
      }
      auto [it, fresh] = ids.emplace(static_cast<uint64_t>(t) << 8 | (d + 1), static_cast<uint32_t>(order.size() + 1));
      if (fresh) {
        if (order.size() >= max_nodes) return std::nullopt;
        order.push_back({t, d + 1});
      }
      by_class[c] = it->second;
    }
    uint32_t run_target = UINT32_MAX;
    for (int b : run_starts) {  // transitions as byte runs: independent of the class split
      uint32_t target = by_class[cls[b]];
      if (target != run_target) {
        run_target = target;
        key.a = hash_mix(key.a, (static_cast<uint64_t>(b) << 32) | target);
        key.b = hash_mix(key.b, (static_cast<uint64_t>(target) << 9) ^ static_cast<uint64_t>(b));
      }
    }
  }
  return key;
}

std::vector<uint32_t> refine_classes(std::vector<uint32_t> cls, const uint32_t* table, uint32_t nc, uint32_t target_mask, uint32_t rounds) {
  const uint32_t n = static_cast<uint32_t>(cls.size());
  auto entry = [&](uint32_t s, uint32_t c) { return table[static_cast<size_t>(s) * nc + c]; };
  // An entry's identity: its target's class and its other bits.
  auto label = [&](uint32_t e) { return (uint64_t{cls[e & target_mask]} << 32) | (e & ~target_mask); };
  size_t count = 0;
  for (uint32_t c : cls) count = std::max<size_t>(count, size_t{c} + 1);
  // Per round, the new classes by signature: an open-addressing table (stamped per round, so never
  // cleared) whose entries head lists of the classes' first states (signatures may collide).
  constexpr uint32_t kNone = UINT32_MAX;
  const size_t slots = std::bit_ceil(size_t{2} * n + 2);
  std::vector<uint64_t> slot_sig(slots);
  std::vector<uint32_t> slot_head(slots), slot_round(slots, 0), rep_next(n), next(n), members;
  std::vector<uint64_t> weight(nc);
  for (uint32_t c = 0; c < nc; ++c) weight[c] = hash_mix(0xbb67ae8584caa73bull, c) | 1;
  for (uint32_t round = 0; round < rounds; ++round) {
    auto same = [&](uint32_t a, uint32_t b) {
      if (cls[a] != cls[b]) return false;
      for (uint32_t c = 0; c < nc; ++c) {
        if (label(entry(a, c)) != label(entry(b, c))) return false;
      }
      return true;
    };
    // A state alone in its class stays alone (refinement only splits): it keeps a class of its
    // own without being compared, so later rounds touch the states still grouped.
    members.assign(count, 0);
    for (uint32_t c : cls) ++members[c];
    uint32_t classes = 0;
    for (uint32_t s = 0; s < n; ++s) {
      if (members[cls[s]] == 1) {
        next[s] = classes++;
        continue;
      }
      // Independent products (no chain of dependent mixes); equal signatures are checked by same().
      uint64_t h = hash_mix(0x3c6ef372fe94f82bull, cls[s]);
      for (uint32_t c = 0; c < nc; ++c) h += label(entry(s, c)) * weight[c];
      h = hash_mix(h, 0);
      size_t i = h & (slots - 1);
      while (slot_round[i] == round + 1 && slot_sig[i] != h) i = (i + 1) & (slots - 1);
      uint32_t r = slot_round[i] == round + 1 ? slot_head[i] : kNone;
      while (r != kNone && !same(r, s)) r = rep_next[r];
      if (r != kNone) {
        next[s] = next[r];
        continue;
      }
      next[s] = classes++;
      rep_next[s] = slot_round[i] == round + 1 ? slot_head[i] : kNone;
      slot_round[i] = round + 1;
      slot_sig[i] = h;
      slot_head[i] = s;
    }
    cls.swap(next);
    if (classes == count) break;  // stable: longer strings split nothing either
    count = classes;
  }
  return cls;
}

std::vector<uint32_t> bounded_classes(const Dfa& dfa, uint32_t depth) {
  // Round 0: dead, accepting, alive and not accepting.
  std::vector<uint32_t> cls(dfa.num_states());
  for (uint32_t s = 0; s < dfa.num_states(); ++s) cls[s] = s == Dfa::kDead ? 0 : dfa.accepting(s) ? 1 : 2;
  return refine_classes(std::move(cls), dfa.transitions(), dfa.num_classes(), ~Dfa::kAcceptBit, depth);
}

}  // namespace deepinfer::grammar
