#include "sample/candidate_set.h"

#include <algorithm>
#include <cmath>

namespace deepinfer {
namespace {

bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}

bool id_before(const Candidate& a, const Candidate& b) { return a.token < b.token; }

// The first tokens a top_p prefix usually needs; grown 4x while the mass falls short, so the
// common case sorts a few hundred tokens instead of the whole vocabulary. Once a window would
// pass 1/kFullSortFraction of the candidates, one full sort is cheaper than more selections.
constexpr size_t kInitialTopPWindow = 256;
constexpr size_t kFullSortFraction = 8;

}  // namespace

void CandidateSet::collect(std::span<const float> logits) {
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) candidates_.push_back({static_cast<int32_t>(i), logits[i], 0.0});
  }
}

void CandidateSet::apply_temperature(float temperature) {
  float max_logit = -INFINITY;
  for (const Candidate& c : candidates_) max_logit = std::max(max_logit, c.logit);
  // Subtracting the maximum before dividing keeps tiny temperatures finite: the quotient is <= 0.
  for (Candidate& c : candidates_) {
    c.weight = std::exp((static_cast<double>(c.logit) - max_logit) / temperature);
  }
}

void CandidateSet::apply_top_k(int32_t top_k) {
  if (top_k <= 0 || static_cast<size_t>(top_k) >= candidates_.size()) return;
  // A bounded heap over the first top_k slots whose front is the worst kept token: most tokens
  // cost one comparison, and nothing is allocated.
  const auto kept_end = candidates_.begin() + top_k;
  std::make_heap(candidates_.begin(), kept_end, ranks_before);
  for (auto it = kept_end; it != candidates_.end(); ++it) {
    if (ranks_before(*it, candidates_.front())) {
      std::pop_heap(candidates_.begin(), kept_end, ranks_before);
      *(kept_end - 1) = *it;
      std::push_heap(candidates_.begin(), kept_end, ranks_before);
    }
  }
  candidates_.resize(top_k);
  std::sort(candidates_.begin(), candidates_.end(), id_before);
}

void CandidateSet::apply_top_p(float top_p) {
  if (top_p >= 1.0f || candidates_.empty()) return;
  double total = 0.0;
  for (const Candidate& c : candidates_) total += c.weight;
  const double target = static_cast<double>(top_p) * total;
  const size_t n = candidates_.size();
  size_t kept = n;
  for (size_t window = std::min(kInitialTopPWindow, n);;
       window = window * 4 > n / kFullSortFraction ? n : window * 4) {
    // Bring the `window` best ranked tokens to the front, in rank order.
    if (window < n) {
      std::nth_element(candidates_.begin(), candidates_.begin() + window, candidates_.end(),
                       ranks_before);
    }
    std::sort(candidates_.begin(), candidates_.begin() + window, ranks_before);
    double mass_before = 0.0;
    size_t i = 0;
    for (; i < window && mass_before < target; ++i) mass_before += candidates_[i].weight;
    if (mass_before >= target || window == n) {
      kept = i;
      break;
    }
  }
  candidates_.resize(kept);
  std::sort(candidates_.begin(), candidates_.end(), id_before);
}

void CandidateSet::apply_min_p(float min_p) {
  if (min_p <= 0.0f) return;
  const double threshold = min_p;
  std::erase_if(candidates_, [threshold](const Candidate& c) { return c.weight < threshold; });
}

}  // namespace deepinfer
