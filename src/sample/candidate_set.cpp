#include "sample/candidate_set.h"

#include "sample/row_math.h"
#include "sample/token_choice.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace deepinfer {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
constexpr float kEveryToken = -1.0f;  // list_row: every finite token, whatever its weight

bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}

bool id_before(const Candidate& a, const Candidate& b) { return a.token < b.token; }

// The first tokens a top_p prefix usually needs; grown 4x while the mass falls short, so the
// common case sorts a few hundred tokens instead of the whole vocabulary. Once a window would
// pass 1/kFullSortFraction of the candidates, one full sort is cheaper than more selections.
constexpr size_t kInitialTopPWindow = 256;
constexpr size_t kFullSortFraction = 8;
// Lists longer than this find their top_p prefix by a radix select instead (a flat distribution,
// e.g. a random model's, can need most of the vocabulary).
constexpr size_t kSortedTopPLimit = 4096;

// Weights (the best token's is 1) above which a row-wide top_p looks for its prefix first: the
// prefix lies among the tokens above the first threshold whose mass reaches the target.
constexpr float kTopPThresholds[] = {0x1p-7f, 0x1p-17f, 0x1p-40f};

// Larger logit, larger key: the float's bits made to order as unsigned integers.
uint32_t rank_key(float logit) {
  const uint32_t u = std::bit_cast<uint32_t>(logit == 0.0f ? 0.0f : logit);  // -0 ties with +0
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Tokens checked at once by the row-wide top_k before it looks at them one by one.
constexpr size_t kTopKBlock = 256;

}  // namespace

void CandidateSet::collect(std::span<const float> logits) {
  row_ = logits;
  in_row_ = true;
  row_weighted_ = false;
  row_max_ = max_logit(logits);
  row_finite_ = count_finite(logits);
  list_.clear();
}

void CandidateSet::list_row(float above) {
  list_.clear();
  if (above >= 0.0f) {  // by weight: the vectorized search, then only the tokens found
    thread_local std::vector<uint32_t> found;
    found.clear();
    indices_above(row_weights_, above, found);
    list_.reserve(found.size());
    for (uint32_t i : found) list_.push_back({static_cast<int32_t>(i), row_[i], row_weights_[i]});
  } else {
    list_.reserve(row_finite_);
    for (size_t i = 0; i < row_.size(); ++i)
      if (row_[i] > kMinusInf) list_.push_back({static_cast<int32_t>(i), row_[i], row_weighted_ ? row_weights_[i] : 0.0});
  }
  in_row_ = false;
}

void CandidateSet::apply_temperature(float temperature) {
  if (in_row_) {
    row_weights_.resize(row_.size());
    if (row_finite_ > 0) exp_weights(row_, row_max_, temperature, row_weights_.data());
    block_sums_.clear();
    row_total_ = 0.0;
    for (size_t b = 0; b < row_.size(); b += kBlock) {
      block_sums_.push_back(lane_sum(row_weights_.data(), b, std::min(row_.size(), b + kBlock)));
      row_total_ += block_sums_.back();
    }
    row_weighted_ = true;
    return;
  }
  float max_logit = kMinusInf;
  for (const Candidate& c : list_) max_logit = std::max(max_logit, c.logit);
  // Subtracting the maximum before dividing keeps tiny temperatures finite: the quotient is <= 0.
  for (Candidate& c : list_) c.weight = std::exp((static_cast<double>(c.logit) - max_logit) / temperature);
}

void CandidateSet::apply_top_k(int32_t top_k) {
  if (top_k <= 0 || static_cast<size_t>(top_k) >= size()) return;
  // A bounded heap whose front is the worst kept token: most tokens cost one comparison.
  const auto k = static_cast<size_t>(top_k);
  auto offer = [&](const Candidate& c) {
    if (list_.size() < k) {
      list_.push_back(c);
      if (list_.size() == k) std::make_heap(list_.begin(), list_.end(), ranks_before);
    } else if (ranks_before(c, list_.front())) {
      std::pop_heap(list_.begin(), list_.end(), ranks_before);
      list_.back() = c;
      std::push_heap(list_.begin(), list_.end(), ranks_before);
    }
  };
  if (in_row_) {
    // Ids grow along the row, so a token can only enter with a logit above the worst kept one:
    // once the heap is full, whole blocks at or below it are skipped by one vectorized check.
    list_.clear();
    list_.reserve(k);
    for (size_t b = 0; b < row_.size(); b += kTopKBlock) {
      const size_t e = std::min(row_.size(), b + kTopKBlock);
      if (list_.size() == k && !any_above(row_.data() + b, e - b, list_.front().logit)) continue;
      for (size_t i = b; i < e; ++i) {
        if (!(row_[i] > kMinusInf)) continue;
        offer({static_cast<int32_t>(i), row_[i], row_weighted_ ? row_weights_[i] : 0.0});
      }
    }
    in_row_ = false;
  } else {
    std::vector<Candidate> all;
    all.swap(list_);
    list_.reserve(k);
    for (const Candidate& c : all) offer(c);
  }
  std::sort(list_.begin(), list_.end(), id_before);
}

