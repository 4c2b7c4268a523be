// What a request asks to constrain generation with, and how.
#pragma once

#include <cstdint>

namespace deepinfer::grammar {

enum class GrammarKind : uint8_t {
  kRegex,       // an ECMAScript regular expression the whole output must match
  kJsonSchema,  // a JSON Schema (draft 2020-12) the output must be an instance of
  kEbnf,        // a GBNF-compatible grammar with entry rule `root`
};

enum class Whitespace : uint8_t {
  kCompact,  // JSON without any whitespace between tokens
  kAny,      // JSON whitespace (space, tab, newline, carriage return) between tokens
};

struct GrammarOptions {
  Whitespace whitespace = Whitespace::kAny;
  // Longest run of whitespace between two JSON tokens with kAny; 0 = unbounded.
  uint32_t max_whitespace_run = 0;
  bool operator==(const GrammarOptions&) const = default;
};

}  // namespace deepinfer::grammar
