#include "grammar/ebnf_compiler.h"

#include "grammar/compile_budget.h"
#include "grammar/regex.h"
#include "grammar/utf8.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer::grammar {
namespace {

constexpr uint32_t kMaxRepeat = 10000;
// Nesting limit: recursion stays bounded (a spec at the limit compiles on a 256 KB thread stack).
constexpr int kMaxDepth = 100;

struct Expr {
  enum class Kind { kAlt, kSeq, kChars, kRef, kRepeat };
  Kind kind = Kind::kSeq;
  std::vector<Expr> items;
  Regex regex;      // kChars: a literal or class
  std::string ref;  // kRef
  uint32_t min = 0, max = 0;
};

struct RuleDef {
  std::string name;
  Expr body;
  size_t line = 0;
};

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  Result<std::vector<RuleDef>> parse() {
    std::vector<RuleDef> rules;
    skip_space();
    while (pos_ < src_.size()) {
      RuleDef def;
      def.line = line();
      DI_TRY(name, identifier());
      def.name = name;
      skip_space();
      if (src_.substr(pos_, 3) != "::=") return fail(fmt::format("expected '::=' after rule name '{}'", def.name));
      pos_ += 3;
      skip_space();
      DI_TRY(body, alternatives(0));
      def.body = std::move(body);
      rules.push_back(std::move(def));
      skip_space();
    }
    return rules;
  }

 private:
  [[gnu::noinline]] Error fail(std::string_view what) const {
    return make_error(Code::kGrammar, "ebnf: {} at line {}", what, line());
  }

  // Line of pos_, counted incrementally (pos_ only grows): a rescan per rule was quadratic.
  size_t line() const {
    for (; line_pos_ < pos_ && line_pos_ < src_.size(); ++line_pos_) line_ += src_[line_pos_] == '\n';
    return line_;
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  }

  void skip_space() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  Result<std::string> identifier() {
    size_t start = pos_;
    while (pos_ < src_.size() && name_char(src_[pos_])) ++pos_;
    if (pos_ == start) return fail("expected a rule name");
    return std::string(src_.substr(start, pos_ - start));
  }

