// Steps 7-10 of the processing order (sampling_params.h): the tokens still in the running after
// masking, weighted by temperature and shrunk by top_k, top_p and min_p, and the draw among them.
// Truncations rank tokens by (logit descending, token id ascending); temperature does not change
// that order.
//
// Two representations, so that a vocabulary-wide row costs a few vectorized passes:
// - the row: until a truncation keeps part of it, the candidates are the row's finite logits and
//   their weights one float per token (row_math.h), summed per block of kBlock tokens;
// - a list of Candidates in token id order, once top_k, top_p or min_p has cut the row down (or
//   top_k ran first: its weights are then computed in double for the few tokens kept).
// Every sum has one fixed order (id order; rank order for a short top_p prefix; per radix bucket,
// in id order, for a long one), so the result is a pure function of the row and the parameters.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer {

struct Candidate {
  int32_t token = 0;
  float logit = 0.0f;   // after steps 1-5
  double weight = 0.0;  // exp((logit - max logit) / temperature), 1 for the most likely token
};

class CandidateSet {
 public:
  // Resets to the tokens of `logits` with a finite logit (weights unset). The row is read, not
  // copied: it must outlive the set's use and not change meanwhile.
  void collect(std::span<const float> logits);
  void collect(std::vector<float>&&) = delete;  // a temporary row would not outlive the set

  // 7. Sets every weight; temperature > 0. Call after top_k (which needs no weights) and before
  // top_p and min_p.
  void apply_temperature(float temperature);
  // 8. Keeps the top_k best ranked tokens; top_k <= 0 or >= size() keeps all.
  void apply_top_k(int32_t top_k);
  // 9. Keeps the shortest best-ranked prefix whose weight reaches top_p of the total (at least one
  // token); top_p >= 1 keeps all.
  void apply_top_p(float top_p);
  // 10. Keeps tokens whose weight is at least min_p (the best token's weight is 1).
  void apply_min_p(float min_p);

  bool empty() const { return size() == 0; }
  size_t size() const { return in_row_ ? row_finite_ : list_.size(); }

  // Inverse CDF: the first token, in id order, whose cumulative weight exceeds u * total weight;
  // u in [0, 1), weights set, not empty. A token of weight 0 is never chosen while any weight is
  // positive.
  int32_t draw(double u) const;

  // Writes the sampling distribution over the row the set was collected from (`row`, which may be
  // that row itself): (logit - max) / temperature for the candidates, -inf elsewhere.
  void store_processed(std::span<float> row, float temperature) const;

  // The candidates in token id order (a set still in row form is listed first).
  std::span<const Candidate> candidates();

 private:
  static constexpr size_t kBlock = 1024;

  // Keeps the shortest best-ranked prefix of list_ whose weight reaches `target`, in id order;
  // false (list_ unchanged) when all of it does not.
  bool keep_rank_prefix(double target);
  bool keep_rank_prefix_by_radix(double target);
  // Leaves the row form: list_ = the row's tokens with a weight above `above` (>= 0), or every
  // finite token (above < 0), in id order.
  void list_row(float above);

  std::span<const float> row_;
  bool in_row_ = false;
  size_t row_finite_ = 0;
  float row_max_ = 0.0f;
  bool row_weighted_ = false;
  std::vector<float> row_weights_;
  std::vector<double> block_sums_;  // of row_weights_, per kBlock tokens
  double row_total_ = 0.0;          // the block sums added in order
  std::vector<Candidate> list_;
};

}  // namespace deepinfer
