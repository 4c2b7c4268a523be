// di_grammar, di_tokenizer and di_matcher: structured outputs, and tooling without a model.
#include "engine/grammar_vocabulary.h"
#include "grammar/grammar_compiler.h"
#include "handles.h"

#include <algorithm>
#include <filesystem>
#include <list>
#include <mutex>

using namespace deepinfer;
using namespace deepinfer::capi;

namespace {

Result<grammar::GrammarKind> kind_of(di_grammar_kind kind) {
  switch (kind) {
    case DI_GRAMMAR_REGEX: return grammar::GrammarKind::kRegex;
    case DI_GRAMMAR_JSON_SCHEMA: return grammar::GrammarKind::kJsonSchema;
    case DI_GRAMMAR_EBNF: return grammar::GrammarKind::kEbnf;
    default: return make_error(Code::kInvalidArgument, "grammar kind {} is not one of DI_GRAMMAR_*", kind);
  }
}

Result<grammar::GrammarOptions> options_of(uint32_t flags, uint32_t max_whitespace_run) {
  if (flags & ~uint32_t{DI_GRAMMAR_COMPACT_WHITESPACE}) return make_error(Code::kInvalidArgument, "unknown grammar flags {:#x}", flags);
  grammar::GrammarOptions o;
  o.whitespace = (flags & DI_GRAMMAR_COMPACT_WHITESPACE) ? grammar::Whitespace::kCompact : grammar::Whitespace::kAny;
  o.max_whitespace_run = max_whitespace_run;
  return o;
}

Result<std::shared_ptr<grammar::Matcher>> matcher_of(const di_matcher* m) {
  auto p = matchers().get(m);
  if (!p) return invalid_handle("matcher");
  return p;
}

Result<std::shared_ptr<const text::Tokenizer>> tokenizer_of(const di_tokenizer* t) {
  auto p = tokenizers().get(t);
  if (!p) return invalid_handle("tokenizer");
  return p;
}

// di_grammar_compile_for_tokenizer's per-tokenizer work (the token vocabulary, the compiler and its
// caches), kept for the few tokenizers last used: the same spec compiled twice costs a cache
// lookup. Entries die with their tokenizer.
class TokenizerCompilers {
 public:
  Result<grammar::GrammarCompiler*> get(const std::shared_ptr<const text::Tokenizer>& tok, int32_t width, std::span<const int32_t> eos) {
    std::lock_guard lock(mutex_);
    std::erase_if(entries_, [](const Entry& e) { return e.tokenizer.expired(); });
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->tokenizer.lock() == tok && it->width == width && std::equal(it->eos.begin(), it->eos.end(), eos.begin(), eos.end())) {
        entries_.splice(entries_.begin(), entries_, it);
        return entries_.front().compiler.get();
      }
    }
    DI_TRY(vocab, grammar_vocabulary(*tok, width, eos));
    entries_.push_front({tok, width, std::vector<int32_t>(eos.begin(), eos.end()), std::make_unique<grammar::GrammarCompiler>(std::move(vocab))});
    if (entries_.size() > kEntries) entries_.pop_back();
    return entries_.front().compiler.get();
  }

 private:
  static constexpr size_t kEntries = 4;
  struct Entry {
    std::weak_ptr<const text::Tokenizer> tokenizer;
    int32_t width;
    std::vector<int32_t> eos;
    std::unique_ptr<grammar::GrammarCompiler> compiler;  // thread-safe
  };
  std::mutex mutex_;
  std::list<Entry> entries_;  // most recent first
};

TokenizerCompilers& tokenizer_compilers() {
  static TokenizerCompilers cache;  // process-wide: a compiler per tokenizer (held weakly), reused by later calls
  return cache;
}

}  // namespace

extern "C" {

di_error* di_grammar_compile_options(const di_engine* engine, di_grammar_kind kind, const char* spec, size_t len, di_grammar_flags flags,
                                     uint32_t max_whitespace_run, di_grammar** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    auto e = engines().get(engine);
    if (!e) return invalid_handle("engine");
    DI_TRYV(check_in(spec, len, "spec"));
    DI_TRY(k, kind_of(kind));
    DI_TRY(o, options_of(flags, max_whitespace_run));
    DI_TRY(g, e->compile_grammar(k, std::string_view(spec ? spec : "", len), o));
    *out = grammars().add<di_grammar>(std::move(g));
    return ok();
  });
}

