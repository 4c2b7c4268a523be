// Hyper-connections (hyper_connection.cu, hc_mix_mma.cu).
#pragma once

#include "launch.h"

namespace deepinfer::kernels {

// Hyper-connection mixes: for a few outputs (n <= kMixMaxOut), all fp32, where a general GEMM
// library leaves most of the GPU idle. partial [rows][mix_splits(K)][n + 1]: per column chunk of x,
// x · w[j] for j < n and, at n, Σ x² (the RMS norm the mixes apply). Deterministic: the consumers
// (hc_pre, hc_head) sum the chunks in a fixed order.
inline constexpr int kMixMaxOut = 64;
int mix_splits(int64_t K);
cudaError_t mix_partial(const float* x, int64_t rows, int64_t K, const float* w, int n, float* partial, Stream s);
// out[t * ld] = Σ_k x[t, k]² (with a mix computed elsewhere into a one-split partial).
cudaError_t row_sumsq(const float* x, int64_t rows, int64_t K, float* out, int64_t ld, Stream s);

// Hyper-connections from the mix partials of the raw (un-normalised) streams (`splits` chunks of
// (2 + hc) hc + 1, resp. hc + 1, values per row); the kernels apply the unweighted RMS norm of each row.
// hc_pre with norm_weight also applies the sublayer's RMS norm (weight norm_weight, eps norm_eps) to collapsed.
// hc_pre may overwrite partial (prefill: the collapse's weights are left in it).
cudaError_t hc_pre(const float* streams, float* partial, int splits, int64_t rows, int hc, int64_t d, const float* base,
                   const float* scale, int sinkhorn_iters, float eps, float norm_eps, const float* norm_weight, float* collapsed,
                   float* post, float* comb, Stream s);
cudaError_t hc_head(const float* streams, const float* partial, int splits, int64_t rows, int hc, int64_t d, const float* base,
                    const float* scale, float eps, float norm_eps, const float* norm_weight, float* out, Stream s);
cudaError_t hc_post(const float* streams, const float* out, const float* post, const float* comb, int64_t rows, int hc,
                    int64_t d, float* new_streams, Stream s);
// hc_post, and the partials (hc_post_mix_splits(hc, d) of them, the layout of mix_partial's) of the
// next site's mix of the new streams with w [n, hc * d] fp32, n <= kMixMaxOut: decode, where a
// separate mix launch costs more than its work. d % 4 == 0, 16-byte aligned rows.
int hc_post_mix_splits(int hc, int64_t d);
// Whether hc_post_mix's partials for streams of d columns are mix_partial's (FMA kernel) bit for bit:
// the same chunks (d % 512 == 0), summed in the same order.
bool hc_post_mix_is_mix_partial(int64_t d);
cudaError_t hc_post_mix(const float* streams, const float* out, const float* post, const float* comb, int64_t rows, int hc, int64_t d,
                        float* new_streams, const float* w, int n, float* partial, Stream s);

}  // namespace deepinfer::kernels
