#include "grammar/regex_parser.h"

#include "grammar/unicode_properties.h"
#include "grammar/utf8.h"

#include <utf8proc.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

namespace deepinfer::grammar {
namespace {

// The set closed under case equivalence (ECMAScript's ignoreCase: two characters match when their
// case-folded forms are equal, e.g. k, K and the Kelvin sign).
CodepointSet fold_case(const CodepointSet& set) {
  // Cased characters grouped by their folded form (classes of two or more), built once.
  struct Classes {
    std::vector<std::vector<uint32_t>> classes;
    std::vector<std::pair<uint32_t, size_t>> members;  // (code point, its class), sorted
  };
  static const Classes folded = [] {
    std::map<uint32_t, std::vector<uint32_t>> by_key;
    for (uint32_t cp = 0; cp < 0x20000; ++cp) {
      auto c = static_cast<utf8proc_int32_t>(cp);
      auto key = static_cast<uint32_t>(utf8proc_tolower(utf8proc_toupper(c)));
      if (key != cp || utf8proc_toupper(c) != c) by_key[key].push_back(cp);
    }
    Classes out;
    for (auto& [key, cps] : by_key) {
      if (std::find(cps.begin(), cps.end(), key) == cps.end()) cps.push_back(key);
      if (cps.size() < 2) continue;
      for (uint32_t cp : cps) out.members.push_back({cp, out.classes.size()});
      out.classes.push_back(std::move(cps));
    }
    std::sort(out.members.begin(), out.members.end());
    return out;
  }();
  CodepointSet out = set;
  for (const auto& [cp, cls] : folded.members) {
    if (!set.contains(cp)) continue;
    for (uint32_t other : folded.classes[cls]) out.add(other);
  }
  return out;
}

// Nesting limit: recursion stays bounded (a pattern at the limit compiles on a 256 KB thread stack).
constexpr int kMaxDepth = 200;
// Repetition counts above this are rejected: the automaton would be too large anyway.
constexpr uint32_t kMaxRepeat = 100000;

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  Result<Regex> parse() {
    DI_TRYV(decode());
    DI_TRY(r, disjunction(0));
    if (pos_ < cp_.size()) return fail("unmatched ')'");
    return r;
  }

 private:
  Result<void> decode() {
    size_t i = 0;
    while (i < src_.size()) {
      uint32_t cp = 0;
      size_t n = utf8_decode(src_.substr(i), &cp);
      if (n == 0) return make_error(Code::kGrammar, "regex: invalid UTF-8 at byte {}", i);
      cp_.push_back(cp);
      i += n;
    }
    return ok();
  }

  [[gnu::noinline]] Error fail(std::string_view what) const {
    return make_error(Code::kGrammar, "regex: {} at position {} in /{}/", what, pos_, src_);
  }

  bool at_end() const { return pos_ >= cp_.size(); }
  uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < cp_.size() ? cp_[pos_ + ahead] : 0xFFFFFFFF; }
  bool eat(uint32_t c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }

  Result<Regex> disjunction(int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    std::vector<Regex> alts;
    DI_TRY(first, alternative(depth));
    alts.push_back(first);
    while (eat('|')) {
      DI_TRY(next, alternative(depth));
      alts.push_back(next);
    }
    return re_alt(std::move(alts));
  }

  Result<Regex> alternative(int depth) {
    std::vector<Regex> items;
    while (!at_end() && peek() != '|' && peek() != ')') {
      DI_TRY(t, term(depth));
      items.push_back(t);
    }
    return re_seq(std::move(items));
  }

  Result<Regex> term(int depth) {
    uint32_t c = peek();
    if (c == '^') {
      ++pos_;
      return re_input_start();
    }
    if (c == '$') {
      ++pos_;
      return re_input_end();
    }
    DI_TRY(atom_, atom(depth));
    Regex a = atom_;
    return quantified(a);
  }

  // Reads {n}, {n,}, {n,m} at pos_ without consuming on failure (Annex B: a lone '{' is literal).
  [[gnu::noinline]] bool braces(uint32_t* lo, uint32_t* hi) {
    size_t save = pos_;
    if (!eat('{')) return false;
    auto number = [&](uint32_t* out) {
      size_t start = pos_;
      uint64_t v = 0;
      while (!at_end() && peek() >= '0' && peek() <= '9') {
        v = std::min<uint64_t>(v * 10 + (peek() - '0'), uint64_t{kMaxRepeat} + 1);
        ++pos_;
      }
      *out = static_cast<uint32_t>(v);
      return pos_ > start;
    };
    if (!number(lo)) {
      pos_ = save;
      return false;
    }
    *hi = *lo;
    if (eat(',')) {
      if (!number(hi)) *hi = kUnbounded;
    }
    if (!eat('}')) {
      pos_ = save;
      return false;
    }
    return true;
  }

