// The quoted JSON texts of a set of string values (every spelling of each: raw, the two-character
// escapes, \uXXXX), as a DFA built without regexes, for large enums and long constants. The
// values' minimal automaton over code points is built incrementally from the sorted values (a
// trie minimized as it grows), then each code point transition is spelled out in bytes. Memory and
// time grow with the minimal automaton, not with the number or length of the values.
#pragma once

#include "grammar/dfa.h"
#include "util/result.h"

#include <string>
#include <vector>

namespace deepinfer::grammar {

// `values`: valid UTF-8. Fails with kGrammar when the automaton would exceed `max_states`.
Result<Dfa> json_strings_dfa(std::vector<std::string> values, size_t max_states = Dfa::kDefaultMaxStates);

}  // namespace deepinfer::grammar
