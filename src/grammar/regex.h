// Regular expressions over Unicode code points: the common form every front end (ECMAScript
// patterns, EBNF terminals, JSON lexemes) lowers to before the byte-level automata are built.
#pragma once

#include "grammar/codepoint_set.h"

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace deepinfer::grammar {

struct RegexNode;
using Regex = std::shared_ptr<const RegexNode>;

enum class RegexKind : uint8_t {
  kEmpty,       // matches the empty string
  kChars,       // one code point from `chars` (an empty set matches nothing)
  kConcat,      // items in sequence
  kAlt,         // any one of items
  kRepeat,      // items[0] repeated min..max times
  kInputStart,  // zero-width: the start of the input (^)
  kInputEnd,    // zero-width: the end of the input ($)
};

inline constexpr uint32_t kUnbounded = UINT32_MAX;

struct RegexNode {
  RegexKind kind = RegexKind::kEmpty;
  CodepointSet chars;
  std::vector<Regex> items;
  uint32_t min = 0;
  uint32_t max = 0;
};

Regex re_empty();
Regex re_nothing();
Regex re_chars(CodepointSet chars);
Regex re_char(uint32_t cp);
// Decodes `utf8` (which must be valid UTF-8) into a sequence of single code points.
Regex re_literal(std::string_view utf8);
Regex re_seq(std::vector<Regex> items);
Regex re_alt(std::vector<Regex> items);
Regex re_repeat(Regex item, uint32_t min, uint32_t max);
inline Regex re_opt(Regex item) { return re_repeat(std::move(item), 0, 1); }
inline Regex re_star(Regex item) { return re_repeat(std::move(item), 0, kUnbounded); }
inline Regex re_plus(Regex item) { return re_repeat(std::move(item), 1, kUnbounded); }
Regex re_input_start();
Regex re_input_end();

// Replaces every code point class by `f(chars)`; the structure around it is kept.
template <class F>
Regex re_map_chars(const Regex& r, const F& f) {
  switch (r->kind) {
    case RegexKind::kChars: return f(r->chars);
    case RegexKind::kConcat:
    case RegexKind::kAlt: {
      std::vector<Regex> items;
      items.reserve(r->items.size());
      for (const auto& it : r->items) items.push_back(re_map_chars(it, f));
      return r->kind == RegexKind::kConcat ? re_seq(std::move(items)) : re_alt(std::move(items));
    }
    case RegexKind::kRepeat: return re_repeat(re_map_chars(r->items[0], f), r->min, r->max);
    default: return r;
  }
}

}  // namespace deepinfer::grammar