  [[gnu::noinline]] Result<Regex> quantified(Regex a) {
    uint32_t lo = 0, hi = 0;
    uint32_t c = peek();
    if (c == '*') {
      ++pos_;
      lo = 0;
      hi = kUnbounded;
    } else if (c == '+') {
      ++pos_;
      lo = 1;
      hi = kUnbounded;
    } else if (c == '?') {
      ++pos_;
      lo = 0;
      hi = 1;
    } else if (c == '{') {
      if (!braces(&lo, &hi)) return a;
      if (lo > kMaxRepeat || (hi != kUnbounded && hi > kMaxRepeat)) return fail("repetition count too large");
      if (hi < lo) return fail("numbers out of order in {} quantifier");
    } else {
      return a;
    }
    eat('?');  // lazy and greedy quantifiers match the same set of strings
    if (peek() == '*' || peek() == '+' || peek() == '?') return fail("nothing to repeat");
    if (peek() == '{') {
      uint32_t a2, b2;
      size_t save = pos_;
      if (braces(&a2, &b2)) {
        pos_ = save;
        return fail("nothing to repeat");
      }
    }
    return re_repeat(std::move(a), lo, hi);
  }

  // Only groups recurse; the other atoms live in simple_atom() so that the recursive frames stay
  // small (deep nesting must fit a small thread stack).
  Result<Regex> atom(int depth) {
    if (peek() != '(') {
      DI_TRY(a, simple_atom());
      return ignore_case_ ? fold_atom(a) : a;
    }
    ++pos_;
    DI_TRY(kind, group_prefix());
    if (kind == Group::kFlags) return re_empty();  // (?i): the rest of the enclosing group
    bool outer = ignore_case_;
    if (kind == Group::kIgnoreCase || kind == Group::kMatchCase) ignore_case_ = kind == Group::kIgnoreCase;
    DI_TRY(inner, disjunction(depth + 1));
    ignore_case_ = outer;
    if (!eat(')')) return fail("missing ')'");
    return inner;
  }

  enum class Group { kPlain, kFlags, kIgnoreCase, kMatchCase };

  // After '(': the group kind (capturing, non-capturing, named, or the inline flag i as (?i),
  // (?i:...), (?-i:...)); lookaround and other flags are errors.
  [[gnu::noinline]] Result<Group> group_prefix() {
    if (!eat('?')) return Group::kPlain;
    if (eat(':')) return Group::kPlain;
    if (peek() == '<' && peek(1) != '=' && peek(1) != '!') {
      ++pos_;
      while (!at_end() && peek() != '>') ++pos_;
      if (!eat('>')) return fail("unterminated group name");
      return Group::kPlain;
    }
    if (peek() == '=' || peek() == '!' || peek() == '<') return fail("lookaround assertions are not supported");
    bool off = eat('-');
    if (peek() != 'i') {
      if (peek() < 0x80 && std::isalpha(static_cast<int>(peek()))) return fail("only the inline flag 'i' is supported");
      return fail("unsupported group syntax");
    }
    ++pos_;
    if (eat(')')) {
      ignore_case_ = !off;
      return Group::kFlags;
    }
    if (!eat(':')) return fail("only the inline flag 'i' is supported");
    return off ? Group::kMatchCase : Group::kIgnoreCase;
  }

  // Under the flag i, a character or class also matches the other cases of its members.
  static Regex fold_atom(const Regex& a) { return a->kind == RegexKind::kChars ? re_chars(fold_case(a->chars)) : a; }

  [[gnu::noinline]] Result<Regex> simple_atom() {
    uint32_t c = peek();
    switch (c) {
      case '.':
        ++pos_;
        return re_chars(class_dot());
      case ')': return fail("unmatched ')'");
      case '[': return char_class();
      case '\\': return atom_escape();
      case '*':
      case '+':
      case '?': return fail("nothing to repeat");
      case '{': {
        uint32_t a, b;
        size_t save = pos_;
        if (braces(&a, &b)) {
          pos_ = save;
          return fail("nothing to repeat");
        }
        ++pos_;
        return re_char('{');
      }
      default: ++pos_; return re_char(c);
    }
  }

  [[gnu::noinline]] Result<Regex> atom_escape() {
    ++pos_;  // backslash
    if (at_end()) return fail("trailing backslash");
    uint32_t c = peek();
    if (c == 'b' || c == 'B') return fail("word-boundary assertions are not supported");
    if (c >= '1' && c <= '9') return fail("backreferences are not supported");
    if (c == 'k') return fail("named backreferences are not supported");
    DI_TRY(set, class_escape(/*in_class=*/false));
    return re_chars(set);
  }