  // True when the input at pos_ is `name ::=` (the start of the next rule).
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < src_.size() && name_char(src_[p])) ++p;
    if (p == pos_) return false;
    while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\n' || src_[p] == '\r')) ++p;
    return src_.substr(p, 3) == "::=";
  }

  Result<Expr> alternatives(int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    Expr alt;
    alt.kind = Expr::Kind::kAlt;
    DI_TRY(first, sequence(depth));
    alt.items.push_back(std::move(first));
    while (pos_ < src_.size() && src_[pos_] == '|') {
      ++pos_;
      skip_space();
      DI_TRY(next, sequence(depth));
      alt.items.push_back(std::move(next));
    }
    if (alt.items.size() == 1) return std::move(alt.items[0]);
    return alt;
  }

  Result<Expr> sequence(int depth) {
    Expr seq;
    seq.kind = Expr::Kind::kSeq;
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == '|' || c == ')') break;
      if (name_char(c) && at_rule_start()) break;
      DI_TRY(item, primary(depth));
      skip_space();
      DI_TRY(q, quantified(std::move(item)));
      seq.items.push_back(std::move(q));
      skip_space();
    }
    return seq;
  }

  [[gnu::noinline]] Result<Expr> quantified(Expr item) {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      uint32_t lo, hi;
      if (c == '*') {
        lo = 0;
        hi = kUnbounded;
        ++pos_;
      } else if (c == '+') {
        lo = 1;
        hi = kUnbounded;
        ++pos_;
      } else if (c == '?') {
        lo = 0;
        hi = 1;
        ++pos_;
      } else if (c == '{') {
        ++pos_;
        skip_space();
        DI_TRY(a, number());
        lo = a;
        hi = a;
        skip_space();
        if (pos_ < src_.size() && src_[pos_] == ',') {
          ++pos_;
          skip_space();
          if (pos_ < src_.size() && src_[pos_] == '}') {
            hi = kUnbounded;
          } else {
            DI_TRY(b, number());
            hi = b;
          }
          skip_space();
        }
        if (pos_ >= src_.size() || src_[pos_] != '}') return fail("expected '}' in repetition");
        ++pos_;
        if (hi < lo) return fail("repetition bounds out of order");
      } else {
        break;
      }
      // Stacked `?`, `*` and `+` mean one of them ((x+)* is x*): one repetition instead of nested
      // ones, which an automaton or the parser would explore in every way of splitting.
      const auto simple = [](uint32_t a, uint32_t b) { return a <= 1 && (b == 1 || b == kUnbounded); };
      if (item.kind == Expr::Kind::kRepeat && simple(item.min, item.max) && simple(lo, hi)) {
        item.min = std::min(item.min, lo);
        item.max = item.max == kUnbounded || hi == kUnbounded ? kUnbounded : 1;
      } else {
        Expr r;
        r.kind = Expr::Kind::kRepeat;
        r.items.push_back(std::move(item));
        r.min = lo;
        r.max = hi;
        item = std::move(r);
      }
      skip_space();
    }
    return item;
  }

  Result<uint32_t> number() {
    size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(src_[pos_] - '0');
      if (v > kMaxRepeat) return fail(fmt::format("repetition count above {}", kMaxRepeat));
      ++pos_;
    }
    if (pos_ == start) return fail("expected a number");
    return static_cast<uint32_t>(v);
  }

  // Only groups recurse; the other primaries live in simple_primary() so that the recursive
  // frames stay small (deep nesting must fit a small thread stack).
  Result<Expr> primary(int depth) {
    if (src_[pos_] != '(') return simple_primary();
    ++pos_;
    skip_space();
    DI_TRY(inner, alternatives(depth + 1));
    skip_space();
    if (pos_ >= src_.size() || src_[pos_] != ')') return fail("expected ')'");
    ++pos_;
    return inner;
  }

  [[gnu::noinline]] Result<Expr> simple_primary() {
    char c = src_[pos_];
    Expr e;
    if (c == '"') {
      ++pos_;
      std::vector<Regex> chars;
      while (true) {
        if (pos_ >= src_.size()) return fail("unterminated string");
        if (src_[pos_] == '"') {
          ++pos_;
          break;
        }
        DI_TRY(cp, char_or_escape());
        chars.push_back(re_char(cp));
      }
      e.kind = Expr::Kind::kChars;
      e.regex = re_seq(std::move(chars));
      return e;
    }
    if (c == '[') {
      ++pos_;
      bool negate = false;
      if (pos_ < src_.size() && src_[pos_] == '^') {
        negate = true;
        ++pos_;
      }
      CodepointSet set;
      while (true) {
        if (pos_ >= src_.size()) return fail("unterminated character class");
        if (src_[pos_] == ']') {
          ++pos_;
          break;
        }
        DI_TRY(lo, char_or_escape());
        uint32_t hi = lo;
        if (pos_ + 1 < src_.size() && src_[pos_] == '-' && src_[pos_ + 1] != ']') {
          ++pos_;
          DI_TRY(h, char_or_escape());
          hi = h;
          if (hi < lo) return fail("character range out of order");
        }
        set.add(lo, hi);
      }
      e.kind = Expr::Kind::kChars;
      e.regex = re_chars(negate ? set.complement() : set);
      return e;
    }
    if (c == '.') {
      ++pos_;
      e.kind = Expr::Kind::kChars;
      e.regex = re_chars(CodepointSet::all());
      return e;
    }
    if (name_char(c)) {
      DI_TRY(name, identifier());
      e.kind = Expr::Kind::kRef;
      e.ref = name;
      return e;
    }
    return fail(fmt::format("unexpected character '{}'", c));
  }

  Result<uint32_t> hex(size_t digits) {
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      if (pos_ >= src_.size()) return fail("truncated escape");
      char c = src_[pos_++];
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) return fail("invalid hexadecimal escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > CodepointSet::kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) return fail("escape is not a Unicode scalar value");
    return v;
  }

  Result<uint32_t> char_or_escape() {
    if (src_[pos_] != '\\') {
      uint32_t cp = 0;
      size_t n = utf8_decode(src_.substr(pos_), &cp);
      if (n == 0) return fail("invalid UTF-8");
      pos_ += n;
      return cp;
    }
    ++pos_;
    if (pos_ >= src_.size()) return fail("trailing backslash");
    char c = src_[pos_++];
    switch (c) {
      case 'n': return uint32_t{'\n'};
      case 'r': return uint32_t{'\r'};
      case 't': return uint32_t{'\t'};
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/': return static_cast<uint32_t>(c);
      default: return fail(fmt::format("unknown escape '\\{}'", c));
    }
  }

  std::string_view src_;
  size_t pos_ = 0;
  mutable size_t line_ = 1, line_pos_ = 0;
};

