// Products of a few rows (gemv.cu): decode steps, where reading each weight once at full bandwidth is
// all that matters.
#pragma once

#include "launch.h"

namespace deepinfer::kernels {

// fp32 activations (not rounded to bf16), bf16 weights, fp32 accumulation in a fixed order (a row's
// result does not depend on the others).
inline constexpr int kGemvMaxRows = 4;
// k a multiple of 8, rows of x (ldx floats apart) and w 16-byte aligned.
bool gemv_supported(const float* x, int64_t ldx, const bf16_t* w, int64_t k);
// out[r, o] (ldo floats apart) = x[r, g k .. g k + k) · w[o, :k] for r < rows <= kGemvMaxRows and
// o < n_out, where g = o / n_group (n_group = n_out: a plain product; else a grouped one).
cudaError_t gemv(const float* x, int64_t rows, int64_t ldx, const bf16_t* w, int64_t n_out, int64_t k, int64_t n_group, float* out,
                 int64_t ldo, Stream s);
// Several products of the same rows of x (each as gemv above, k columns) in one launch: at decode
// the products a layer takes from one input are mostly small, and a launch each costs more than
// reading their weights.
inline constexpr int kGemvMaxProducts = 8;
struct GemvProduct {
  const bf16_t* w = nullptr;
  float* out = nullptr;
  int64_t n_out = 0, n_group = 0, ldo = 0;
};
struct GemvList {
  GemvProduct p[kGemvMaxProducts];
  int64_t first_block[kGemvMaxProducts] = {};  // set by gemv_list
  int count = 0;
  // When set (k floats, 16-byte aligned; plain products only): the products are of x's rows
  // normalised to unit RMS over their k columns, times norm (rms_norm's result, which is not stored).
  const float* norm = nullptr;
  float norm_eps = 0.0f;
};
cudaError_t gemv_list(const float* x, int64_t rows, int64_t ldx, int64_t k, const GemvList& list, Stream s);
// Experts of a few rows without a permutation. Each row has per_row() entries: slots i < top_k are
// routed experts (experts[t, i] of the stacked w1 / w3 / w2, scaled by weights[t, i]; experts null:
// expert 0, weights null: 1), slot top_k, when sw1 is set, the shared expert (scale 1).
struct GemvExperts {
  const int32_t* experts = nullptr;  // [rows, top_k]
  const float* weights = nullptr;    // [rows, top_k]
  int top_k = 0, n_exp = 0;
  const bf16_t *w1 = nullptr, *w3 = nullptr, *w2 = nullptr;     // [n_exp, inter, d] x 2, [n_exp, d, inter]
  const bf16_t *sw1 = nullptr, *sw3 = nullptr, *sw2 = nullptr;  // the shared expert: [inter, d] x 2, [d, inter]
  __host__ __device__ int per_row() const { return top_k + (sw1 ? 1 : 0); }
};
// h [rows * per_row, inter] fp32: entry e = scale * clamped SwiGLU(x[row] · w1^T, x[row] · w3^T);
// zeros for an invalid routed expert. rows * per_row <= 65535; d % 8 == 0.
cudaError_t expert_gate_up(const float* x, int64_t d, int64_t rows, const GemvExperts& ex, int64_t inter, float limit, float* h,
                           Stream s);
// out[t] = (accumulate ? out[t] : 0) + Σ_slots h[entry] @ w2^T, summed in slot order (invalid experts
// add nothing). With more than one slot: part [rows * per_row, d] floats of scratch and
// expert_down_counters(rows, d) counters that are zero (the launch leaves them zero).
int64_t expert_down_counters(int64_t rows, int64_t d);
cudaError_t expert_down(const float* h, int64_t inter, int64_t rows, const GemvExperts& ex, int64_t d, bool accumulate, float* out,
                        float* part, unsigned* counters, Stream s);

}  // namespace deepinfer::kernels
