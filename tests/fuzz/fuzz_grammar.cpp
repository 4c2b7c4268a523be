// One grammar front end (DI_FUZZ_GRAMMAR_KIND: regex, JSON Schema or EBNF): validate, compile for a
// small byte-level vocabulary, then a short matcher walk. Input: the spec, optionally NUL and the
// bytes of the walk.
#include "fuzz_input.h"
#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"

#include <cstdlib>
#include <vector>

using namespace deepinfer;

namespace {

// 256 one-byte tokens, a few multi-byte ones (JSON punctuation and words), EOS last.
std::shared_ptr<const grammar::TokenVocabulary> vocabulary() {
  static const auto vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
    for (const char* t : {"{\"", "\":", "\",\"", "\"}", "true", "false", "null", "  ", "\n", "ab", "123", "\xe4\xbd\xa0"})
      bytes.emplace_back(t);
    bytes.emplace_back();  // EOS
    const int32_t eos = static_cast<int32_t>(bytes.size() - 1);
    return grammar::TokenVocabulary::create(std::move(bytes), {eos}).value();
  }();
  return vocab;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [spec, walk] = fuzz::split_input(data, size);
  const auto kind = static_cast<grammar::GrammarKind>(DI_FUZZ_GRAMMAR_KIND);
  grammar::GrammarOptions options;
  if (!walk.empty() && (walk[0] & 1)) options.whitespace = grammar::Whitespace::kCompact;
  if (!grammar::GrammarCompiler::validate(kind, spec, options)) return 0;
  static grammar::GrammarCompiler compiler(vocabulary(), 4);
  auto compiled = compiler.compile(kind, spec, options);
  if (!compiled) return 0;
  grammar::Matcher m(compiled.value());
  std::vector<uint32_t> mask(vocabulary()->mask_words());
  m.fill_mask(mask.data());
  // Advance by chunks of the walk (1-4 bytes), rolling back now and then; stop at the first refusal.
  size_t steps = 0;
  for (size_t i = 1; i < walk.size() && steps < 64; ++steps) {
    const size_t n = 1 + static_cast<unsigned char>(walk[i - 1]) % 4;
    const std::string_view chunk = walk.substr(i, n);
    i += n;
    if (!m.advance_bytes(chunk)) break;
    if (static_cast<unsigned char>(chunk[0]) % 7 == 0 && m.num_steps() > 0 && !m.rollback(1)) std::abort();
    m.fill_mask(mask.data());
  }
  (void)m.accepts_string(walk.substr(0, std::min<size_t>(walk.size(), 32)));
  if (m.can_end() && !m.advance(static_cast<int32_t>(vocabulary()->size() - 1))) std::abort();  // EOS when complete
  return 0;
}
