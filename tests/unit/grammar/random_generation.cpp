#include "random_generation.h"

#include <bit>

namespace deepinfer::grammar::testing {

GenerationResult generate(Matcher& matcher, std::mt19937_64& rng, size_t max_tokens,
                          const std::function<void(const uint32_t*)>& on_mask) {
  const TokenVocabulary& vocab = matcher.compiled().vocabulary();
  std::vector<uint32_t> mask(vocab.mask_words());
  std::vector<int32_t> allowed;
  GenerationResult out;
  std::exponential_distribution<double> weight(1.0);
  for (size_t step = 0; step < max_tokens && !matcher.is_terminated(); ++step) {
    matcher.fill_mask(mask.data());
    if (on_mask) on_mask(mask.data());
    allowed.clear();
    for (size_t w = 0; w < mask.size(); ++w) {
      for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
        allowed.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(std::countr_zero(bits))));
      }
    }
    if (allowed.empty()) break;
    // A "model": random positive weights, a preference for short tokens (like real text), and an
    // end-of-sequence pull that grows with length.
    double total = 0;
    std::vector<double> w(allowed.size());
    for (size_t i = 0; i < allowed.size(); ++i) {
      size_t len = vocab.bytes(allowed[i]).size();
      w[i] = vocab.is_eos(allowed[i]) ? 0.02 * static_cast<double>(step * step + 1) * static_cast<double>(allowed.size())
                                      : weight(rng) / static_cast<double>(1 + len);
      total += w[i];
    }
    double r = std::uniform_real_distribution<double>(0, total)(rng);
    size_t pick = 0;
    while (pick + 1 < allowed.size() && r >= w[pick]) r -= w[pick++];
    int32_t tok = allowed[pick];
    auto res = matcher.advance(tok);
    if (!res) {
      out.text += "<advance failed: " + res.error().message + ">";
      break;
    }
    out.tokens.push_back(tok);
    if (vocab.is_eos(tok)) {
      out.terminated = true;
    } else {
      out.text += vocab.bytes(tok);
    }
  }
  return out;
}

}  // namespace deepinfer::grammar::testing
