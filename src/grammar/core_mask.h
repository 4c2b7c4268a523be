// The tokens allowed from one parser position — an item waiting on a terminal in a given DFA state
// — that do not depend on the parser stack below the item's rule, computed once per grammar.
#pragma once

#include "grammar/earley_chart.h"
#include "grammar/terminal_masks.h"
#include "grammar/token_vocabulary.h"

#include <cstdint>
#include <vector>

namespace deepinfer::grammar {

// (The tokens consumed inside the terminal are its TerminalStateMask::inside.)
struct CoreMask {
  std::vector<int32_t> accepted;   // tokens that end the terminal and continue validly after it
  std::vector<int32_t> uncertain;  // tokens valid only for some parent contexts: decided at run time
};

// From `terminal`'s exits only; `scratch` is any chart over the same grammar; it is reset.
CoreMask compute_core_mask(uint32_t core, const TerminalStateMask& terminal, const TokenVocabulary& vocab, EarleyChart& scratch);

}  // namespace deepinfer::grammar
