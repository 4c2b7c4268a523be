// Walks of a token trie with a terminal's automaton: the tokens whose bytes it consumes from a
// state (the automaton alive after each byte) and the trie nodes where it may end with bytes of
// the token left (exits). Dead prefixes skip their whole subtree.
#pragma once

#include "grammar/counted_dfa.h"
#include "grammar/dfa.h"
#include "grammar/token_trie.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace deepinfer::grammar {

// One walk of one trie from one state.
struct TrieWalk {
  std::vector<uint32_t> words;  // mask of the tokens consumed
  std::vector<uint32_t> exits;
};

// Walks root subtrees of one trie, reusing its buffers from walk to walk.
class SubtreeWalker {
 public:
  explicit SubtreeWalker(const TokenTrie& trie) : trie_(trie) {}

  // The tokens below `child` (a depth-1 node, itself included) from `state`, the DFA's state
  // after the child's byte (not dead). The result depends only on the residual language of
  // `state`, which is what makes it shareable between states. Tokens are appended to `ids`
  // (unordered), exits to `exits` (in trie order).
  void walk(const Dfa& dfa, uint32_t child, uint32_t state, std::vector<int32_t>& ids, std::vector<uint32_t>& exits);

  // The buffers of one cursor over a range of sibling subtrees.
  struct Cursor {
    std::vector<uint32_t> states;  // the DFA state per depth on the current branch
    std::vector<int32_t> ids;      // consumed tokens, sized for the whole range (written branch-free)
    std::vector<int32_t> more;     // other tokens with the same bytes (rare)
    std::vector<uint32_t> exits;
  };

 private:
  const TokenTrie& trie_;
  Cursor a_, b_;
};

// The nodes of `exits` (in trie order) where `dfa` accepts from `state`. `exits` must hold every
// such node, e.g. the exits of an automaton whose language from its state includes this one's:
// only the paths to them are walked.
std::vector<uint32_t> filter_exits(const TokenTrie& trie, const std::vector<uint32_t>& exits, const Dfa& dfa, uint32_t state);

// All of `trie` from (state, window) of a counted terminal.
TrieWalk walk_counted(const TokenTrie& trie, size_t mask_words, const CountedDfa& cd, uint32_t state, const CountedDfa::Window& w);

}  // namespace deepinfer::grammar
