#include "grammar/dfa.h"

#include "grammar/compile_budget.h"

#include <algorithm>
#include <bit>
#include <unordered_map>

namespace deepinfer::grammar {
namespace {

// A DFA under construction: state 0 is dead; transitions may lead to states that cannot accept.
struct RawDfa {
  uint32_t num_classes = 1;
  std::array<uint8_t, 256> byte_class{};
  std::array<uint8_t, 256> class_rep{};  // a byte of each class
  std::vector<uint32_t> table;
  std::vector<uint8_t> accepting;
  uint32_t start = 0;

  uint32_t num_states() const { return static_cast<uint32_t>(accepting.size()); }
  uint32_t& at(uint32_t s, uint32_t c) { return table[static_cast<size_t>(s) * num_classes + c]; }
  uint32_t at(uint32_t s, uint32_t c) const { return table[static_cast<size_t>(s) * num_classes + c]; }
  uint32_t add_state(bool accept) {
    accepting.push_back(accept ? 1 : 0);
    table.resize(table.size() + num_classes, 0);
    return num_states() - 1;
  }
};

// Byte classes: bytes that no partition in `maps` tells apart share a class.
void combine_classes(const std::vector<const std::array<uint8_t, 256>*>& maps, RawDfa& out) {
  // One map at a time: a class so far (< 256) and the map's class make an exact key.
  std::array<uint16_t, 256> cls{};
  uint32_t n = 1;
  for (const auto* m : maps) {
    std::unordered_map<uint32_t, uint16_t> ids;
    for (int b = 0; b < 256; ++b) {
      auto [it, inserted] = ids.emplace(uint32_t{cls[b]} << 8 | (*m)[b], static_cast<uint16_t>(ids.size()));
      cls[b] = it->second;
    }
    n = static_cast<uint32_t>(ids.size());
  }
  std::array<bool, 256> seen{};
  for (int b = 0; b < 256; ++b) {
    out.byte_class[b] = static_cast<uint8_t>(cls[b]);
    if (!seen[cls[b]]) {
      seen[cls[b]] = true;
      out.class_rep[cls[b]] = static_cast<uint8_t>(b);
    }
  }
  out.num_classes = n;
}

struct VectorHash {
  size_t operator()(const std::vector<uint32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t x : v) h = (h ^ x) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

class SubsetConstruction {
 public:
  SubsetConstruction(const Nfa& nfa, size_t max_states) : nfa_(nfa), max_states_(max_states) {}

  Result<RawDfa> run() {
    // Bytes split into classes at every edge boundary; class ids grow with byte values, so an
    // edge [lo, hi] covers the classes [class(lo), class(hi)].
    std::vector<uint8_t> cut(257, 0);
    for (const auto& st : nfa_.states) {
      for (const auto& e : st) {
        if (e.kind != NfaEdgeKind::kBytes) continue;
        cut[e.lo] = 1;
        cut[e.hi + 1] = 1;
      }
    }
    std::array<uint8_t, 256> boundaries{};
    uint8_t cls = 0;
    for (int b = 0; b < 256; ++b) {
      if (b > 0 && cut[b]) ++cls;
      boundaries[b] = cls;
    }
    combine_classes({&boundaries}, dfa_);
    mark_.assign(nfa_.states.size(), 0);

    dfa_.add_state(false);  // dead
    std::vector<uint32_t> start_set = closure({nfa_.start}, /*at_start=*/true);
    start_set.push_back(kStartMarker);
    DI_TRY(start, intern(std::move(start_set)));
    dfa_.start = start;
    std::vector<std::vector<uint32_t>> moved(dfa_.num_classes);
    for (uint32_t id = 1; id < dfa_.num_states(); ++id) {
      const std::vector<uint32_t>& set = sets_[id];
      for (auto& m : moved) m.clear();
      uint64_t work = dfa_.num_classes;
      for (uint32_t s : set) {
        if (s == kStartMarker) continue;
        work += nfa_.states[s].size();
        for (const auto& e : nfa_.states[s]) {
          if (e.kind != NfaEdgeKind::kBytes) continue;
          for (uint32_t c = dfa_.byte_class[e.lo]; c <= dfa_.byte_class[e.hi]; ++c) moved[c].push_back(e.target);
        }
      }
      // Sorting, hashing and keeping a moved set cost more than a step per element: large sets (a
      // long bounded repetition of an ambiguous unit) are charged what they take.
      for (const auto& m : moved) work += m.size() * (1 + std::bit_width(m.size()));
      DI_TRYV(CompileBudget::spend(work));
      for (uint32_t c = 0; c < dfa_.num_classes; ++c) {
        if (moved[c].empty()) continue;
        std::sort(moved[c].begin(), moved[c].end());
        moved[c].erase(std::unique(moved[c].begin(), moved[c].end()), moved[c].end());
        uint32_t target;
        auto hit = after_move_.find(moved[c]);
        if (hit != after_move_.end()) {
          target = hit->second;
        } else {
          DI_TRY(t, intern(closure(moved[c], false)));
          target = t;
          after_move_.emplace(moved[c], target);
        }
        dfa_.at(id, c) = target;
      }
    }
    return std::move(dfa_);
  }

