// Norms, rope and element-wise ops of the CUDA backend (kernels/norm_rope.cu, kernels/elementwise.cu).
// A decode step's query and key norms run as one launch (rms_norm_rope_pair); the attention query,
// where an architecture keeps it in bf16 (CudaDevice::AttentionQuery), is normalised in place in bf16
// or its norm left to the attention.
#include "backend/cuda/cuda_device.h"
#include "elementwise.h"
#include "norm_rope.h"

namespace deepinfer {

void CudaDevice::embed(const DeviceWeight& table, Tensor out) {
  Op op(*this, "embed");
  if (!op) return;
  const auto& w = cw(table);
  if (!expect(out.rows == fwd_.dev.rows && w.cols > 0 && out.cols % w.cols == 0 && out.cols >= w.cols,
              "embed: output [{}, {}] for {} rows of a [{}, {}] table", out.rows, out.cols, fwd_.dev.rows, w.rows, w.cols))
    return;
  // fp32 rows where the table is small enough to keep them, bf16 otherwise
  check(kn::embed(w.f32 ? nullptr : w.b16, w.f32, w.rows, w.cols, fwd_.dev.tokens, out.rows, static_cast<int>(out.cols / w.cols), out.data,
                  stream_),
        "embed");
}

void CudaDevice::rms_norm(Tensor x, const DeviceWeight* weight, float eps, int group, Tensor out) {
  Op op(*this, "rms_norm");
  if (!op) return;
  if (!expect(group > 0 && x.cols % group == 0 && out.rows == x.rows && out.cols == x.cols &&
                  (!weight || weight->rows * weight->cols == group),
              "rms_norm: [{}, {}] in groups of {}", x.rows, x.cols, group))
    return;
  const float* wt = weight ? fvec(*weight, "rms_norm weight") : nullptr;
  if (weight && !wt) return;
  check(kn::rms_norm(x.data, wt, eps, x.rows, x.cols, group, out.data, stream_), "rms_norm");
}

void CudaDevice::rms_norm_rope(Tensor x, const DeviceWeight* weight, float eps, int head_dim, const Rope& rope, Tensor out) {
  Op op(*this, "rms_norm + rope");
  if (!op) return;
  if (!expect(head_dim > 0 && x.cols % head_dim == 0 && out.rows == x.rows && out.cols == x.cols && x.rows == fwd_.dev.rows &&
                  (!weight || weight->rows * weight->cols == head_dim) && rope.rope_dim <= head_dim && rope.rope_dim % 2 == 0,
              "rms_norm_rope: [{}, {}] with head_dim {} and rope_dim {}", x.rows, x.cols, head_dim, rope.rope_dim))
    return;
  const bool query = x.data == query_.data;  // (bf16, in place)
  if (!expect(!query || out.data == x.data, "rms_norm_rope: the attention query is normalised in place")) return;
  const float* wt = weight ? fvec(*weight, "rms_norm weight") : nullptr;
  const kn::RopeDev r = rope_dev(rope);
  if ((weight && !wt) || !r.inv_freq) return;
  if (query && defer_query_norm(weight, eps, head_dim, r)) return;
  check(kn::rms_norm_pair(kn::NormTensor{x.data, wt, x.cols, out.data, query}, kn::NormTensor{}, eps, x.rows, head_dim, stream_, &r,
                          fwd_.dev.positions),
        "rms_norm + rope");
}

// One launch for both (a decode step's query and key norms).
void CudaDevice::rms_norm_rope_pair(Tensor a, const DeviceWeight* weight_a, Tensor b, const DeviceWeight* weight_b, float eps, int head_dim,
                        const Rope& rope) {
  Op op(*this, "rms_norm + rope");
  if (!op) return;
  auto fits = [&](Tensor x, const DeviceWeight* w) {
    return x.cols % head_dim == 0 && x.rows == fwd_.dev.rows && (!w || w->rows * w->cols == head_dim);
  };
  if (!expect(head_dim > 0 && fits(a, weight_a) && fits(b, weight_b) && rope.rope_dim <= head_dim && rope.rope_dim % 2 == 0,
              "rms_norm_rope_pair: [{}, {}] and [{}, {}] with head_dim {} and rope_dim {}", a.rows, a.cols, b.rows, b.cols, head_dim,
              rope.rope_dim))
    return;
  const float* wa = weight_a ? fvec(*weight_a, "rms_norm weight") : nullptr;
  const float* wb = weight_b ? fvec(*weight_b, "rms_norm weight") : nullptr;
  const kn::RopeDev r = rope_dev(rope);
  if ((weight_a && !wa) || (weight_b && !wb) || !r.inv_freq) return;
  if (a.data == query_.data && defer_query_norm(weight_a, eps, head_dim, r)) {  // b alone now
    check(kn::rms_norm_pair(kn::NormTensor{b.data, wb, b.cols, b.data, false}, kn::NormTensor{}, eps, b.rows, head_dim, stream_, &r,
                            fwd_.dev.positions),
          "rms_norm + rope");
    return;
  }
  check(kn::rms_norm_pair(kn::NormTensor{a.data, wa, a.cols, a.data, a.data == query_.data},
                          kn::NormTensor{b.data, wb, b.cols, b.data, b.data == query_.data}, eps, a.rows, head_dim, stream_, &r,
                          fwd_.dev.positions),
        "rms_norm + rope (pair)");
}

void CudaDevice::rope(Tensor x, int head_dim, const Rope& rope, bool inverse) {
  Op op(*this, "rope");
  if (!op) return;
  if (!expect(head_dim > 0 && x.cols % head_dim == 0 && rope.rope_dim <= head_dim && rope.rope_dim % 2 == 0 && x.rows == fwd_.dev.rows,
              "rope: [{}, {}] with head_dim {} and rope_dim {}", x.rows, x.cols, head_dim, rope.rope_dim))
    return;
  kn::RopeDev r = rope_dev(rope);
  if (!r.inv_freq) return;
  check(kn::rope(x.data, x.rows, x.cols, head_dim, r, fwd_.dev.positions, inverse, stream_), "rope");
}

void CudaDevice::add(Tensor a, Tensor b) {
  Op op(*this, "add");
  if (!op) return;
  if (!expect(a.rows * a.cols == b.rows * b.cols, "add: [{}, {}] += [{}, {}]", a.rows, a.cols, b.rows, b.cols)) return;
  check(kn::add(a.data, b.data, a.rows * a.cols, stream_), "add");
}

void CudaDevice::gather_rows(Tensor x, const std::vector<int32_t>& rows, Tensor out) {
  Op op(*this, "gather_rows");
  if (!op) return;
  if (!expect(out.rows == static_cast<int64_t>(rows.size()) && out.cols == x.cols, "gather_rows: {} rows into [{}, {}]", rows.size(),
              out.rows, out.cols))
    return;
  for (int32_t r : rows)
    if (!expect(r >= 0 && r < x.rows, "gather_rows: row {} of {}", r, x.rows)) return;
  if (rows.empty()) return;
  const int32_t* d = nullptr;
  if (batch_ && &rows == &batch_->logit_rows) {  // (uploaded with the batch)
    d = fwd_.logit_rows;
  } else {
    auto* p = static_cast<int32_t*>(temp(rows.size() * 4));
    if (!p) return;
    if (!check(cudaMemcpyAsync(p, rows.data(), rows.size() * 4, cudaMemcpyHostToDevice, stream_.id), "gather_rows upload")) return;
    d = p;
  }
  check(kn::gather_rows(x.data, x.cols, d, out.rows, out.data, stream_), "gather_rows");
}

void CudaDevice::argmax_rows(Tensor x, IntTensor out) {
  Op op(*this, "argmax_rows");
  if (!op) return;
  if (!expect(out.rows == x.rows && out.cols == 1, "argmax_rows: [{}, {}] into [{}, {}]", x.rows, x.cols, out.rows, out.cols)) return;
  check(kn::argmax_rows(x.data, x.rows, x.cols, out.data, stream_), "argmax_rows");
}

}  // namespace deepinfer
