#include "grammar/json_lexemes.h"

#include "grammar/decimal.h"

#include <algorithm>
#include <map>
#include <vector>

namespace deepinfer::grammar {
namespace {

Regex hex_nibbles(uint32_t mask16) {  // bit v set: nibble v in either case
  CodepointSet s;
  for (uint32_t v = 0; v < 16; ++v) {
    if (!(mask16 >> v & 1)) continue;
    if (v < 10) {
      s.add('0' + v);
    } else {
      s.add('a' + v - 10);
      s.add('A' + v - 10);
    }
  }
  return re_chars(s);
}

Regex hex_range(uint32_t lo, uint32_t hi) {  // nibbles lo..hi, either case
  return hex_nibbles(((1u << (hi + 1)) - 1) & ~((1u << lo) - 1));
}

// The `width`-digit hex numbers (either case) in [lo, hi], appended as alternatives.
void hex_numbers(uint32_t lo, uint32_t hi, int width, std::vector<Regex>& out, std::vector<Regex> prefix = {}) {
  if (width == 1) {
    prefix.push_back(hex_range(lo, hi));
    out.push_back(re_seq(std::move(prefix)));
    return;
  }
  uint32_t m = 1u << (4 * (width - 1));
  uint32_t hl = lo / m, hh = hi / m;
  auto with = [&](uint32_t a, uint32_t b) {
    std::vector<Regex> p = prefix;
    p.push_back(hex_range(a, b));
    return p;
  };
  if (hl == hh) {
    hex_numbers(lo % m, hi % m, width - 1, out, with(hl, hl));
    return;
  }
  if (lo % m != 0) {
    hex_numbers(lo % m, m - 1, width - 1, out, with(hl, hl));
    ++hl;
  }
  if (hi % m != m - 1) {
    hex_numbers(0, hi % m, width - 1, out, with(hh, hh));
    --hh;
  }
  if (hl <= hh) {
    std::vector<Regex> p = with(hl, hh);
    for (int i = 1; i < width; ++i) p.push_back(hex_range(0, 15));
    out.push_back(re_seq(std::move(p)));
  }
}

// \uXXXX for the UTF-16 code units lo..hi.
Regex unit_escapes(uint32_t lo, uint32_t hi) {
  std::vector<Regex> numbers;
  hex_numbers(lo, hi, 4, numbers);
  return re_seq({re_literal("\\u"), re_alt(std::move(numbers))});
}

// The `width`-digit hex numbers (either case) in the union of `ranges` (sorted, disjoint, within
// one block of 16^width values starting at `base`), as a trie-shaped regex: first digits whose
// remainders are alike share one branch. Deterministic, so large classes (\p{Letter}: hundreds of
// ranges) build small automata quickly.
Regex hex_set(const std::vector<std::pair<uint32_t, uint32_t>>& ranges, uint32_t base, int width) {
  const uint32_t size = 1u << (4 * width);
  if (ranges.empty()) return re_nothing();
  if (ranges.size() == 1 && ranges[0].first == base && ranges[0].second == base + size - 1) {
    return re_repeat(hex_range(0, 15), static_cast<uint32_t>(width), static_cast<uint32_t>(width));
  }
  const uint32_t m = size / 16;
  // Remainder ranges (relative to the digit's block) -> digits that have them.
  std::map<std::vector<std::pair<uint32_t, uint32_t>>, uint32_t> by_rest;
  for (uint32_t d = 0; d < 16; ++d) {
    uint32_t lo = base + d * m, hi = lo + m - 1;
    std::vector<std::pair<uint32_t, uint32_t>> rest;
    for (auto [a, b] : ranges) {
      if (b < lo || a > hi) continue;
      rest.push_back({std::max(a, lo) - lo, std::min(b, hi) - lo});
    }
    if (!rest.empty()) by_rest[rest] |= 1u << d;
  }
  std::vector<Regex> alts;
  for (const auto& [rest, digits] : by_rest) {
    Regex first = hex_nibbles(digits);
    alts.push_back(width == 1 ? first : re_seq({first, hex_set(rest, 0, width - 1)}));
  }
  return re_alt(std::move(alts));
}

// Every JSON spelling of the code points in `c`: raw (UTF-8) unless the character must be escaped,
// the two-character escapes, and \uXXXX (a surrogate pair above the BMP), hex digits in either case.
Regex encode_class(const CodepointSet& c) {
  CodepointSet specials = CodepointSet::range(0, 0x1F);
  specials.add('"');
  specials.add('\\');
  std::vector<Regex> alts{re_chars(c.subtract(specials))};
  if (c.contains('"')) alts.push_back(re_literal("\\\""));
  if (c.contains('\\')) alts.push_back(re_literal("\\\\"));
  if (c.contains('/')) alts.push_back(re_literal("\\/"));
  static constexpr std::pair<uint32_t, char> kShort[] = {{8, 'b'}, {9, 't'}, {10, 'n'}, {12, 'f'}, {13, 'r'}};
  for (auto [cp, ch] : kShort) {
    if (c.contains(cp)) alts.push_back(re_seq({re_char('\\'), re_char(static_cast<uint32_t>(ch))}));
  }
  std::vector<std::pair<uint32_t, uint32_t>> bmp;
  for (const auto& r : c.ranges()) {
    if (r.lo <= 0xFFFF) bmp.push_back({r.lo, std::min<uint32_t>(r.hi, 0xFFFF)});
  }
  if (!bmp.empty()) alts.push_back(re_seq({re_literal("\\u"), hex_set(bmp, 0, 4)}));
  for (const auto& r : c.ranges()) {
    if (r.hi < 0x10000) continue;
    // Above the BMP: high surrogate D800 + (v >> 10), low DC00 + (v & 0x3FF), v = cp - 0x10000.
    uint32_t a = std::max<uint32_t>(r.lo, 0x10000) - 0x10000, b = r.hi - 0x10000;
    auto pair = [&](uint32_t h1, uint32_t h2, uint32_t l1, uint32_t l2) {
      alts.push_back(re_seq({unit_escapes(0xD800 + h1, 0xD800 + h2), unit_escapes(0xDC00 + l1, 0xDC00 + l2)}));
    };
    uint32_t h1 = a >> 10, h2 = b >> 10, l1 = a & 0x3FF, l2 = b & 0x3FF;
    if (h1 == h2) {
      pair(h1, h1, l1, l2);
      continue;
    }
    if (l1 != 0) {
      pair(h1, h1, l1, 0x3FF);
      ++h1;
    }
    if (l2 != 0x3FF) {
      pair(h2, h2, 0, l2);
      --h2;
    }
    if (h1 <= h2) pair(h1, h2, 0, 0x3FF);
  }
  return re_alt(std::move(alts));
}

Regex number_literal(const Json& v) {
  auto d = Decimal::parse(v.dump());
  if (!d) return re_literal(v.dump());
  std::string sign = d.value().negative ? "-" : "";
  if (d.value().is_integer()) {
    return re_seq({re_literal(sign + d.value().integer), re_opt(re_seq({re_char('.'), re_plus(re_char('0'))}))});
  }
  return re_seq({re_literal(sign + d.value().integer + "." + d.value().fraction), re_star(re_char('0'))});
}

}  // namespace

Regex json_encode(const Regex& decoded) { return re_map_chars(decoded, encode_class); }

Regex json_string_char() { return encode_class(CodepointSet::all()); }

Regex json_string_literal(std::string_view utf8) { return re_seq({re_char('"'), json_encode(re_literal(utf8)), re_char('"')}); }

std::string json_quote(std::string_view utf8) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : utf8) {
    auto c = static_cast<uint8_t>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

Regex json_whitespace(const GrammarOptions& options) {
  if (options.whitespace == Whitespace::kCompact) return re_empty();
  CodepointSet ws;
  ws.add(' ');
  ws.add('\t');
  ws.add('\n');
  ws.add('\r');
  uint32_t max = options.max_whitespace_run == 0 ? kUnbounded : options.max_whitespace_run;
  return re_repeat(re_chars(ws), 0, max);
}

Regex json_number(bool integers_only) {
  Regex digits = re_chars(CodepointSet::range('0', '9'));
  Regex integer = re_seq({re_opt(re_char('-')),
                          re_alt({re_char('0'), re_seq({re_chars(CodepointSet::range('1', '9')), re_star(digits)})})});
  if (integers_only) return integer;
  CodepointSet e;
  e.add('e');
  e.add('E');
  CodepointSet sign;
  sign.add('+');
  sign.add('-');
  return re_seq({integer, re_opt(re_seq({re_char('.'), re_plus(digits)})),
                 re_opt(re_seq({re_chars(e), re_opt(re_chars(sign)), re_plus(digits)}))});
}

Regex json_value_regex(const Json& v, const Regex& ws) {
  switch (v.type()) {
    case Json::value_t::null: return re_literal("null");
    case Json::value_t::boolean: return re_literal(v.get<bool>() ? "true" : "false");
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return number_literal(v);
    case Json::value_t::string: return json_string_literal(v.get_ref<const std::string&>());
    case Json::value_t::array: {
      if (v.empty()) return re_seq({re_char('['), ws, re_char(']')});
      std::vector<Regex> items{re_char('['), ws};
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) items.insert(items.end(), {ws, re_char(','), ws});
        items.push_back(json_value_regex(v[i], ws));
      }
      items.insert(items.end(), {ws, re_char(']')});
      return re_seq(std::move(items));
    }
    case Json::value_t::object: {
      if (v.empty()) return re_seq({re_char('{'), ws, re_char('}')});
      std::vector<Regex> items{re_char('{'), ws};
      bool first = true;
      for (const auto& [key, val] : v.items()) {
        if (!first) items.insert(items.end(), {ws, re_char(','), ws});
        first = false;
        items.insert(items.end(), {json_string_literal(key), ws, re_char(':'), ws, json_value_regex(val, ws)});
      }
      items.insert(items.end(), {ws, re_char('}')});
      return re_seq(std::move(items));
    }
    default: return re_nothing();
  }
}

}  // namespace deepinfer::grammar
