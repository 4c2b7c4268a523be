#include "sample/logprobs.h"

#include "sample/row_math.h"

#include <algorithm>
#include <cmath>

namespace deepinfer {

Result<Logprobs> compute_logprobs(std::span<const float> logits, int32_t token, int32_t top_n) {
  if (token < 0 || static_cast<size_t>(token) >= logits.size()) {
    return make_error(Code::kInvalidArgument, "logprobs: token {} is outside the row [0, {})",
                      token, logits.size());
  }
  if (top_n < 0) return make_error(Code::kInvalidArgument, "logprobs: top_n={} < 0", top_n);

  if (const int64_t bad = first_invalid_logit(logits); bad >= 0) {
    return make_error(Code::kInternal, "logprobs: logit of token {} is {}", bad, logits[bad]);
  }
  const float max = max_logit(logits);
  if (max == -INFINITY) {
    return make_error(Code::kInvalidArgument, "logprobs: every logit of the row is -inf");
  }
  const float own = logits[token];
  int32_t rank = 1;  // tokens ranked before: a higher logit, or an equal one and a lower id
  for (size_t i = 0; i < logits.size(); ++i) rank += logits[i] > own;
  for (size_t i = 0; i < static_cast<size_t>(token); ++i) rank += logits[i] == own;
  const size_t n_top = std::min(static_cast<size_t>(top_n), logits.size());
  std::vector<TokenLogprob> top;  // logits for now, best first
  top.reserve(n_top + 1);
  constexpr size_t kBlock = 256;  // once the list is full, a block with nothing above its last entry is skipped
  for (size_t b = 0; b < logits.size() && n_top > 0; b += kBlock) {
    const size_t end = std::min(logits.size(), b + kBlock);
    if (top.size() == n_top && !any_above(logits.data() + b, end - b, top.back().logprob)) continue;
    for (size_t i = b; i < end; ++i) {
      const float l = logits[i];
      // Scanning in id order, a new entry goes after every equal one already kept.
      if (top.size() < n_top || l > top.back().logprob) {
        auto at = std::upper_bound(top.begin(), top.end(), l,
                                   [](float v, const TokenLogprob& e) { return v > e.logprob; });
        top.insert(at, {static_cast<int32_t>(i), l});
        if (top.size() > n_top) top.pop_back();
      }
    }
  }
  const double sum = exp_sum(logits, max);
  const double log_z = max + std::log(sum);
  for (TokenLogprob& e : top) e.logprob = static_cast<float>(e.logprob - log_z);
  return Logprobs{token, static_cast<float>(own - log_z), rank, std::move(top)};
}

}  // namespace deepinfer
