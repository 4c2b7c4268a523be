#include "grammar/regex.h"

#include "grammar/utf8.h"

namespace deepinfer::grammar {
namespace {

Regex make(RegexNode node) { return std::make_shared<const RegexNode>(std::move(node)); }

}  // namespace

Regex re_empty() {
  static const Regex empty = make(RegexNode{});
  return empty;
}

Regex re_nothing() { return re_chars(CodepointSet{}); }

Regex re_chars(CodepointSet chars) {
  RegexNode n;
  n.kind = RegexKind::kChars;
  n.chars = std::move(chars);
  return make(std::move(n));
}

Regex re_char(uint32_t cp) { return re_chars(CodepointSet::single(cp)); }

Regex re_literal(std::string_view utf8) {
  std::vector<Regex> items;
  size_t pos = 0;
  while (pos < utf8.size()) {
    uint32_t cp = 0;
    size_t n = utf8_decode(utf8.substr(pos), &cp);
    if (n == 0) {  // callers pass valid UTF-8; fall back to the raw byte value
      cp = static_cast<uint8_t>(utf8[pos]);
      n = 1;
    }
    items.push_back(re_char(cp));
    pos += n;
  }
  return re_seq(std::move(items));
}

Regex re_seq(std::vector<Regex> items) {
  std::vector<Regex> flat;
  for (auto& it : items) {
    if (it->kind == RegexKind::kEmpty) continue;
    if (it->kind == RegexKind::kConcat) {
      flat.insert(flat.end(), it->items.begin(), it->items.end());
    } else {
      flat.push_back(std::move(it));
    }
  }
  if (flat.empty()) return re_empty();
  if (flat.size() == 1) return flat[0];
  RegexNode n;
  n.kind = RegexKind::kConcat;
  n.items = std::move(flat);
  return make(std::move(n));
}

Regex re_alt(std::vector<Regex> items) {
  std::vector<Regex> flat;
  for (auto& it : items) {
    if (it->kind == RegexKind::kAlt) {
      flat.insert(flat.end(), it->items.begin(), it->items.end());
    } else {
      flat.push_back(std::move(it));
    }
  }
  if (flat.empty()) return re_nothing();
  if (flat.size() == 1) return flat[0];
  RegexNode n;
  n.kind = RegexKind::kAlt;
  n.items = std::move(flat);
  return make(std::move(n));
}

Regex re_repeat(Regex item, uint32_t min, uint32_t max) {
  if (max == 0) return re_empty();
  if (min == 1 && max == 1) return item;
  RegexNode n;
  n.kind = RegexKind::kRepeat;
  n.items.push_back(std::move(item));
  n.min = min;
  n.max = max;
  return make(std::move(n));
}

Regex re_input_start() {
  static const Regex r = make(RegexNode{RegexKind::kInputStart, {}, {}, 0, 0});
  return r;
}

Regex re_input_end() {
  static const Regex r = make(RegexNode{RegexKind::kInputEnd, {}, {}, 0, 0});
  return r;
}

}  // namespace deepinfer::grammar
