#include "random_generation.h"

#include <algorithm>
#include <bit>
#include <chrono>

namespace deepinfer::grammar::testing {
namespace {

std::vector<int32_t> ids_of(const std::vector<uint32_t>& mask) {
  std::vector<int32_t> out;
  for (size_t w = 0; w < mask.size(); ++w) {
    for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
      out.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(std::countr_zero(bits))));
    }
  }
  return out;
}

}  // namespace

GenerationResult generate(Matcher& matcher, std::mt19937_64& rng, size_t max_tokens,
                          const std::function<void(const uint32_t*)>& on_mask) {
  const TokenVocabulary& vocab = matcher.compiled().vocabulary();
  // Tokens that end a string or a container: long outputs are pushed towards them.
  std::vector<uint32_t> closers(vocab.mask_words(), 0);
  for (size_t i = 0; i < vocab.size(); ++i) {
    std::string_view b = vocab.bytes(static_cast<int32_t>(i));
    if (vocab.is_eos(static_cast<int32_t>(i)) || b.find_first_of("\"}]") != std::string_view::npos) closers[i >> 5] |= 1u << (i & 31);
  }
  std::vector<uint32_t> mask(vocab.mask_words()), closing(vocab.mask_words());
  std::exponential_distribution<double> weight(1.0);
  std::uniform_real_distribution<double> unit(0, 1);
  GenerationResult out;
  for (size_t step = 0; step < max_tokens && !matcher.is_terminated(); ++step) {
    auto start = std::chrono::steady_clock::now();
    matcher.fill_mask(mask.data());
    out.mask_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    if (on_mask) on_mask(mask.data());
    // With growing probability, draw only among closing tokens when there are any.
    const std::vector<uint32_t>* pool = &mask;
    if (unit(rng) < std::min(0.8, static_cast<double>(step) / 150.0)) {
      bool any = false;
      for (size_t w = 0; w < mask.size(); ++w) any |= (closing[w] = mask[w] & closers[w]) != 0;
      if (any) pool = &closing;
    }
    std::vector<int32_t> allowed = ids_of(*pool);
    if (allowed.empty()) break;
    // A "model": a few random candidates with random weights favouring short tokens, plus the
    // allowed EOS tokens with a pull that grows with length.
    std::vector<int32_t> candidates;
    for (int k = 0; k < 48; ++k) candidates.push_back(allowed[rng() % allowed.size()]);
    for (int32_t eos : vocab.eos_ids()) {
      if ((mask[static_cast<size_t>(eos) >> 5] >> (eos & 31)) & 1u) candidates.push_back(eos);
    }
    std::vector<double> w(candidates.size());
    double total = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      size_t len = vocab.bytes(candidates[i]).size();
      w[i] = vocab.is_eos(candidates[i]) ? 0.02 * static_cast<double>(step * step + 1) : weight(rng) / static_cast<double>(1 + len);
      total += w[i];
    }
    double r = unit(rng) * total;
    size_t pick = 0;
    while (pick + 1 < candidates.size() && r >= w[pick]) r -= w[pick++];
    int32_t tok = candidates[pick];
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
