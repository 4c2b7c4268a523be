// General categories as HF tokenizers sees them. Its Oniguruma knows Unicode 16.0, while Debian's
// PCRE2 10.42 knows 14.0 and utf8proc 2.8 knows 15.0: the characters assigned in between (new
// emoji such as U+1FAE8, new scripts and CJK extensions) would otherwise split differently.
#pragma once

#include <span>
#include <string_view>

namespace deepinfer::text {

struct CategoryRange {
  char32_t first, last;
  char category[3];  // two-letter general category, e.g. "Lo"
};

// Characters assigned in Unicode 15.0 to 16.0, by code point (generated: unicode_additions.cpp, by gen_unicode_additions.mjs).
std::span<const CategoryRange> unicode_additions();

// Whether valid UTF-8 `text` holds any character of unicode_additions().
bool contains_unicode_additions(std::string_view text);

// Two-letter general category of `c` in Unicode 16.0 ("Cn" if unassigned).
std::string_view general_category(char32_t c);

}  // namespace deepinfer::text
