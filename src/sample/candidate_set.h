// Steps 7-10 of the processing order (sampling_params.h): the tokens still in the running after
// masking, weighted by temperature and shrunk by top_k, top_p and min_p. Candidates stay in token
// id order between steps, so every sum over them has one fixed order and is bit-reproducible.
// Truncations rank tokens by (logit descending, token id ascending); temperature does not change
// that order.
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
  // Resets to the tokens with a finite logit, in id order, weights unset.
  void collect(std::span<const float> logits);

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

  bool empty() const { return candidates_.empty(); }
  size_t size() const { return candidates_.size(); }
  std::span<const Candidate> candidates() const { return candidates_; }

 private:
  std::vector<Candidate> candidates_;
};

}  // namespace deepinfer