 private:
  static constexpr uint32_t kStartMarker = UINT32_MAX;

  std::vector<uint32_t> closure(const std::vector<uint32_t>& seeds, bool at_start) {
    std::vector<uint32_t> out;
    stack_.assign(seeds.begin(), seeds.end());
    ++stamp_;
    while (!stack_.empty()) {
      uint32_t s = stack_.back();
      stack_.pop_back();
      if (mark_[s] == stamp_) continue;
      mark_[s] = stamp_;
      out.push_back(s);
      for (const auto& e : nfa_.states[s]) {
        if (e.kind == NfaEdgeKind::kEpsilon || (at_start && e.kind == NfaEdgeKind::kInputStart)) stack_.push_back(e.target);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Accepting: the NFA accept state is reachable through epsilon and end-of-input edges.
  bool accepts(const std::vector<uint32_t>& set, bool at_start) {
    stack_.clear();
    for (uint32_t s : set) {
      if (s != kStartMarker) stack_.push_back(s);
    }
    ++stamp_;
    while (!stack_.empty()) {
      uint32_t s = stack_.back();
      stack_.pop_back();
      if (mark_[s] == stamp_) continue;
      mark_[s] = stamp_;
      if (s == nfa_.accept) return true;
      for (const auto& e : nfa_.states[s]) {
        if (e.kind == NfaEdgeKind::kEpsilon || e.kind == NfaEdgeKind::kInputEnd ||
            (at_start && e.kind == NfaEdgeKind::kInputStart)) {
          stack_.push_back(e.target);
        }
      }
    }
    return false;
  }

  Result<uint32_t> intern(std::vector<uint32_t> set) {
    auto it = ids_.find(set);
    if (it != ids_.end()) return it->second;
    if (dfa_.num_states() >= max_states_) {
      return make_error(Code::kGrammar, "regular expression too complex (more than {} DFA states)", max_states_);
    }
    CompileBudget::charge(2 * set.size());  // its hash and its two copies
    bool at_start = !set.empty() && set.back() == kStartMarker;
    uint32_t id = dfa_.add_state(accepts(set, at_start));
    ids_.emplace(set, id);
    sets_.push_back(std::move(set));
    return id;
  }

  const Nfa& nfa_;
  size_t max_states_;
  RawDfa dfa_;
  std::unordered_map<std::vector<uint32_t>, uint32_t, VectorHash> ids_;         // closed set -> state
  std::unordered_map<std::vector<uint32_t>, uint32_t, VectorHash> after_move_;  // moved set -> state
  std::vector<std::vector<uint32_t>> sets_{std::vector<uint32_t>{}};            // index 0: dead
  std::vector<uint32_t> mark_, stack_;
  uint32_t stamp_ = 0;
};

// Redirects every state that cannot reach an accepting state to the dead state.
void trim(RawDfa& d) {
  uint32_t n = d.num_states();
  // Reverse edges as CSR: rev[rev_start[t], rev_start[t+1]) are the predecessors of t.
  std::vector<uint32_t> rev_start(n + 1, 0), rev;
  for (uint32_t s = 0; s < n; ++s) {
    for (uint32_t c = 0; c < d.num_classes; ++c) ++rev_start[d.at(s, c) + 1];
  }
  for (uint32_t t = 0; t < n; ++t) rev_start[t + 1] += rev_start[t];
  rev.resize(rev_start[n]);
  {
    std::vector<uint32_t> fill(rev_start.begin(), rev_start.end() - 1);
    for (uint32_t s = 0; s < n; ++s) {
      for (uint32_t c = 0; c < d.num_classes; ++c) rev[fill[d.at(s, c)]++] = s;
    }
  }
  std::vector<uint8_t> live(n, 0);
  std::vector<uint32_t> stack;
  for (uint32_t s = 1; s < n; ++s) {
    if (d.accepting[s]) {
      live[s] = 1;
      stack.push_back(s);
    }
  }
  while (!stack.empty()) {
    uint32_t s = stack.back();
    stack.pop_back();
    for (uint32_t i = rev_start[s]; i < rev_start[s + 1]; ++i) {
      uint32_t p = rev[i];
      if (!live[p] && p != 0) {
        live[p] = 1;
        stack.push_back(p);
      }
    }
  }
  for (uint32_t s = 0; s < n; ++s) {
    for (uint32_t c = 0; c < d.num_classes; ++c) {
      if (!live[d.at(s, c)]) d.at(s, c) = 0;
    }
  }
  if (!live[d.start]) d.start = 0;
}

// Hopcroft's partition refinement; returns the block of each state.
std::vector<uint32_t> hopcroft(const RawDfa& d, uint32_t* num_blocks) {
  uint32_t n = d.num_states(), k = d.num_classes;
  // Inverse transitions as CSR per (class, target).
  std::vector<uint32_t> inv_start(static_cast<size_t>(k) * n + 1, 0), inv;
  for (uint32_t s = 0; s < n; ++s)
    for (uint32_t c = 0; c < k; ++c) ++inv_start[static_cast<size_t>(c) * n + d.at(s, c) + 1];
  for (size_t i = 1; i < inv_start.size(); ++i) inv_start[i] += inv_start[i - 1];
  inv.resize(inv_start.back());
  {
    std::vector<uint32_t> fill(inv_start.begin(), inv_start.end() - 1);
    for (uint32_t s = 0; s < n; ++s)
      for (uint32_t c = 0; c < k; ++c) inv[fill[static_cast<size_t>(c) * n + d.at(s, c)]++] = s;
  }

  std::vector<uint32_t> elems(n), loc(n), block(n), first, end, marked;
  std::vector<uint8_t> in_work;
  std::vector<uint32_t> work;
  uint32_t pos = 0;
  for (int acc = 0; acc < 2; ++acc) {
    uint32_t begin = pos;
    for (uint32_t s = 0; s < n; ++s) {
      if ((d.accepting[s] != 0) == (acc == 1)) {
        elems[pos] = s;
        loc[s] = pos++;
        block[s] = static_cast<uint32_t>(first.size());
      }
    }
    if (pos > begin) {
      first.push_back(begin);
      end.push_back(pos);
      marked.push_back(0);
      in_work.push_back(1);
      work.push_back(static_cast<uint32_t>(first.size() - 1));
    }
  }

  std::vector<uint32_t> touched, splitter;
  while (!work.empty()) {
    uint32_t a = work.back();
    work.pop_back();
    in_work[a] = 0;
    splitter.assign(elems.begin() + first[a], elems.begin() + end[a]);
    for (uint32_t c = 0; c < k; ++c) {
      for (uint32_t q : splitter) {
        size_t base = static_cast<size_t>(c) * n + q;
        for (uint32_t i = inv_start[base]; i < inv_start[base + 1]; ++i) {
          uint32_t p = inv[i];
          uint32_t b = block[p];
          uint32_t mpos = first[b] + marked[b];
          if (loc[p] < mpos) continue;  // already marked
          if (marked[b] == 0) touched.push_back(b);
          uint32_t other = elems[mpos];
          std::swap(elems[loc[p]], elems[mpos]);
          loc[other] = loc[p];
          loc[p] = mpos;
          ++marked[b];
        }
      }
      for (uint32_t b : touched) {
        uint32_t m = marked[b];
        marked[b] = 0;
        if (m == end[b] - first[b]) continue;
        uint32_t nb = static_cast<uint32_t>(first.size());
        first.push_back(first[b]);
        end.push_back(first[b] + m);
        marked.push_back(0);
        in_work.push_back(0);
        first[b] += m;
        for (uint32_t i = first[nb]; i < end[nb]; ++i) block[elems[i]] = nb;
        if (in_work[b]) {
          in_work[nb] = 1;
          work.push_back(nb);
        } else {
          uint32_t smaller = (end[nb] - first[nb]) <= (end[b] - first[b]) ? nb : b;
          in_work[smaller] = 1;
          work.push_back(smaller);
        }
      }
      touched.clear();
    }
  }
  *num_blocks = static_cast<uint32_t>(first.size());
  return block;
}

}  // namespace

class DfaBuilder {
 public:
  // Trims, minimizes (unless the caller knows the automaton is minimal) and canonicalizes.
  static Dfa finish(RawDfa raw, bool minimize = true) {
    trim(raw);
    uint32_t nb = 0;
    std::vector<uint32_t> block;
    if (minimize) {
      block = hopcroft(raw, &nb);
    } else {
      nb = raw.num_states();
      block.resize(nb);
      for (uint32_t s = 0; s < nb; ++s) block[s] = s;
    }
    uint32_t k = raw.num_classes;
    // Quotient automaton, then coarsest byte classes, then BFS numbering from the start.
    std::vector<uint32_t> qtable(static_cast<size_t>(nb) * k, 0);
    std::vector<uint8_t> qacc(nb, 0);
    for (uint32_t s = 0; s < raw.num_states(); ++s) {
      for (uint32_t c = 0; c < k; ++c) qtable[static_cast<size_t>(block[s]) * k + c] = block[raw.at(s, c)];
      qacc[block[s]] = raw.accepting[s];
    }
    uint32_t qdead = block[0], qstart = block[raw.start];

    // Classes with identical columns merge; new classes are numbered in order of their first
    // byte so that equal languages give equal maps.
    std::unordered_map<std::vector<uint32_t>, uint8_t, VectorHash> order;
    Dfa out;
    std::vector<uint32_t> rep_old_class;
    std::vector<int> old_to_new(k, -1);
    for (int b = 0; b < 256; ++b) {
      uint32_t c = raw.byte_class[b];
      if (old_to_new[c] < 0) {
        std::vector<uint32_t> col(nb);
        for (uint32_t s = 0; s < nb; ++s) col[s] = qtable[static_cast<size_t>(s) * k + c];
        auto [it, inserted] = order.emplace(std::move(col), static_cast<uint8_t>(order.size()));
        if (inserted) rep_old_class.push_back(c);
        old_to_new[c] = it->second;
      }
      out.byte_class_[b] = static_cast<uint8_t>(old_to_new[c]);
    }
    uint32_t nk = static_cast<uint32_t>(rep_old_class.size());
    out.num_classes_ = nk;

    std::vector<uint32_t> id(nb, UINT32_MAX);
    std::vector<uint32_t> queue;
    id[qdead] = 0;
    queue.push_back(qdead);
    if (qstart != qdead) {
      id[qstart] = 1;
      queue.push_back(qstart);
    }
    for (size_t i = 1; i < queue.size(); ++i) {
      uint32_t s = queue[i];
      for (uint32_t c = 0; c < nk; ++c) {
        uint32_t t = qtable[static_cast<size_t>(s) * k + rep_old_class[c]];
        if (id[t] == UINT32_MAX) {
          id[t] = static_cast<uint32_t>(queue.size());
          queue.push_back(t);
        }
      }
    }
    uint32_t n = static_cast<uint32_t>(queue.size());
    out.table_.assign(static_cast<size_t>(n) * nk, 0);
    out.accepting_.assign(n, 0);
    for (uint32_t i = 1; i < n; ++i) {
      uint32_t s = queue[i];
      out.accepting_[i] = qacc[s];
      for (uint32_t c = 0; c < nk; ++c) out.table_[static_cast<size_t>(i) * nk + c] = id[qtable[static_cast<size_t>(s) * k + rep_old_class[c]]];
    }
    out.start_ = qstart == qdead ? 0 : 1;
    for (uint32_t& t : out.table_) {
      if (out.accepting_[t]) t |= Dfa::kAcceptBit;
    }

    // Fingerprint of the canonical form (sizes, byte classes, acceptance, transitions).
    Dfa::Fingerprint& f = out.fingerprint_;
    f = {0x6a09e667f3bcc908ull, 0xbb67ae8584caa73bull};
    auto put = [&](uint64_t v) {
      f.a = (f.a ^ v) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
      f.b = ((f.b + v) ^ (f.b >> 29)) * 0xbf58476d1ce4e5b9ull;
    };
    put(n);
    put(nk);
    for (uint8_t c : out.byte_class_) put(c);
    for (uint8_t a : out.accepting_) put(a);
    for (uint32_t v : out.table_) put(v);
    return out;
  }

  static RawDfa raw_of(const Dfa& d) {
    RawDfa r;
    r.num_classes = d.num_classes_;
    r.byte_class = d.byte_class_;
    for (int b = 255; b >= 0; --b) r.class_rep[d.byte_class_[b]] = static_cast<uint8_t>(b);
    r.table = d.table_;
    for (uint32_t& t : r.table) t &= ~Dfa::kAcceptBit;
    r.accepting = d.accepting_;
    r.start = d.start_;
    return r;
  }

  // Product automaton; keep(a_accepts, b_accepts) decides acceptance. A pair whose side X is dead
  // stays alive only if X may die (its language is not required: union, or b in subtraction).
  template <class Keep>
  static Result<Dfa> product(const Dfa& a, const Dfa& b, size_t max_states, bool a_may_die, bool b_may_die, Keep keep) {
    RawDfa r;
    combine_classes({&a.byte_class_, &b.byte_class_}, r);
    std::unordered_map<uint64_t, uint32_t> ids;
    std::vector<std::pair<uint32_t, uint32_t>> pairs;
    r.add_state(false);
    pairs.push_back({0, 0});
    auto intern = [&](uint32_t sa, uint32_t sb) -> Result<uint32_t> {
      if ((sa == 0 && (!a_may_die || sb == 0)) || (sb == 0 && !b_may_die)) return 0u;
      uint64_t key = (static_cast<uint64_t>(sa) << 32) | sb;
      auto it = ids.find(key);
      if (it != ids.end()) return it->second;
      if (r.num_states() >= max_states) {
        return make_error(Code::kGrammar, "combined constraints too complex (more than {} DFA states)", max_states);
      }
      uint32_t id = r.add_state(keep(sa != 0 && a.accepting(sa), sb != 0 && b.accepting(sb)));
      ids.emplace(key, id);
      pairs.push_back({sa, sb});
      return id;
    };
    DI_TRY(start, intern(a.start_, b.start_));
    r.start = start;
    for (uint32_t i = 1; i < r.num_states(); ++i) {
      DI_TRYV(CompileBudget::spend(r.num_classes));
      auto [sa, sb] = pairs[i];
      for (uint32_t c = 0; c < r.num_classes; ++c) {
        uint8_t byte = r.class_rep[c];
        DI_TRY(t, intern(sa == 0 ? 0 : a.next(sa, byte), sb == 0 ? 0 : b.next(sb, byte)));
        r.at(i, c) = t;
      }
    }
    return checked_finish(std::move(r));
  }

  static Result<Dfa> unite_residuals(std::span<const Dfa::Residual> parts, size_t max_states) {
    RawDfa r;
    std::vector<const std::array<uint8_t, 256>*> maps;
    for (const auto& p : parts) maps.push_back(&p.dfa->byte_class_);
    combine_classes(maps, r);
    const size_t k = parts.size();
    // State i stands for the tuple tuples[i * k, (i + 1) * k) of the parts' states.
    std::vector<uint32_t> tuples(k, 0), tuple(k);
    std::unordered_map<std::vector<uint32_t>, uint32_t, VectorHash> ids;
    r.add_state(false);
    auto intern = [&]() -> Result<uint32_t> {
      bool any = false, accept = false;
      for (size_t j = 0; j < k; ++j) {
        any |= tuple[j] != Dfa::kDead;
        accept |= tuple[j] != Dfa::kDead && parts[j].dfa->accepting(tuple[j]);
      }
      if (!any) return Dfa::kDead;
      auto it = ids.find(tuple);
      if (it != ids.end()) return it->second;
      if (r.num_states() >= max_states) return make_error(Code::kGrammar, "union too large (more than {} DFA states)", max_states);
      uint32_t id = r.add_state(accept);
      ids.emplace(tuple, id);
      tuples.insert(tuples.end(), tuple.begin(), tuple.end());
      return id;
    };
    for (size_t j = 0; j < k; ++j) tuple[j] = parts[j].state;
    DI_TRY(start, intern());
    r.start = start;
    for (uint32_t i = 1; i < r.num_states(); ++i) {
      for (uint32_t c = 0; c < r.num_classes; ++c) {
        const uint8_t byte = r.class_rep[c];
        for (size_t j = 0; j < k; ++j) {
          const uint32_t s = tuples[i * k + j];
          tuple[j] = s == Dfa::kDead ? Dfa::kDead : parts[j].dfa->next(s, byte);
        }
        DI_TRY(t, intern());
        r.at(i, c) = t;
      }
    }
    return checked_finish(std::move(r));
  }

  // finish() with its minimization charged to the compile budget.
  static Result<Dfa> checked_finish(RawDfa raw, bool minimize = true) {
    DI_TRYV(CompileBudget::spend(static_cast<uint64_t>(raw.num_states()) * raw.num_classes * 4));
    return finish(std::move(raw), minimize);
  }
};

Result<Dfa> Dfa::from_regex(const Regex& regex, size_t max_states) {
  DI_TRY(nfa, build_nfa(regex, max_states * 8));
  DI_TRY(raw, SubsetConstruction(nfa, max_states).run());
  return DfaBuilder::checked_finish(std::move(raw));
}

Result<Dfa> Dfa::from_function(uint32_t num_states, uint32_t start, const std::function<bool(uint32_t)>& accepting,
                               const std::function<uint32_t(uint32_t, uint8_t)>& next) {
  if (num_states > kDefaultMaxStates) {
    return make_error(Code::kGrammar, "automaton too large ({} states, limit {})", num_states, kDefaultMaxStates);
  }
  RawDfa r;
  r.num_classes = 256;
  for (int b = 0; b < 256; ++b) r.byte_class[b] = r.class_rep[b] = static_cast<uint8_t>(b);
  r.table.assign(static_cast<size_t>(num_states) * 256, 0);
  r.accepting.assign(num_states, 0);
  for (uint32_t s = 1; s < num_states; ++s) {
    r.accepting[s] = accepting(s) ? 1 : 0;
    for (int b = 0; b < 256; ++b) {
      uint32_t t = next(s, static_cast<uint8_t>(b));
      if (t >= num_states) return make_error(Code::kInternal, "from_function: state {} out of range", t);
      r.at(s, static_cast<uint32_t>(b)) = t;
    }
  }
  r.start = start;
  return DfaBuilder::checked_finish(std::move(r));
}

Result<Dfa> Dfa::from_table(uint32_t num_classes, const std::array<uint8_t, 256>& byte_class, std::vector<uint32_t> table,
                            std::vector<uint8_t> accepting, uint32_t start) {
  RawDfa r;
  r.num_classes = num_classes;
  r.byte_class = byte_class;
  for (int b = 255; b >= 0; --b) r.class_rep[byte_class[static_cast<size_t>(b)]] = static_cast<uint8_t>(b);
  if (table.size() != accepting.size() * num_classes || start >= accepting.size()) {
    return make_error(Code::kInternal, "from_table: inconsistent tables");
  }
  r.table = std::move(table);
  r.accepting = std::move(accepting);
  r.start = start;
  return DfaBuilder::checked_finish(std::move(r));
}

Result<Dfa> Dfa::intersect(const Dfa& a, const Dfa& b, size_t max_states) {
  return DfaBuilder::product(a, b, max_states, false, false, [](bool x, bool y) { return x && y; });
}

Result<Dfa> Dfa::subtract(const Dfa& a, const Dfa& b, size_t max_states) {
  return DfaBuilder::product(a, b, max_states, false, true, [](bool x, bool y) { return x && !y; });
}

Result<Dfa> Dfa::unite(const Dfa& a, const Dfa& b, size_t max_states) {
  return DfaBuilder::product(a, b, max_states, true, true, [](bool x, bool y) { return x || y; });
}

Result<Dfa> Dfa::unite_residuals(std::span<const Residual> parts, size_t max_states) {
  return DfaBuilder::unite_residuals(parts, max_states);
}

Result<Dfa> Dfa::repeat(const Dfa& unit, uint32_t min, uint32_t max, size_t max_states) {
  if (unit.empty_language() || unit.accepting(unit.start())) return make_error(Code::kInternal, "repeat: empty unit");
  for (uint32_t s = 1; s < unit.num_states(); ++s) {
    for (int b = 0; b < 256 && unit.accepting(s); ++b) {
      if (unit.next(s, static_cast<uint8_t>(b)) != kDead) return make_error(Code::kInternal, "repeat: the unit is not prefix-free");
    }
  }
  bool bounded = max != kUnbounded;
  if (bounded && max < min) return Dfa::from_regex(re_nothing());
  // Counter values 0..top; unbounded repetitions saturate at min.
  uint64_t top = bounded ? max : min;
  uint64_t per_count = unit.num_states();
  if ((top + 1) * per_count > max_states) {
    return make_error(Code::kGrammar, "repetition too large (more than {} DFA states)", max_states);
  }
  RawDfa r;
  r.num_classes = unit.num_classes_;
  r.byte_class = unit.byte_class_;
  for (int b = 255; b >= 0; --b) r.class_rep[unit.byte_class_[b]] = static_cast<uint8_t>(b);
  // State (c, q) for unit state q >= 1 is 1 + c * (per_count - 1) + (q - 1).
  auto id = [&](uint64_t c, uint32_t q) { return static_cast<uint32_t>(1 + c * (per_count - 1) + (q - 1)); };
  r.add_state(false);
  for (uint64_t c = 0; c <= top; ++c) {
    for (uint32_t q = 1; q < unit.num_states(); ++q) r.add_state(q == unit.start() && c >= min);
  }
  for (uint64_t c = 0; c <= top; ++c) {
    for (uint32_t q = 1; q < unit.num_states(); ++q) {
      for (uint32_t k = 0; k < r.num_classes; ++k) {
        uint32_t t = unit.next(q, r.class_rep[k]);
        uint32_t target = 0;
        if (t != kDead && !unit.accepting(t)) {
          target = id(c, t);
        } else if (t != kDead) {  // a unit completed: count it and start the next one
          uint64_t next = c + 1;
          if (next > top) next = bounded ? top + 1 : top;
          if (next <= top) target = id(next, unit.start());
        }
        r.at(id(c, q), k) = target;
      }
    }
  }
  r.start = id(0, unit.start());
  return DfaBuilder::checked_finish(std::move(r));
}

Result<Dfa> Dfa::wrap(uint8_t open, uint8_t close) const {
  for (uint32_t s = 1; s < num_states(); ++s) {
    if (accepting(s) && next(s, close) != kDead) {
      return make_error(Code::kInternal, "wrap: a complete word can continue with the closing byte");
    }
  }
  RawDfa r;
  std::array<uint8_t, 256> marks{};
  marks[open] = 1;
  marks[close] = 2;
  combine_classes({&byte_class_, &marks}, r);
  r.add_state(false);                          // dead
  uint32_t start = r.add_state(false);         // before `open`
  uint32_t base = r.num_states() - 1;          // old state s (s >= 1) becomes base + s
  for (uint32_t s = 1; s < num_states(); ++s) r.add_state(false);
  uint32_t final_state = r.add_state(true);
  r.start = start;
  if (start_ != kDead) r.at(start, r.byte_class[open]) = base + start_;
  for (uint32_t s = 1; s < num_states(); ++s) {
    for (uint32_t c = 0; c < r.num_classes; ++c) {
      uint8_t byte = r.class_rep[c];
      uint32_t t = next(s, byte);
      r.at(base + s, c) = t == kDead ? 0 : base + t;
    }
    if (accepting(s)) r.at(base + s, r.byte_class[close]) = final_state;
  }
  // Still minimal: two states of a minimal DFA differ on some word w, so they differ on w+close.
  return DfaBuilder::finish(std::move(r), /*minimize=*/false);
}

Dfa Dfa::without_empty() const {
  if (start_ == kDead || !accepting(start_)) return *this;
  RawDfa r = DfaBuilder::raw_of(*this);
  uint32_t fresh = r.add_state(false);
  for (uint32_t c = 0; c < r.num_classes; ++c) r.at(fresh, c) = r.at(r.start, c);
  r.start = fresh;
  return DfaBuilder::finish(std::move(r));
}

bool Dfa::matches(std::string_view bytes) const {
  uint32_t s = start_;
  for (char ch : bytes) {
    if (s == kDead) return false;
    s = next(s, static_cast<uint8_t>(ch));
  }
  return accepting(s);
}

}  // namespace deepinfer::grammar
