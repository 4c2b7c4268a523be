#include "sample/stop_string_matcher.h"

#include <algorithm>
#include <utility>

namespace deepinfer {

void StopStringMatcher::Automaton::step(char byte) {
  if (matched == pattern.size()) matched = fallback[matched];
  while (matched > 0 && pattern[matched] != byte) matched = fallback[matched];
  if (pattern[matched] == byte) ++matched;
}

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings,
                                     bool include_stop_string)
    : include_stop_string_(include_stop_string) {
  automata_.reserve(stop_strings.size());
  for (std::string& pattern : stop_strings) {
    if (pattern.empty()) continue;  // validate() rejects these; an empty pattern matches nothing
    std::vector<size_t> fallback(pattern.size() + 1, 0);
    for (size_t k = 2; k <= pattern.size(); ++k) {
      size_t border = fallback[k - 1];
      while (border > 0 && pattern[border] != pattern[k - 1]) border = fallback[border];
      if (pattern[border] == pattern[k - 1]) ++border;
      fallback[k] = border;
    }
    automata_.push_back({std::move(pattern), std::move(fallback), 0});
  }
}

StopStringFeed StopStringMatcher::feed(std::string_view delta, bool can_stop) {
  StopStringFeed out;
  if (stopped_) return out;
  const size_t start = held_.size();
  held_.append(delta);
  for (size_t i = start; i < held_.size(); ++i) {
    std::optional<size_t> winner;
    for (size_t a = 0; a < automata_.size(); ++a) {
      Automaton& automaton = automata_[a];
      automaton.step(held_[i]);
      const bool complete = automaton.matched == automaton.pattern.size();
      if (complete && can_stop &&
          (!winner || automaton.pattern.size() > automata_[*winner].pattern.size())) {
        winner = a;
      }
    }
    if (winner) {
      // Without hold-back (include_stop_string) the match may begin in text already emitted.
      const size_t end = i + 1;
      const size_t length = automata_[*winner].pattern.size();
      out.text = held_.substr(0, include_stop_string_ ? end : end - length);
      out.match = StopStringMatch{*winner, emitted_ + end - length};
      stopped_ = true;
      held_.clear();
      return out;
    }
  }
  size_t hold = 0;
  if (!include_stop_string_) {
    for (const Automaton& automaton : automata_) {
      // A complete match here passed while disarmed: it is text, only a longer prefix is held.
      const size_t partial = automaton.matched == automaton.pattern.size()
                                 ? automaton.fallback[automaton.matched]
                                 : automaton.matched;
      hold = std::max(hold, partial);
    }
  }
  const size_t emit = held_.size() - hold;
  out.text = held_.substr(0, emit);
  held_.erase(0, emit);
  emitted_ += emit;
  return out;
}

std::string StopStringMatcher::finish(std::string_view tail) {
  if (stopped_) return {};
  std::string out = feed(tail, false).text;
  emitted_ += held_.size();
  out += std::exchange(held_, {});
  return out;
}

}  // namespace deepinfer