// Lowers parsed rules. A rule is regular when it is not recursive and references only regular
// rules; regular expressions (and references to regular rules) merge into single terminals, up to
// an inlining depth past which a rule stays a rule. Everything walks the rules with loops in
// dependency order, so chains of thousands of rules lower in linear time without recursion.
class Lowering {
 public:
  explicit Lowering(std::vector<RuleDef> defs) : defs_(std::move(defs)) {}

  Result<Grammar> run() {
    for (size_t i = 0; i < defs_.size(); ++i) {
      if (!index_.emplace(defs_[i].name, i).second) {
        return make_error(Code::kGrammar, "ebnf: rule '{}' is defined twice (line {})", defs_[i].name, defs_[i].line);
      }
    }
    auto root_it = index_.find("root");
    if (root_it == index_.end()) return make_error(Code::kGrammar, "ebnf: no 'root' rule");
    refs_.resize(defs_.size());
    depth_.assign(defs_.size(), 0);
    for (size_t i = 0; i < defs_.size(); ++i) {
      DI_TRYV(collect_refs(defs_[i].body, defs_[i].name, refs_[i]));
      depth_[i] = expr_depth(defs_[i].body);
    }
    classify();
    rule_ids_.assign(defs_.size(), UINT32_MAX);
    uint32_t root = rule_id(root_it->second);
    while (!pending_.empty()) {
      size_t i = pending_.back();
      pending_.pop_back();
      DI_TRYV(CompileBudget::spend(1));
      DI_TRYV(lower_rule(i));
    }
    return builder_.build(root);
  }

 private:
  // Inlined regular rules nest their expressions into one regex at most this deep.
  static constexpr uint32_t kMaxInlineDepth = 64;

  Result<void> collect_refs(const Expr& e, const std::string& in_rule, std::vector<size_t>& out) {
    if (e.kind == Expr::Kind::kRef) {
      auto it = index_.find(e.ref);
      if (it == index_.end()) return make_error(Code::kGrammar, "ebnf: rule '{}' references undefined rule '{}'", in_rule, e.ref);
      out.push_back(it->second);
    }
    for (const auto& it : e.items) {
      DI_TRYV(collect_refs(it, in_rule, out));
    }
    return ok();
  }

  static uint32_t expr_depth(const Expr& e) {
    uint32_t d = 0;
    for (const auto& it : e.items) d = std::max(d, expr_depth(it));
    return d + 1;
  }

