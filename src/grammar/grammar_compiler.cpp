#include "grammar/grammar_compiler.h"

#include "grammar/compile_budget.h"
#include "grammar/ebnf_compiler.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/regex_parser.h"

namespace deepinfer::grammar {
namespace {

Result<Grammar> build_regex_grammar(std::string_view pattern) {
  DI_TRY(regex, parse_ecmascript_regex(pattern));
  GrammarBuilder b;
  uint32_t root = b.add_rule("root");
  DI_TRY(t, b.add_regex_terminal(regex));
  b.add_production(root, {Symbol::term(t)});
  return b.build(root);
}

std::string cache_key(GrammarKind kind, std::string_view spec, const GrammarOptions& o, uint64_t vocab) {
  std::string key;
  key.push_back(static_cast<char>(kind));
  key.push_back(static_cast<char>(o.whitespace));
  key.append(reinterpret_cast<const char*>(&o.max_whitespace_run), sizeof o.max_whitespace_run);
  key.append(reinterpret_cast<const char*>(&vocab), sizeof vocab);
  key.append(spec);
  return key;
}

}  // namespace

Result<Grammar> build_grammar(GrammarKind kind, std::string_view spec, const GrammarOptions& options) {
  CompileBudget::Scope budget;
  switch (kind) {
    case GrammarKind::kRegex: return build_regex_grammar(spec);
    case GrammarKind::kJsonSchema: return compile_json_schema(spec, options);
    case GrammarKind::kEbnf: return compile_ebnf(spec);
  }
  return make_error(Code::kInvalidArgument, "unknown grammar kind {}", static_cast<int>(kind));
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, size_t cache_capacity)
    : vocab_(std::move(vocab)), capacity_(cache_capacity), terminals_(TerminalMaskTable::create(vocab_)) {}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile(GrammarKind kind, std::string_view spec,
                                                                        const GrammarOptions& options) {
  std::string key = cache_key(kind, spec, options, vocab_->fingerprint());
  {
    std::lock_guard lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  DI_TRY(g, build_grammar(kind, spec, options));
  auto compiled = std::make_shared<const CompiledGrammar>(std::move(g), vocab_, *terminals_);
  std::lock_guard lock(mutex_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->second;  // compiled concurrently: keep the first
  if (capacity_ == 0) return compiled;
  lru_.emplace_front(key, compiled);
  index_.emplace(std::move(key), lru_.begin());
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

Result<void> GrammarCompiler::validate(GrammarKind kind, std::string_view spec, const GrammarOptions& options) {
  DI_TRY(g, build_grammar(kind, spec, options));
  (void)g;
  return ok();
}

size_t GrammarCompiler::cached_grammars() const {
  std::lock_guard lock(mutex_);
  return lru_.size();
}

}  // namespace deepinfer::grammar