di_error* di_grammar_compile(const di_engine* engine, di_grammar_kind kind, const char* spec, size_t len, di_grammar** out) {
  return di_grammar_compile_options(engine, kind, spec, len, 0, 0, out);
}

di_error* di_grammar_validate(di_grammar_kind kind, const char* spec, size_t len, di_grammar_flags flags, uint32_t max_whitespace_run) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_in(spec, len, "spec"));
    DI_TRY(k, kind_of(kind));
    DI_TRY(o, options_of(flags, max_whitespace_run));
    return grammar::GrammarCompiler::validate(k, std::string_view(spec ? spec : "", len), o);
  });
}

void di_grammar_free(di_grammar* grammar) { grammars().remove(grammar); }

di_error* di_sampling_set_grammar(di_sampling* sp, const di_grammar* grammar) {
  return guard([&]() -> Result<void> {
    auto p = samplings().get(sp);
    if (!p) return invalid_handle("sampling");
    if (!grammar) {
      p->grammar.reset();
      return ok();
    }
    auto g = grammars().get(grammar);
    if (!g) return invalid_handle("grammar");
    p->grammar = std::move(g);
    return ok();
  });
}

di_error* di_sampling_get_grammar(const di_sampling* sp, di_grammar** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    auto p = samplings().get(sp);
    if (!p) return invalid_handle("sampling");
    *out = p->grammar ? grammars().add<di_grammar>(p->grammar) : nullptr;
    return ok();
  });
}

di_error* di_tokenizer_create(const char* path, size_t len, di_tokenizer** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRYV(check_in(path, len, "path"));
    if (!len) return make_error(Code::kInvalidArgument, "the tokenizer path is empty");
    DI_TRY(tok, text::Tokenizer::from_file(std::filesystem::path(std::string(path, len))));
    *out = tokenizers().add<di_tokenizer>(std::make_shared<const text::Tokenizer>(std::move(tok)));
    return ok();
  });
}

di_error* di_engine_tokenizer(const di_engine* engine, di_tokenizer** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    auto e = engines().get(engine);
    if (!e) return invalid_handle("engine");
    DI_TRY(tok, e->tokenizer());
    *out = tokenizers().add<di_tokenizer>(std::make_shared<const text::Tokenizer>(*tok));
    return ok();
  });
}

void di_tokenizer_free(di_tokenizer* tokenizer) { tokenizers().remove(tokenizer); }

di_error* di_tokenizer_vocab_size(const di_tokenizer* tokenizer, int32_t* out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(t, tokenizer_of(tokenizer));
    *out = static_cast<int32_t>(t->vocab_size());
    return ok();
  });
}

di_error* di_tokenizer_encode(const di_tokenizer* tokenizer, const char* text, size_t len, di_text_flags flags, int32_t* buf,
                              size_t cap, size_t* out_len) {
  return guard([&]() -> Result<void> {
    DI_TRY(t, tokenizer_of(tokenizer));
    DI_TRYV(check_in(text, len, "text"));
    if (flags & ~uint32_t{DI_TEXT_SPECIAL}) return make_error(Code::kInvalidArgument, "unknown text flags {:#x}", flags);
    auto mode = (flags & DI_TEXT_SPECIAL) ? text::EncodeMode::kRecognizeAddedTokens : text::EncodeMode::kPlainText;
    DI_TRY(ids, t->encode(std::string_view(text ? text : "", len), mode));
    return copy_out(ids.data(), ids.size(), buf, cap, out_len);
  });
}

di_error* di_tokenizer_decode(const di_tokenizer* tokenizer, const int32_t* ids, size_t n, di_detok_flags flags, char* buf, size_t cap,
                              size_t* out_len) {
  return guard([&]() -> Result<void> {
    DI_TRY(t, tokenizer_of(tokenizer));
    DI_TRYV(check_in(ids, n, "ids"));
    if (flags & ~uint32_t{DI_DETOK_SKIP_SPECIAL}) return make_error(Code::kInvalidArgument, "unknown detokenize flags {:#x}", flags);
    DI_TRY(s, t->decode(std::span<const int32_t>(ids, n), (flags & DI_DETOK_SKIP_SPECIAL) != 0));
    return copy_out(s.data(), s.size(), buf, cap, out_len);
  });
}

