#include "text/regex.h"

#include "text/unicode_category.h"
#include "util/json_excerpt.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>

namespace deepinfer::text {

struct Regex::Program {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Program() { pcre2_code_free(code); }
};

namespace {

// Oniguruma's Unicode sets (its RE doc): \s is 0009-000D, 0085 and the Z categories; \w is
// letters, marks, numbers and connector punctuation; \h is a hex digit. PCRE2's UCP sets differ
// (\s adds U+180E, \w drops marks and Pc, \h is horizontal space).
constexpr std::string_view kSpace = "\\t-\\r\\x{85}\\p{Z}";
constexpr std::string_view kWordCategories[] = {"L", "M", "N", "Pc"};
constexpr std::string_view kHex = "0-9A-Fa-f";

bool is_category_name(std::string_view name) {
  static constexpr std::string_view kNames[] = {"L",  "Lu", "Ll", "Lt", "Lm", "Lo", "M",  "Mn", "Mc", "Me", "N",
                                                "Nd", "Nl", "No", "P",  "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po",
                                                "S",  "Sm", "Sc", "Sk", "So", "Z",  "Zs", "Zl", "Zp"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

// Class items for general category `name`: PCRE2's property, plus (with_additions) the characters
// assigned after the Unicode version PCRE2 knows.
std::string category_items(std::string_view name, bool with_additions) {
  std::string items = fmt::format("\\p{{{}}}", name);
  if (!with_additions) return items;
  for (const CategoryRange& r : unicode_additions()) {
    if (std::string_view(r.category, 2).substr(0, name.size()) == name) {
      items += fmt::format("\\x{{{:X}}}-\\x{{{:X}}}", static_cast<uint32_t>(r.first), static_cast<uint32_t>(r.last));
    }
  }
  return items;
}

// Match state is per thread: PCRE2 match data and JIT stacks must not be shared by concurrent
// matches, and allocating them per call would dominate short matches.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);

  MatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

constexpr uint64_t kBaseMatchLimit = 10'000'000;  // PCRE2's default
constexpr uint64_t kMatchStepsPerByte = 16;

std::size_t utf8_len(unsigned char lead) { return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2; }

}  // namespace

std::string onig_to_pcre2(std::string_view p, bool with_additions) {
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  bool class_start = false;  // just after "[" or "[^", where "]" is a literal
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const std::size_t escape_start = i;
      const char e = p[++i];
      // The escape as class items and whether it is negated; no items: copy it unchanged.
      std::string items;
      bool negated = e == 'S' || e == 'W' || e == 'H' || e == 'P';
      if (e == 's' || e == 'S') items = kSpace;
      if (e == 'h' || e == 'H') items = kHex;
      if (e == 'w' || e == 'W') {
        for (std::string_view cat : kWordCategories) items += category_items(cat, with_additions);
      }
      if ((e == 'p' || e == 'P') && i + 1 < p.size() && p[i + 1] == '{') {
        const std::size_t close = p.find('}', i + 2);
        if (close != std::string_view::npos) {
          std::string_view name = p.substr(i + 2, close - i - 2);
          if (!name.empty() && name[0] == '^') {
            negated = !negated;
            name.remove_prefix(1);
          }
          i = close;
          if (is_category_name(name)) items = category_items(name, with_additions);
        }
      }
      if (items.empty() || (in_class && negated)) {  // a negated set inside a class has no spelling
        out.append(p.substr(escape_start, i + 1 - escape_start));
      } else if (in_class) {
        out += items;
      } else {
        out += negated ? "[^" : "[";
        out += items;
        out += ']';
      }
      class_start = false;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = class_start = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class [:alpha:]
      const std::size_t end = p.find(":]", i + 2);
      const std::size_t stop = end == std::string_view::npos ? p.size() : end + 2;
      out.append(p.substr(i, stop - i));
      i = stop - 1;
      class_start = false;
      continue;
    }
    if (in_class && c == ']' && !class_start) in_class = false;
    class_start = false;
    out += c;
  }
  return out;
}

Result<std::shared_ptr<const Regex::Program>> Regex::build(const std::string& pattern, bool literal, std::string_view shown) {
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
  // Oniguruma's ^ and $ are line anchors.
  const uint32_t options = PCRE2_UTF | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE);
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &err,
                                   &err_offset, cc);
  pcre2_compile_context_free(cc);
  if (code == nullptr) {
    return make_error(Code::kModelFormat, "bad regex \"{}\": {} (offset {} of the PCRE2 form)", text_excerpt(shown, 200),
                      pcre2_message(err), err_offset);
  }
  auto program = std::make_shared<Program>();
  program->code = code;
  // Without JIT (e.g. an architecture PCRE2 has no JIT for) the interpreter gives the same matches.
  program->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return std::shared_ptr<const Program>(std::move(program));
}

Result<Regex> Regex::compile(std::string_view pattern) {
  const std::string plain = onig_to_pcre2(pattern, false);
  const std::string recent = onig_to_pcre2(pattern, true);
  DI_TRY(plain_program, build(plain, false, pattern));
  std::shared_ptr<const Program> recent_program;
  if (recent != plain) {
    DI_TRY(r, build(recent, false, pattern));
    recent_program = std::move(r);
  }
  return Regex(std::move(plain_program), std::move(recent_program));
}

Result<Regex> Regex::literal(std::string_view text) {
  DI_TRY(program, build(std::string(text), true, text));
  return Regex(std::move(program), nullptr);
}

Result<void> Regex::for_each_match(std::string_view text, MatchSink on_match) const {
  const Program& program = recent_ && contains_unicode_additions(text) ? *recent_ : *plain_;
  MatchState& st = match_state();
  // PCRE2's default budget (10M backtracking steps a match) is spent by ordinary patterns on a
  // multi-megabyte whitespace run (`\s*[\r\n]+` backtracks through all of it): the budget grows
  // with the text, so valid text tokenizes, and a pattern that still runs out is a clear error.
  pcre2_set_match_limit(st.context, static_cast<uint32_t>(std::min<uint64_t>(
                                        UINT32_MAX, kBaseMatchLimit + kMatchStepsPerByte * uint64_t{text.size()})));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
  std::size_t last_end = 0;
  std::size_t last_match_end = std::string_view::npos;
  while (last_end <= text.size()) {
    const int rc = program.jit ? pcre2_jit_match(program.code, subject, text.size(), last_end, 0, st.data, st.context)
                               : pcre2_match(program.code, subject, text.size(), last_end, PCRE2_NO_UTF_CHECK,
                                             st.data, st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT ||
        rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      return make_error(Code::kCapacity,
                        "the tokenizer's split pattern gave up on {} bytes of text at byte {} ({}): the text "
                        "is too complex for it",
                        text.size(), last_end, pcre2_message(rc));
    }
    if (rc < 0) return make_error(Code::kInternal, "regex match failed: {}", pcre2_message(rc));
    const std::size_t start = ov[0], end = ov[1];
    if (start == end && last_end == last_match_end) {
      last_end += last_end < text.size() ? utf8_len(static_cast<unsigned char>(text[last_end])) : 1;
      continue;
    }
    last_end = last_match_end = end;
    DI_TRYV(on_match(start, end));
  }
  return ok();
}

}  // namespace deepinfer::text