  // Tarjan's strongly connected components (iteratively): components come out callees first, so
  // a rule is classified after every rule it references. Rules in a cycle are recursive.
  void classify() {
    const size_t n = defs_.size();
    std::vector<uint32_t> index(n, UINT32_MAX), low(n, 0);
    std::vector<uint8_t> on_stack(n, 0);
    std::vector<size_t> stack;
    uint32_t next_index = 0;
    regular_.assign(n, 0);
    height_.assign(n, 0);
    struct Frame {
      size_t rule, edge;
    };
    for (size_t start = 0; start < n; ++start) {
      if (index[start] != UINT32_MAX) continue;
      std::vector<Frame> frames{{start, 0}};
      index[start] = low[start] = next_index++;
      stack.push_back(start);
      on_stack[start] = 1;
      while (!frames.empty()) {
        Frame& f = frames.back();
        if (f.edge < refs_[f.rule].size()) {
          size_t to = refs_[f.rule][f.edge++];
          if (index[to] == UINT32_MAX) {
            index[to] = low[to] = next_index++;
            stack.push_back(to);
            on_stack[to] = 1;
            frames.push_back({to, 0});
          } else if (on_stack[to]) {
            low[f.rule] = std::min(low[f.rule], index[to]);
          }
          continue;
        }
        size_t v = f.rule;
        frames.pop_back();
        if (!frames.empty()) low[frames.back().rule] = std::min(low[frames.back().rule], low[v]);
        if (low[v] != index[v]) continue;
        std::vector<size_t> component;
        size_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          component.push_back(w);
        } while (w != v);
        bool recursive = component.size() > 1 || std::find(refs_[v].begin(), refs_[v].end(), v) != refs_[v].end();
        if (recursive) continue;  // irregular
        bool regular = true;
        uint32_t height = 0;
        for (size_t r : refs_[v]) {
          regular = regular && regular_[r];
          if (regular_[r]) height = std::max(height, height_[r]);
        }
        height += depth_[v];
        if (regular && height <= kMaxInlineDepth) {
          regular_[v] = 1;
          height_[v] = height;
          regex_.emplace(v, to_regex(defs_[v].body));
        }
      }
    }
  }

  bool expr_regular(const Expr& e) const {
    if (e.kind == Expr::Kind::kRef) return regular_[index_.at(e.ref)] != 0;
    for (const auto& it : e.items) {
      if (!expr_regular(it)) return false;
    }
    return true;
  }

  // For a regular expression: referenced rules were converted first (dependency order).
  Regex to_regex(const Expr& e) const {
    switch (e.kind) {
      case Expr::Kind::kChars: return e.regex;
      case Expr::Kind::kRef: return regex_.at(index_.at(e.ref));
      case Expr::Kind::kSeq:
      case Expr::Kind::kAlt: {
        std::vector<Regex> items;
        for (const auto& it : e.items) items.push_back(to_regex(it));
        return e.kind == Expr::Kind::kSeq ? re_seq(std::move(items)) : re_alt(std::move(items));
      }
      case Expr::Kind::kRepeat: return re_repeat(to_regex(e.items[0]), e.min, e.max);
    }
    return re_empty();
  }

  // The grammar rule of definition i, lowered when first referenced.
  uint32_t rule_id(size_t i) {
    if (rule_ids_[i] == UINT32_MAX) {
      rule_ids_[i] = builder_.add_rule(defs_[i].name);
      pending_.push_back(i);
    }
    return rule_ids_[i];
  }

  Result<void> lower_rule(size_t i) {
    const Expr& body = defs_[i].body;
    uint32_t rule = rule_ids_[i];
    if (body.kind == Expr::Kind::kAlt && !expr_regular(body)) {
      for (const auto& alt : body.items) {
        DI_TRY(seq, symbols(alt));
        builder_.add_production(rule, std::move(seq));
      }
      return ok();
    }
    DI_TRY(seq, symbols(body));
    builder_.add_production(rule, std::move(seq));
    return ok();
  }

  // The symbols of one production for expression `e`.
  Result<std::vector<Symbol>> symbols(const Expr& e) {
    std::vector<Symbol> out;
    if (e.kind == Expr::Kind::kSeq && !expr_regular(e)) {
      // Runs of regular items merge into one terminal.
      std::vector<Regex> run;
      auto flush = [&]() -> Result<void> {
        if (run.empty()) return ok();
        DI_TRY(t, builder_.add_regex_terminal(re_seq(std::move(run))));
        out.push_back(Symbol::term(t));
        run.clear();
        return ok();
      };
      for (const auto& it : e.items) {
        if (expr_regular(it)) {
          run.push_back(to_regex(it));
          continue;
        }
        DI_TRYV(flush());
        DI_TRY(s, symbol(it));
        out.push_back(s);
      }
      DI_TRYV(flush());
      return out;
    }
    if (e.kind == Expr::Kind::kSeq && e.items.empty()) return out;
    DI_TRY(s, symbol(e));
    out.push_back(s);
    return out;
  }

  Result<Symbol> symbol(const Expr& e) {
    if (expr_regular(e)) {
      DI_TRY(t, builder_.add_regex_terminal(to_regex(e)));
      return Symbol::term(t);
    }
    switch (e.kind) {
      case Expr::Kind::kRef: return Symbol::rule(rule_id(index_.at(e.ref)));
      case Expr::Kind::kSeq: {
        uint32_t r = builder_.add_rule(fmt::format("seq{}", builder_.num_rules()));
        DI_TRY(seq, symbols(e));
        builder_.add_production(r, std::move(seq));
        return Symbol::rule(r);
      }
      case Expr::Kind::kAlt: {
        uint32_t r = builder_.add_rule(fmt::format("alt{}", builder_.num_rules()));
        for (const auto& alt : e.items) {
          DI_TRY(seq, symbols(alt));
          builder_.add_production(r, std::move(seq));
        }
        return Symbol::rule(r);
      }
      case Expr::Kind::kRepeat: return repeat(e);
      case Expr::Kind::kChars: break;
    }
    return make_error(Code::kInternal, "ebnf: unexpected expression");
  }

  // x{min,max}: min copies, then up to max-min optional ones (nested), or a left-recursive loop.
  Result<Symbol> repeat(const Expr& e) {
    DI_TRY(item, symbol(e.items[0]));
    uint32_t r = builder_.add_rule(fmt::format("rep{}", builder_.num_rules()));
    std::vector<Symbol> prefix(e.min, item);
    if (e.max == kUnbounded) {
      // star ::= star item | ε ; r ::= item{min} star
      uint32_t star = builder_.add_rule(fmt::format("star{}", builder_.num_rules()));
      builder_.add_production(star, {Symbol::rule(star), item});
      builder_.add_production(star, {});
      prefix.push_back(Symbol::rule(star));
      builder_.add_production(r, std::move(prefix));
      return Symbol::rule(r);
    }
    // opt_k ::= item opt_{k-1} | ε, nested max-min deep.
    std::optional<Symbol> tail;
    for (uint32_t k = e.min; k < e.max; ++k) {
      uint32_t opt = builder_.add_rule(fmt::format("opt{}", builder_.num_rules()));
      std::vector<Symbol> body{item};
      if (tail) body.push_back(*tail);
      builder_.add_production(opt, std::move(body));
      builder_.add_production(opt, {});
      tail = Symbol::rule(opt);
    }
    if (tail) prefix.push_back(*tail);
    builder_.add_production(r, std::move(prefix));
    return Symbol::rule(r);
  }

  std::vector<RuleDef> defs_;
  std::map<std::string, size_t> index_;
  std::vector<std::vector<size_t>> refs_;  // rules each body references
  std::vector<uint32_t> depth_;            // expression nesting of each body
  std::vector<uint8_t> regular_;
  std::vector<uint32_t> height_;           // nesting of a regular rule with its inlined references
  std::map<size_t, Regex> regex_;          // regular rules
  std::vector<uint32_t> rule_ids_;
  std::vector<size_t> pending_;
  GrammarBuilder builder_;
};

}  // namespace

Result<Grammar> compile_ebnf(std::string_view source) {
  DI_TRY(defs, Parser(source).parse());
  return Lowering(std::move(defs)).run();
}

}  // namespace deepinfer::grammar