di_error* di_grammar_compile_for_tokenizer(const di_tokenizer* tokenizer, int32_t vocab_size, const int32_t* eos_ids, size_t n_eos,
                                           di_grammar_kind kind, const char* spec, size_t len, di_grammar_flags flags,
                                           uint32_t max_whitespace_run, di_grammar** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(t, tokenizer_of(tokenizer));
    DI_TRYV(check_in(eos_ids, n_eos, "eos_ids"));
    DI_TRYV(check_in(spec, len, "spec"));
    DI_TRY(k, kind_of(kind));
    DI_TRY(o, options_of(flags, max_whitespace_run));
    const int32_t width = vocab_size == 0 ? static_cast<int32_t>(t->vocab_size()) : vocab_size;
    if (width < 0 || width > (1 << 24)) return make_error(Code::kInvalidArgument, "vocab_size={} is outside [0, 2^24]", vocab_size);
    for (size_t i = 0; i < n_eos; ++i)
      if (eos_ids[i] < 0 || eos_ids[i] >= width)
        return make_error(Code::kInvalidArgument, "eos id {} is outside the vocabulary [0, {})", eos_ids[i], width);
    DI_TRY(compiler, tokenizer_compilers().get(t, width, std::span<const int32_t>(eos_ids, n_eos)));
    DI_TRY(g, compiler->compile(k, std::string_view(spec ? spec : "", len), o));
    *out = grammars().add<di_grammar>(std::move(g));
    return ok();
  });
}

di_error* di_matcher_create(const di_grammar* grammar, di_matcher** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    auto g = grammars().get(grammar);
    if (!g) return invalid_handle("grammar");
    *out = matchers().add<di_matcher>(std::make_shared<grammar::Matcher>(std::move(g)));
    return ok();
  });
}

void di_matcher_free(di_matcher* matcher) { matchers().remove(matcher); }

di_error* di_matcher_accept_token(di_matcher* matcher, int32_t token) {
  return guard([&]() -> Result<void> {
    DI_TRY(m, matcher_of(matcher));
    if (token < 0 || static_cast<size_t>(token) >= m->compiled().vocabulary().size())
      return make_error(Code::kInvalidArgument, "token id {} is outside the vocabulary [0, {})", token, m->compiled().vocabulary().size());
    return m->advance(token);
  });
}

di_error* di_matcher_accept_string(di_matcher* matcher, const char* s, size_t len) {
  return guard([&]() -> Result<void> {
    DI_TRY(m, matcher_of(matcher));
    DI_TRYV(check_in(s, len, "s"));
    return m->advance_bytes(std::string_view(s ? s : "", len));
  });
}

di_error* di_matcher_rollback(di_matcher* matcher, size_t n) {
  return guard([&]() -> Result<void> {
    DI_TRY(m, matcher_of(matcher));
    return m->rollback(n);
  });
}

di_error* di_matcher_reset(di_matcher* matcher) {
  return guard([&]() -> Result<void> {
    DI_TRY(m, matcher_of(matcher));
    m->reset();
    return ok();
  });
}

di_error* di_matcher_fill_mask(di_matcher* matcher, uint32_t* words, size_t cap, size_t* out_len) {
  return guard([&]() -> Result<void> {
    DI_TRY(m, matcher_of(matcher));
    DI_TRYV(check_out(out_len, "out_len"));
    const size_t n = m->compiled().vocabulary().mask_words();
    *out_len = n;
    if (n > cap) return make_error(Code::kBufferTooSmall, "the mask needs {} words, the buffer holds {}", n, cap);
    if (!words) return make_error(Code::kInvalidArgument, "words must not be NULL");
    m->fill_mask(words);
    return ok();
  });
}

di_error* di_matcher_can_end(const di_matcher* matcher, int32_t* out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(m, matcher_of(matcher));
    *out = m->can_end() ? 1 : 0;
    return ok();
  });
}

di_error* di_matcher_is_terminated(const di_matcher* matcher, int32_t* out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(m, matcher_of(matcher));
    *out = m->is_terminated() ? 1 : 0;
    return ok();
  });
}

}  // extern "C"