  Result<uint32_t> hex_digits(size_t count) {
    uint32_t v = 0;
    for (size_t i = 0; i < count; ++i) {
      int d = hex_value(peek());
      if (d < 0) return fail("invalid hexadecimal escape");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  static int hex_value(uint32_t c) {
    if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
    return -1;
  }

  // After the backslash. Returns the set one escape stands for.
  Result<CodepointSet> class_escape(bool in_class) {
    uint32_t c = peek();
    ++pos_;
    switch (c) {
      case 'd': return class_digit();
      case 'D': return class_digit().complement();
      case 'w': return class_word();
      case 'W': return class_word().complement();
      case 's': return class_space();
      case 'S': return class_space().complement();
      case 't': return CodepointSet::single('\t');
      case 'n': return CodepointSet::single('\n');
      case 'v': return CodepointSet::single('\v');
      case 'f': return CodepointSet::single('\f');
      case 'r': return CodepointSet::single('\r');
      case 'b':
        if (in_class) return CodepointSet::single('\b');
        break;
      case '-':
        if (in_class) return CodepointSet::single('-');
        break;
      case '0':
        if (peek() >= '0' && peek() <= '9') return fail("octal escapes are not supported");
        return CodepointSet::single(0);
      case 'c': {
        uint32_t l = peek();
        if ((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) {
          ++pos_;
          return CodepointSet::single(l % 32);
        }
        return fail("invalid control escape");
      }
      case 'x': {
        DI_TRY(v, hex_digits(2));
        return CodepointSet::single(v);
      }
      case 'u': {
        if (eat('{')) {
          uint32_t v = 0;
          size_t start = pos_;
          while (hex_value(peek()) >= 0) {
            v = v * 16 + static_cast<uint32_t>(hex_value(peek()));
            if (v > CodepointSet::kMaxCodepoint) return fail("code point out of range");
            ++pos_;
          }
          if (pos_ == start || !eat('}')) return fail("invalid \\u{...} escape");
          return CodepointSet::single(v);
        }
        DI_TRY(hi, hex_digits(4));
        uint32_t v = hi;
        // A surrogate pair written as two escapes is one code point.
        if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
          size_t save = pos_;
          pos_ += 2;
          auto lo = hex_digits(4);
          if (lo && lo.value() >= 0xDC00 && lo.value() <= 0xDFFF) {
            return CodepointSet::single(0x10000 + ((v - 0xD800) << 10) + (lo.value() - 0xDC00));
          }
          pos_ = save;
        }
        if (v >= 0xD800 && v <= 0xDFFF) return fail("lone surrogate escapes are not supported");
        return CodepointSet::single(v);
      }
      case 'p':
      case 'P': {
        if (!eat('{')) return fail("\\p needs a {property}");
        std::string name;
        while (!at_end() && peek() != '}' && peek() < 0x80) name += static_cast<char>(cp_[pos_++]);
        if (!eat('}')) return fail("unterminated \\p{...}");
        auto set = unicode_property(name);
        if (!set) return fail("unsupported Unicode property '" + name + "' (General_Category values, Any, ASCII and Assigned are)");
        return c == 'p' ? *set : set->complement();
      }
      default: break;
    }
    // Identity escapes: any character but letters and digits (\- \: \_ \@ \# \  \' ... as schemas
    // written for non-Unicode mode use them); unknown letter escapes stay errors.
    if (c != 0xFFFFFFFF && !(c < 0x80 && std::isalnum(static_cast<int>(c)))) return CodepointSet::single(c);
    return fail("invalid escape");
  }

  [[gnu::noinline]] Result<Regex> char_class() {
    ++pos_;  // [
    bool negate = eat('^');
    CodepointSet set;
    while (true) {
      if (at_end()) return fail("unterminated character class");
      if (eat(']')) break;  // "[]" matches nothing and "[^]" anything, as in ECMAScript
      DI_TRY(lo_set, class_atom());
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFF) {
        ++pos_;
        DI_TRY(hi_set, class_atom());
        if (lo_set.ranges().size() != 1 || lo_set.size() != 1 || hi_set.ranges().size() != 1 || hi_set.size() != 1) {
          return fail("character class escape used as a range bound");
        }
        uint32_t lo = lo_set.ranges()[0].lo, hi = hi_set.ranges()[0].lo;
        if (lo > hi) return fail("range out of order in character class");
        set.add(lo, hi);
      } else {
        set.add(lo_set);
      }
    }
    if (ignore_case_) set = fold_case(set);
    return re_chars(negate ? set.complement() : set);
  }

  Result<CodepointSet> class_atom() {
    uint32_t c = peek();
    if (c == '\\') {
      ++pos_;
      if (at_end()) return fail("trailing backslash");
      return class_escape(/*in_class=*/true);
    }
    ++pos_;
    return CodepointSet::single(c);
  }

  std::string_view src_;
  std::vector<uint32_t> cp_;
  size_t pos_ = 0;
  bool ignore_case_ = false;
};

}  // namespace

Result<Regex> parse_ecmascript_regex(std::string_view pattern) { return Parser(pattern).parse(); }

CodepointSet class_digit() { return CodepointSet::range('0', '9'); }

CodepointSet class_word() {
  CodepointSet s = CodepointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_');
  return s;
}

CodepointSet class_space() {
  CodepointSet s;
  s.add('\t', '\r');  // \t \n \v \f \r
  s.add(' ');
  s.add(0xA0);
  s.add(0x1680);
  s.add(0x2000, 0x200A);
  s.add(0x2028, 0x2029);
  s.add(0x202F);
  s.add(0x205F);
  s.add(0x3000);
  s.add(0xFEFF);
  return s;
}

CodepointSet class_dot() {
  CodepointSet s;
  s.add('\n');
  s.add('\r');
  s.add(0x2028, 0x2029);
  return s.complement();
}

}  // namespace deepinfer::grammar
