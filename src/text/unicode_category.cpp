#include "text/unicode_category.h"

#include "text/utf8.h"

#include <utf8proc.h>

#include <algorithm>
#include <bitset>
#include <cstdint>
#include <cstring>

namespace deepinfer::text {
namespace {

const CategoryRange* find_addition(char32_t c) {
  const auto ranges = unicode_additions();
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                                   [](char32_t v, const CategoryRange& r) { return v < r.first; });
  return it != ranges.begin() && c <= std::prev(it)->last ? &*std::prev(it) : nullptr;
}

}  // namespace

bool contains_unicode_additions(std::string_view text) {
  // Most text is checked against a bitmap of the BMP; astral characters by search.
  static const std::bitset<0x10000> bmp = [] {
    std::bitset<0x10000> bits;
    for (const CategoryRange& r : unicode_additions()) {
      for (char32_t c = r.first; c <= r.last && c < 0x10000; ++c) bits.set(c);
    }
    return bits;
  }();
  for (std::size_t i = 0; i < text.size();) {
    uint64_t word;  // skip ASCII eight bytes at a time
    while (i + 8 <= text.size() && (std::memcpy(&word, text.data() + i, 8), (word & 0x8080808080808080ull) == 0)) i += 8;
    if (i == text.size()) break;
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0xE0) {  // below U+0800, where there are no additions (the first is U+0897)
      i += lead < 0x80 ? 1 : 2;
      continue;
    }
    const char32_t c = next_code_point(text, i);
    if (c < 0x10000 ? bmp.test(c) : find_addition(c) != nullptr) return true;
  }
  return false;
}

std::string_view general_category(char32_t c) {
  // Indexed by utf8proc_category_t.
  static constexpr std::string_view kNames[] = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd",
                                                "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
                                                "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  if (cat != UTF8PROC_CATEGORY_CN) return kNames[cat];
  const CategoryRange* added = find_addition(c);
  return added != nullptr ? std::string_view(added->category, 2) : "Cn";
}

}  // namespace deepinfer::text
