#include "sample/logprobs.h"

#include <algorithm>
#include <cmath>

namespace deepinfer {

Result<Logprobs> compute_logprobs(std::span<const float> logits, int32_t token, int32_t top_n) {
  if (token < 0 || static_cast<size_t>(token) >= logits.size()) {
    return make_error(Code::kInvalidArgument, "logprobs: token {} is outside the row [0, {})",
                      token, logits.size());
  }
  if (top_n < 0) return make_error(Code::kInvalidArgument, "logprobs: top_n={} < 0", top_n);

  float max_logit = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i]) || logits[i] == INFINITY) {
      return make_error(Code::kInternal, "logprobs: logit of token {} is {}", i, logits[i]);
    }
    max_logit = std::max(max_logit, logits[i]);
  }
  if (max_logit == -INFINITY) {
    return make_error(Code::kInvalidArgument, "logprobs: every logit of the row is -inf");
  }

  const float own = logits[token];
  const size_t n_top = std::min(static_cast<size_t>(top_n), logits.size());
  std::vector<TokenLogprob> top;  // logits for now, best first
  top.reserve(n_top + 1);
  double sum = 0.0;
  int32_t rank = 1;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    sum += std::exp(static_cast<double>(l) - max_logit);
    if (l > own || (l == own && static_cast<int32_t>(i) < token)) ++rank;
    // Scanning in id order, a new entry goes after every equal one already kept.
    if (n_top > 0 && (top.size() < n_top || l > top.back().logprob)) {
      auto at = std::upper_bound(top.begin(), top.end(), l,
                                 [](float v, const TokenLogprob& e) { return v > e.logprob; });
      top.insert(at, {static_cast<int32_t>(i), l});
      if (top.size() > n_top) top.pop_back();
    }
  }
  const double log_z = max_logit + std::log(sum);
  for (TokenLogprob& e : top) e.logprob = static_cast<float>(e.logprob - log_z);
  return Logprobs{token, static_cast<float>(own - log_z), rank, std::move(top)};
}

}  // namespace deepinfer
