#include "text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>

namespace deepinfer::text {

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

// Oniguruma's Unicode sets (its RE doc): \s is 0009-000D, 0085 and the Z categories; \w is
// letters, marks, numbers and connector punctuation; \h is a hex digit. PCRE2's UCP sets differ
// (\s adds U+180E, \w drops marks and Pc, \h is horizontal space).
constexpr std::string_view kSpace = "\\t-\\r\\x{85}\\p{Z}";
constexpr std::string_view kWord = "\\p{L}\\p{M}\\p{N}\\p{Pc}";
constexpr std::string_view kHex = "0-9A-Fa-f";

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

std::size_t utf8_len(unsigned char lead) { return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2; }

}  // namespace

std::string onig_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  bool class_start = false;  // just after "[" or "[^", where "]" is a literal
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      std::string_view set;
      const bool negated = e == 'S' || e == 'W' || e == 'H';
      if (e == 's' || e == 'S') set = kSpace;
      if (e == 'w' || e == 'W') set = kWord;
      if (e == 'h' || e == 'H') set = kHex;
      if (set.empty() || (in_class && negated)) {  // a negated set inside a class has no spelling
        out += '\\';
        out += e;
      } else if (in_class) {
        out += set;
      } else {
        out += negated ? "[^" : "[";
        out += set;
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

Result<Regex> Regex::build(const std::string& pattern, bool literal, std::string_view shown) {
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
  // Oniguruma's ^ and $ are line anchors.
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_MULTILINE);
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &err,
                                   &err_offset, cc);
  pcre2_compile_context_free(cc);
  if (code == nullptr) {
    return make_error(Code::kModelFormat, "bad regex \"{}\": {} at offset {}", shown, pcre2_message(err), err_offset);
  }
  auto holder = std::make_shared<Regex::Compiled>();
  holder->code = code;
  // Without JIT (e.g. an architecture PCRE2 has no JIT for) the interpreter gives the same matches.
  holder->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return Regex(std::move(holder));
}

Result<Regex> Regex::compile(std::string_view pattern) { return build(onig_to_pcre2(pattern), false, pattern); }

Result<Regex> Regex::literal(std::string_view text) { return build(std::string(text), true, text); }

Result<void> Regex::for_each_match(std::string_view text, MatchSink on_match) const {
  MatchState& st = match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
  std::size_t last_end = 0;
  std::size_t last_match_end = std::string_view::npos;
  while (last_end <= text.size()) {
    const int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), last_end, 0, st.data, st.context)
                              : pcre2_match(code_->code, subject, text.size(), last_end, PCRE2_NO_UTF_CHECK,
                                            st.data, st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
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
