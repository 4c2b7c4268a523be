// Stop strings over streamed, detokenized text. The matcher is fed each new piece of text and
// returns the part that is safe to emit: it holds back any suffix that could still grow into a stop
// string, and cuts the text where one completes.
//
// Matching is byte-wise (stop strings are valid UTF-8, so a match never splits a code point). The
// match that completes first (earliest end) wins; among matches ending at the same byte, the
// longest, then the first listed. The result does not depend on how the text is split into pieces.
// Each stop string keeps a KMP automaton state, so a feed costs O(bytes x stop strings).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer {

struct StopStringMatch {
  size_t stop_index = 0;  // which stop string (index into the constructor's list)
  size_t offset = 0;      // byte offset of its first byte in the whole text fed so far
};

struct StopStringFeed {
  std::string text;                      // safe to emit now
  std::optional<StopStringMatch> match;  // set once: the completion ends here
};

class StopStringMatcher {
 public:
  // include_stop_string: emit the stop string itself (vLLM include_stop_str_in_output); nothing is
  // held back then, since every byte before the match end is emitted either way.
  StopStringMatcher(std::vector<std::string> stop_strings, bool include_stop_string);

  // can_stop = false (min_tokens not reached, see stop_strings_armed): stop strings completed
  // within this piece do not count and pass through as text. After a match, feeds return nothing.
  StopStringFeed feed(std::string_view delta, bool can_stop = true);

  // The end of the text, whatever ends the completion: `tail` (text released only at the end, such
  // as the U+FFFD of a character the last token left incomplete) is fed disarmed, and everything
  // still held back is returned with it. After a stop string matched, nothing comes after it: the
  // result is empty whatever `tail` holds.
  std::string finish(std::string_view tail = {});

  bool stopped() const { return stopped_; }

 private:
  struct Automaton {
    std::string pattern;
    std::vector<size_t> fallback;  // KMP: longest proper border of pattern[0, k)
    size_t matched = 0;            // longest prefix of pattern that is a suffix of the text
    void step(char byte);
  };

  std::vector<Automaton> automata_;
  bool include_stop_string_;
  bool stopped_ = false;
  std::string held_;        // text received but not yet emitted
  size_t emitted_ = 0;      // bytes emitted or cut before held_
};

}  // namespace deepinfer
