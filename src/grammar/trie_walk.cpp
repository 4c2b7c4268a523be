#include "grammar/trie_walk.h"

#include <algorithm>

namespace deepinfer::grammar {
namespace {

using Cursor = SubtreeWalker::Cursor;

struct WalkContext {
  const TokenTrie& trie;
  const TokenTrie::Node* nodes;
  const uint32_t* table;
  const uint8_t* cls;
  uint32_t nc;
};

// A cursor's hot fields as locals, so that the compiler keeps them in registers (stores through
// the id and state arrays could otherwise alias them).
struct Lane {
  uint32_t i, end;
  uint32_t* states;
  int32_t* ids;
  size_t count;
  Cursor* cursor;
};

[[gnu::always_inline]] inline void walk_step(const WalkContext& w, Lane& c) {
  const TokenTrie::Node node = w.nodes[c.i];
  uint32_t t = w.table[static_cast<size_t>(c.states[node.depth - 1]) * w.nc + w.cls[node.byte]];
  uint32_t s = t & ~Dfa::kAcceptBit;
  if (s == Dfa::kDead) {
    c.i = node.end;
    return;
  }
  c.states[node.depth] = s;
  // Branch-free: about half the nodes end a token, in no predictable pattern.
  c.ids[c.count] = node.token;
  c.count += node.token >= 0 ? 1 : 0;
  if (node.more_tokens) {
    auto all = w.trie.tokens(c.i);  // the first is node.token
    c.cursor->more.insert(c.cursor->more.end(), all.begin() + 1, all.end());
  }
  if ((t & Dfa::kAcceptBit) && node.end > c.i + 1) c.cursor->exits.push_back(c.i);
  ++c.i;
}

Lane start_cursor(Cursor& c, uint32_t begin, uint32_t end, uint32_t depth, uint32_t state, uint32_t max_depth) {
  if (c.states.size() < max_depth + 1) c.states.resize(max_depth + 1);
  c.states[depth] = state;
  if (c.ids.size() < end - begin) c.ids.resize(end - begin);
  c.more.clear();
  c.exits.clear();
  return Lane{begin, end, c.states.data(), c.ids.data(), 0, &c};
}

void drain(const Lane& lane, std::vector<int32_t>& ids, std::vector<uint32_t>& exits) {
  const Cursor& c = *lane.cursor;
  ids.insert(ids.end(), c.ids.begin(), c.ids.begin() + static_cast<ptrdiff_t>(lane.count));
  ids.insert(ids.end(), c.more.begin(), c.more.end());
  exits.insert(exits.end(), c.exits.begin(), c.exits.end());
}

struct CountedWalkContext {
  const TokenTrie& trie;
  const TokenTrie::Node* nodes;
  const uint32_t* table;
  const uint8_t* cls;
  uint32_t nc;
  const CountedDfa& cd;
  uint8_t* alive;  // (state, count) -> 0/1, or kUnknown until first needed
  uint32_t stride;
  CountedDfa::Window w;
  uint32_t* bits;
  uint32_t scratch_bit;
};

constexpr uint8_t kUnknown = 2;

// One node of one cursor of a counted walk (as walk_step, with the count beside the state).
[[gnu::always_inline]] inline void counted_step(const CountedWalkContext& c, uint32_t& i, uint32_t* st, uint32_t* count,
                                                std::vector<uint32_t>& exits) {
  const TokenTrie::Node node = c.nodes[i];
  uint32_t e = c.table[static_cast<size_t>(st[node.depth - 1]) * c.nc + c.cls[node.byte]];
  uint32_t s = e & CountedDfa::kStateMask;
  uint32_t k = count[node.depth - 1] + ((e >> 30) & 1u);
  uint8_t& alive = c.alive[static_cast<size_t>(s) * c.stride + k];
  if (alive == kUnknown) alive = s != CountedDfa::kDead && c.cd.alive_in(s, k, c.w) ? 1 : 0;
  if (!alive) {
    i = node.end;
    return;
  }
  st[node.depth] = s;
  count[node.depth] = k;
  // Nodes without a token set a bit in a scratch word past the mask.
  uint32_t id = node.token >= 0 ? static_cast<uint32_t>(node.token) : c.scratch_bit;
  c.bits[id >> 5] |= 1u << (id & 31);
  if (node.more_tokens) {
    for (int32_t more : c.trie.tokens(i)) c.bits[static_cast<size_t>(more) >> 5] |= 1u << (more & 31);
  }
  if ((e & CountedDfa::kAcceptBit) && k >= c.w.lo && k <= c.w.hi && node.end > i + 1) exits.push_back(i);
  ++i;
}

}  // namespace

void SubtreeWalker::walk(const Dfa& dfa, uint32_t child, uint32_t state, std::vector<int32_t>& ids, std::vector<uint32_t>& exits) {
  const TokenTrie& trie = trie_;
  const TokenTrie::Node* nodes = trie.nodes();
  auto own = trie.tokens(child);
  ids.insert(ids.end(), own.begin(), own.end());
  const uint32_t begin = child + 1, end = nodes[child].end;
  if (begin == end) return;
  if (dfa.accepting(state)) exits.push_back(child);
  // Each node's state depends on its parent's, so a walk is a chain of dependent loads. Two
  // cursors over the two halves of the subtree (split between depth-2 subtrees) overlap their
  // latencies.
  uint32_t mid = begin;
  while (mid < end && mid - begin < (end - begin) / 2) mid = nodes[mid].end;
  WalkContext w{trie, nodes, dfa.transitions(), dfa.byte_classes(), dfa.num_classes()};
  Lane a = start_cursor(a_, begin, mid, 1, state, trie.max_depth());
  Lane b = start_cursor(b_, mid, end, 1, state, trie.max_depth());
  while (a.i < a.end && b.i < b.end) {
    walk_step(w, a);
    walk_step(w, b);
  }
  while (a.i < a.end) walk_step(w, a);
  while (b.i < b.end) walk_step(w, b);
  drain(a, ids, exits);
  drain(b, ids, exits);
}

std::vector<uint32_t> filter_exits(const TokenTrie& trie, const std::vector<uint32_t>& exits, const Dfa& dfa, uint32_t state) {
  const TokenTrie::Node* nodes = trie.nodes();
  std::vector<uint32_t> out;
  // The branch down to the last exit looked at: each frame's state, and the child scanned last
  // (exits come in trie order, so a child before it never holds a later one).
  struct Frame {
    uint32_t node, end, state, child;
  };
  if (!std::is_sorted(exits.begin(), exits.end())) {
    std::vector<uint32_t> sorted = exits;
    std::sort(sorted.begin(), sorted.end());
    return filter_exits(trie, sorted, dfa, state);
  }
  std::vector<Frame> path{{0, trie.num_nodes(), state, 1}};
  uint32_t dead_end = 0;  // exits below this node index sit under a prefix the DFA rejects
  for (uint32_t e : exits) {
    if (e < dead_end) continue;
    while (path.back().end <= e) path.pop_back();
    while (path.back().node != e) {
      Frame& f = path.back();
      uint32_t c = f.child;
      while (nodes[c].end <= e) c = nodes[c].end;
      f.child = c;
      uint32_t s = dfa.next(f.state, nodes[c].byte);
      if (s == Dfa::kDead) {
        dead_end = nodes[c].end;
        break;
      }
      path.push_back({c, nodes[c].end, s, c + 1});
    }
    if (path.back().node == e && dfa.accepting(path.back().state)) out.push_back(e);
  }
  return out;
}

TrieWalk walk_counted(const TokenTrie& trie, size_t mask_words, const CountedDfa& cd, uint32_t state, const CountedDfa::Window& w) {
  TrieWalk out;
  out.words.assign(mask_words + 1, 0);  // one scratch word past the mask
  const TokenTrie::Node* nodes = trie.nodes();
  const uint32_t n = trie.num_nodes();
  const uint32_t depth = trie.max_depth();
  // alive_in for the (state, count) pairs a token reaches (a token adds at most `depth` counts).
  const uint32_t stride = depth + 1;
  std::vector<uint8_t> alive(static_cast<size_t>(cd.num_states()) * stride, kUnknown);
  uint32_t mid = 1;
  while (mid < n && mid < n / 2) mid = nodes[mid].end;
  std::vector<uint32_t> st_a(depth + 1, 0), st_b(depth + 1, 0), count_a(depth + 1, 0), count_b(depth + 1, 0);
  st_a[0] = st_b[0] = state;
  std::vector<uint32_t> exits_b;
  CountedWalkContext c{trie, nodes, cd.transitions(), cd.byte_classes(), cd.num_classes(), cd, alive.data(), stride, w,
                       out.words.data(), static_cast<uint32_t>(mask_words * 32)};
  uint32_t ia = 1, ea = mid, ib = mid, eb = n;
  while (ia < ea && ib < eb) {
    counted_step(c, ia, st_a.data(), count_a.data(), out.exits);
    counted_step(c, ib, st_b.data(), count_b.data(), exits_b);
  }
  while (ia < ea) counted_step(c, ia, st_a.data(), count_a.data(), out.exits);
  while (ib < eb) counted_step(c, ib, st_b.data(), count_b.data(), exits_b);
  out.exits.insert(out.exits.end(), exits_b.begin(), exits_b.end());
  out.words.pop_back();
  return out;
}

}  // namespace deepinfer::grammar
