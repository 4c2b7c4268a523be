#include "grammar/core_mask.h"

#include <algorithm>

namespace deepinfer::grammar {

namespace {

// Walks the subtrees below `exits` of `trie` with the parser continuing after the terminal.
void walk_exits(const TokenTrie& trie, const std::vector<uint32_t>& exits, EarleyChart& scratch, CoreMask& out) {
  for (uint32_t exit : exits) {
    uint32_t base = trie.depth(exit);
    uint32_t end = trie.subtree_end(exit);
    for (uint32_t i = exit + 1; i < end;) {
      scratch.pop_to(trie.depth(i) - base);
      if (!scratch.push_byte(trie.byte(i))) {
        // Past the work bound nothing was decided: the whole subtree goes to the run-time check.
        if (scratch.overflowed()) {
          for (uint32_t j = i; j < trie.subtree_end(i); ++j) {
            auto tokens = trie.tokens(j);
            out.uncertain.insert(out.uncertain.end(), tokens.begin(), tokens.end());
          }
        }
        i = trie.subtree_end(i);
        continue;
      }
      auto tokens = trie.tokens(i);  // usually none or one
      if (!tokens.empty()) {
        auto& dst = scratch.has_certain_item() ? out.accepted : out.uncertain;
        dst.insert(dst.end(), tokens.begin(), tokens.end());
      }
      ++i;
    }
    scratch.pop_to(1);
  }
}

}  // namespace

CoreMask compute_core_mask(uint32_t core, const TerminalStateMask& terminal, const TokenVocabulary& vocab, EarleyChart& scratch) {
  CoreMask out;
  if (terminal.short_exits.empty() && terminal.long_exits.empty()) return out;
  // After an exit the terminal is complete: continue from the item past it.
  scratch.start_context_free(core + 1);
  walk_exits(vocab.short_trie(), terminal.short_exits, scratch, out);
  walk_exits(vocab.long_trie(), terminal.long_exits, scratch, out);
  auto normalize = [](std::vector<int32_t>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  normalize(out.accepted);
  normalize(out.uncertain);
  std::erase_if(out.uncertain, [&](int32_t id) { return std::binary_search(out.accepted.begin(), out.accepted.end(), id); });
  return out;
}

}  // namespace deepinfer::grammar