bool CandidateSet::keep_rank_prefix(double target) {
  if (list_.size() > kSortedTopPLimit) return keep_rank_prefix_by_radix(target);
  const size_t n = list_.size();
  for (size_t window = std::min(kInitialTopPWindow, n);;
       window = window * 4 > n / kFullSortFraction ? n : window * 4) {
    // Bring the `window` best ranked tokens to the front, in rank order.
    if (window < n) std::nth_element(list_.begin(), list_.begin() + window, list_.end(), ranks_before);
    std::sort(list_.begin(), list_.begin() + window, ranks_before);
    double mass_before = 0.0;
    size_t i = 0;
    for (; i < window && mass_before < target; ++i) mass_before += list_[i].weight;
    if (mass_before >= target) {
      list_.resize(i);
      std::sort(list_.begin(), list_.end(), id_before);
      return true;
    }
    if (window == n) {
      std::sort(list_.begin(), list_.end(), id_before);
      return false;
    }
  }
}

bool CandidateSet::keep_rank_prefix_by_radix(double target) {
  // Radix select from the top, 8 bits of the rank key a round: the boundary key k with
  // mass(key > k) < target <= mass(key >= k). Each bucket's mass is summed in id order over four
  // interleaved partial sums (independent chains: a flat row puts most tokens in one bucket).
  thread_local std::vector<uint32_t> keys, members;  // members: indices whose key has the bits chosen so far
  keys.resize(list_.size());
  members.resize(list_.size());
  for (size_t i = 0; i < list_.size(); ++i) {
    keys[i] = rank_key(list_[i].logit);
    members[i] = static_cast<uint32_t>(i);
  }
  uint32_t boundary = 0;
  double above = 0.0;  // mass of the keys above every bucket chosen so far
  for (int shift = 24; shift >= 0; shift -= 8) {
    double partial[4][256] = {};
    uint32_t count[256] = {};
    for (size_t k = 0; k < members.size(); ++k) {
      const uint32_t i = members[k], b = (keys[i] >> shift) & 255u;
      partial[k & 3][b] += list_[i].weight;
      ++count[b];
    }
    int bucket = 255;
    double before = above;
    for (; bucket > 0; --bucket) {
      const double mass = ((partial[0][bucket] + partial[1][bucket]) + partial[2][bucket]) + partial[3][bucket];
      if (before + mass >= target) break;
      before += mass;
    }
    // (bucket 0 when even all of them fall short: rounding; then all of them are kept)
    above = before;
    boundary |= static_cast<uint32_t>(bucket) << shift;
    if (count[bucket] != members.size()) {
      std::erase_if(members, [&](uint32_t i) { return ((keys[i] >> shift) & 255u) != static_cast<uint32_t>(bucket); });
    }
  }
  // Every key above the boundary, then the boundary's ties by lower id until the mass is reached.
  thread_local std::vector<Candidate> kept;
  kept.clear();
  for (size_t i = 0; i < list_.size(); ++i) {
    if (keys[i] > boundary) {
      kept.push_back(list_[i]);
    } else if (keys[i] == boundary && above < target) {
      above += list_[i].weight;
      kept.push_back(list_[i]);
    }
  }
  if (above < target) return false;
  list_.swap(kept);
  return true;
}

void CandidateSet::apply_top_p(float top_p) {
  if (top_p >= 1.0f || empty()) return;
  if (!in_row_) {
    double total = 0.0;
    for (const Candidate& c : list_) total += c.weight;
    keep_rank_prefix(static_cast<double>(top_p) * total);  // short of it (rounding): all stay
    return;
  }
  const double target = static_cast<double>(top_p) * row_total_;
  for (float threshold : kTopPThresholds) {
    if (mass_above(row_weights_, threshold).mass < target) continue;
    list_row(threshold);
    if (keep_rank_prefix(target)) return;
  }
  list_row(kEveryToken);
  keep_rank_prefix(target);
}

void CandidateSet::apply_min_p(float min_p) {
  if (min_p <= 0.0f || empty()) return;
  if (in_row_) {  // float weights: w >= min_p exactly when w > the float below min_p
    list_row(std::nextafter(min_p, 0.0f));
    return;
  }
  const double threshold = min_p;
  std::erase_if(list_, [threshold](const Candidate& c) { return c.weight < threshold; });
}

int32_t CandidateSet::draw(double u) const {
  if (!in_row_) return draw_token(list_, u);
  const double target = u * row_total_;
  double cumulative = 0.0;
  for (size_t b = 0; b < block_sums_.size(); ++b) {
    if (cumulative + block_sums_[b] <= target) {
      cumulative += block_sums_[b];
      continue;
    }
    const size_t e = std::min(row_.size(), (b + 1) * kBlock);
    for (size_t i = b * kBlock; i < e; ++i) {
      if (row_weights_[i] <= 0.0f) continue;
      cumulative += row_weights_[i];
      if (cumulative > target) return static_cast<int32_t>(i);
    }
    // The block's own order fell short of its sum by rounding: on to the next one.
  }
  // u * total rounded up to total: the draw belongs to the last token with mass.
  for (size_t i = row_.size(); i-- > 0;)
    if (row_weights_[i] > 0.0f) return static_cast<int32_t>(i);
  return -1;
}

void CandidateSet::store_processed(std::span<float> row, float temperature) const {
  if (in_row_) {
    store_scaled(row_, row_max_, temperature, row);
    return;
  }
  float max_logit = kMinusInf;
  for (const Candidate& c : list_) max_logit = std::max(max_logit, c.logit);
  std::fill(row.begin(), row.end(), kMinusInf);
  for (const Candidate& c : list_)
    row[c.token] = static_cast<float>((static_cast<double>(c.logit) - max_logit) / temperature);
}

std::span<const Candidate> CandidateSet::candidates() {
  if (in_row_) list_row(kEveryToken);
  return list_;
}

}  // namespace deepinfer
