// Entry point of the grammar engine: compiles (kind, spec, options) for one vocabulary and keeps
// the results in an LRU cache, so requests with the same constraint share one CompiledGrammar.
// Thread-safe.
#pragma once

#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "grammar/grammar_options.h"
#include "grammar/terminal_masks.h"
#include "grammar/token_vocabulary.h"
#include "util/result.h"

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace deepinfer::grammar {

// Compiles a spec to the vocabulary-independent grammar (what validation and byte-level tools need).
Result<Grammar> build_grammar(GrammarKind kind, std::string_view spec, const GrammarOptions& options);

class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, size_t cache_capacity = 256);

  // Errors are kGrammar and name what failed (syntax, an unsupported keyword, an empty language).
  Result<std::shared_ptr<const CompiledGrammar>> compile(GrammarKind kind, std::string_view spec,
                                                         const GrammarOptions& options = {});
  // The compile error for a bad spec, without keeping anything.
  static Result<void> validate(GrammarKind kind, std::string_view spec, const GrammarOptions& options = {});

  const std::shared_ptr<const TokenVocabulary>& vocabulary() const { return vocab_; }
  size_t cached_grammars() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;

  std::shared_ptr<const TokenVocabulary> vocab_;
  size_t capacity_;
  std::shared_ptr<TerminalMaskTable> terminals_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace deepinfer::grammar
