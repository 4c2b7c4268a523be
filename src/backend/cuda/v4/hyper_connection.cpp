// Hyper-connections of DeepSeek-V4 on the CUDA backend (kernels/hyper_connection.cu,
// kernels/hc_mix_mma.cu): the mixes (fp32, a kernel of their own for few outputs; many rows on the
// tensor cores as three bf16 terms, except in batch-invariant mode), the collapse with the sublayer's
// norm, the Sinkhorn, the new streams; at decode the next site's mix computed with the new streams
// (HcMixAhead).
#include "backend/cuda/v4/cuda_v4_backend.h"
#include "hyper_connection.h"

#include <utility>

namespace deepinfer {

void CudaV4Backend::hc_pre(Tensor streams, const HyperConnection& hc, Tensor collapsed, Tensor post, Tensor comb, HcMixAhead ahead) {
  Op op(*this, "hc_pre");
  if (!op) return;
  const int n = hc.hc, mix = (2 + n) * n;
  const int64_t d = collapsed.cols;
  if (!expect(n >= 1 && n <= 16 && streams.cols == n * d && hc.fn->rows == mix && hc.fn->cols == streams.cols &&
                  collapsed.rows == streams.rows && post.cols == n && comb.cols == n * n,
              "hc_pre: streams [{}, {}], hc {}, collapsed [{}, {}]", streams.rows, streams.cols, n, collapsed.rows, collapsed.cols))
    return;
  const float* base = fvec(*hc.base, "hc base");
  const float* scale = fvec(*hc.scale, "hc scale");
  if (!base || !scale) return;
  const float* norm = nullptr;
  if (hc.sublayer_norm && !(norm = sublayer_norm(hc, d))) return;
  const auto [part, splits] = mix_product(streams, cw(*hc.fn), mix, ahead);
  if (!part) return;
  check(kn::hc_pre(streams.data, part, splits, streams.rows, n, d, base, scale, hc.sinkhorn_iters, hc.eps, hc.norm_eps, norm,
                   collapsed.data, post.data, comb.data, stream_),
        "hc_pre");
}

// The norm weight of hc.sublayer_norm for rows of d, or null (the error kept).
const float* CudaV4Backend::sublayer_norm(const HyperConnection& hc, int64_t d) {
  if (!expect(hc.sublayer_norm->rows * hc.sublayer_norm->cols == d, "hyper-connection: a norm of {} values for rows of {}",
              hc.sublayer_norm->rows * hc.sublayer_norm->cols, d))
    return nullptr;
  return fvec(*hc.sublayer_norm, "norm weight");
}

// Decode: the new streams and the next site's mix of them in one launch (kernels::hc_post_mix), the
// mix kept in post_mix_ for the hc_pre / hc_head the returned HcMixAhead is handed to.
HcMixAhead CudaV4Backend::hc_post(Tensor streams, Tensor out, Tensor post, Tensor comb, Tensor new_streams, const DeviceWeight* next_fn) {
  Op op(*this, "hc_post");
  if (!op) return {};
  const int n = static_cast<int>(post.cols);
  if (!expect(streams.cols == n * out.cols && new_streams.cols == streams.cols && comb.cols == n * n,
              "hc_post: streams [{}, {}], out [{}, {}], hc {}", streams.rows, streams.cols, out.rows, out.cols, n))
    return {};
  pending_mix_ = {};
  const float* fn = next_fn ? cw(*next_fn).f32 : nullptr;
  const int splits = kn::hc_post_mix_splits(n, out.cols);
  // (batch-invariant mode: where its sums are mix_partial's, which larger batches take)
  if (fn && (!invariant_ || kn::hc_post_mix_is_mix_partial(out.cols)) && streams.rows <= kDecodeRows && next_fn->cols == streams.cols &&
      next_fn->rows <= kn::kMixMaxOut && static_cast<size_t>(streams.rows * splits * (next_fn->rows + 1)) <= kPostMixFloats) {
    const cudaError_t e = kn::hc_post_mix(streams.data, out.data, post.data, comb.data, streams.rows, n, out.cols, new_streams.data, fn,
                                          static_cast<int>(next_fn->rows), post_mix_, stream_);
    if (e != cudaErrorInvalidValue) {  // (shapes it does not take: the plain kernel below)
      if (!check(e, "hc_post + next mix")) return {};
      pending_mix_ = {++mix_serial_, new_streams.data, next_fn, splits};
      return HcMixAhead{pending_mix_.id};
    }
  }
  check(kn::hc_post(streams.data, out.data, post.data, comb.data, streams.rows, n, out.cols, new_streams.data, stream_), "hc_post");
  return {};
}

void CudaV4Backend::hc_head(Tensor streams, const HyperConnection& hc, Tensor out, HcMixAhead ahead) {
  Op op(*this, "hc_head");
  if (!op) return;
  const int n = hc.hc;
  if (!expect(n >= 1 && n <= 16 && streams.cols == n * out.cols && hc.fn->rows == n && hc.fn->cols == streams.cols,
              "hc_head: streams [{}, {}], hc {}, out [{}, {}]", streams.rows, streams.cols, n, out.rows, out.cols))
    return;
  const float* base = fvec(*hc.base, "hc_head base");
  const float* scale = fvec(*hc.scale, "hc_head scale");
  if (!base || !scale) return;
  const float* norm = nullptr;
  if (hc.sublayer_norm && !(norm = sublayer_norm(hc, out.cols))) return;
  const auto [part, splits] = mix_product(streams, cw(*hc.fn), n, ahead);
  if (!part) return;
  check(kn::hc_head(streams.data, part, splits, streams.rows, n, out.cols, base, scale, hc.eps, hc.norm_eps, norm, out.data, stream_),
        "hc_head");
}

// A hyper-connection mix of x (n outputs) in the partial layout of kernels::mix_partial: its
// kernel where the weight has an fp32 copy and n is small, else (one split) cuBLAS and
// kernels::row_sumsq; or the mix hc_post computed ahead. Returns the partials (null on failure) and
// their split count.
std::pair<float*, int> CudaV4Backend::mix_product(Tensor x, const CudaWeight& w, int n, HcMixAhead ahead) {
  const PendingMix pending = std::exchange(pending_mix_, {});
  if (ahead.id != 0) {
    if (!expect(ahead.id == pending.id && pending.streams == x.data && pending.fn == &w,
                "hyper-connection: the mix computed ahead is not of these streams and weights"))
      return {nullptr, 0};
    return {post_mix_, pending.splits};
  }
  const bool kernel = w.f32 && n <= kn::kMixMaxOut;
  const int splits = kernel ? kn::mix_splits(x.cols) : 1;
  auto* part = static_cast<float*>(temp(static_cast<size_t>(x.rows) * splits * (n + 1) * 4));
  if (!part) return {nullptr, 0};
  const bool ok = kernel ? check(kn::mix_partial(x.data, x.rows, x.cols, w.f32, n, part, stream_), "hyper-connection mix")
                         : gemm(x.data, x.rows, x.cols, x.cols, w, 0, n, x.cols, 0, 1, part, n + 1, true) &&
                               check(kn::row_sumsq(x.data, x.rows, x.cols, part + n, n + 1, stream_), "hyper-connection norm");
  return {ok ? part : nullptr, splits};
}

}  // namespace deepinfer
