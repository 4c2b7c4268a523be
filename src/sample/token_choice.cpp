#include "sample/token_choice.h"

#include "sample/row_math.h"

#include <cmath>

namespace deepinfer {

int32_t greedy_token(std::span<const float> logits) {
  const float best = max_logit(logits);
  if (best == -INFINITY) return -1;
  return static_cast<int32_t>(first_index_of(logits, best));  // the lowest id keeps a tie
}

int32_t draw_token(std::span<const Candidate> candidates, double u) {
  double total = 0.0;
  for (const Candidate& c : candidates) total += c.weight;
  const double target = u * total;
  double cumulative = 0.0;
  int32_t last_positive = candidates.front().token;
  for (const Candidate& c : candidates) {
    if (c.weight <= 0.0) continue;
    cumulative += c.weight;
    last_positive = c.token;
    if (cumulative > target) return c.token;
  }
  // u * total rounded up to total: the draw belongs to the last token with mass.
  return last_positive;
}

}  // namespace deepinfer
