#include "grammar/json_lexemes.h"

#include "grammar/decimal.h"

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
  for (uint32_t hi = 0; hi < 2; ++hi) {
    uint32_t nibbles = 0;
    for (uint32_t lo = 0; lo < 16; ++lo) {
      if (c.contains(hi * 16 + lo)) nibbles |= 1u << lo;
    }
    if (nibbles) alts.push_back(re_seq({re_literal("\\u00"), re_char('0' + hi), hex_nibbles(nibbles)}));
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
    case Json::value_t::string: return re_literal(json_quote(v.get_ref<const std::string&>()));
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
        items.insert(items.end(), {re_literal(json_quote(key)), ws, re_char(':'), ws, json_value_regex(val, ws)});
      }
      items.insert(items.end(), {ws, re_char('}')});
      return re_seq(std::move(items));
    }
    default: return re_nothing();
  }
}

}  // namespace deepinfer::grammar
