// Products of the CUDA backend: decode rows (<= kDecodeRows) on the GEMV kernels (kernels/gemv.cu),
// several products of one input as one launch and the input norm inside it; more rows through
// cuBLAS from one bf16 copy of the input; fp32 weights (fp32 mode, small matrices where asked)
// through cuBLAS's fp32 products. Batch-invariant mode: every product, whatever its row count, on
// tile_linear.h's kernels, picked by the weight's shape alone (their sums do not depend on the rows).
#include "backend/cuda/cuda_device.h"
#include "elementwise.h"
#include "fp8_operands.h"
#include "gemv.h"
#include "native_gemv.h"
#include "tile_linear.h"

#include <algorithm>

namespace deepinfer {
namespace {

// FP8 weights kept as stored with at least this many outputs run on the FP8 tensor cores beyond
// decode: measured 1.1-4x faster there than dequantizing per call for cuBLAS's bf16 product (V4-Flash's
// shapes at 64 to 4096 rows, tools/bench/fp8_prefill_bench), no faster or slower below (512 and 1024
// outputs: the weight's scales and the activations' quantization are launches of their own).
constexpr int64_t kFp8TensorCoreMinOutputs = 2048;
// cuBLASLt (CUDA 13) has block-scaled E4M3 algorithms only for row counts that are multiples of 4
// (fp8_prefill_bench's table); other counts take the dequantized product.
constexpr int64_t kFp8RowMultiple = 4;

}  // namespace

void CudaDevice::linear(Tensor x, const DeviceWeight& w, Tensor out) {
  Op op(*this, "linear", w.rows, w.cols);
  if (!op) return;
  if (!expect(w.count == 1 && x.cols == w.cols && out.cols == w.rows && out.rows == x.rows,
              "linear: [{}, {}] @ [{}, {}]^T into [{}, {}]", x.rows, x.cols, w.rows, w.cols, out.rows, out.cols))
    return;
  if (out.data == query_.data) {
    const DeviceWeight* ws[] = {&w};
    const Tensor outs[] = {out};
    return linears(x, ws, outs);
  }
  gemm(x.data, x.rows, x.cols, x.cols, cw(w), 0, w.rows, w.cols, 0, 1, out.data, out.cols, false);
}

// outs[i] = x @ ws[i]^T are bf16 products of x's whole rows (what one launch, or one bf16 copy of x, serves).
bool CudaDevice::bf16_products_of(Tensor x, std::span<const DeviceWeight* const> ws, std::span<const Tensor> outs) {
  bool ok = !ws.empty() && ws.size() == outs.size();
  for (size_t i = 0; ok && i < ws.size(); ++i) {
    const CudaWeight& w = cw(*ws[i]);
    ok = w.has_matrix() && w.count == 1 && w.cols == x.cols && outs[i].rows == x.rows && outs[i].cols == w.rows;
  }
  return ok;
}

// Decode: products of one input as one GEMV launch (false: they are not for one).
bool CudaDevice::gemv_list_of(Tensor x, std::span<const DeviceWeight* const> ws, std::span<const Tensor> outs, kn::GemvList& list) {
  if (invariant_ || x.rows > kDecodeRows || ws.size() > kn::kGemvMaxProducts || !bf16_products_of(x, ws, outs)) return false;
  for (size_t i = 0; i < ws.size(); ++i) {
    const CudaWeight& w = cw(*ws[i]);
    if (!w.b16 || !kn::gemv_supported(x.data, x.cols, w.b16, x.cols)) return false;
    list.p[list.count++] = kn::GemvProduct{w.b16, outs[i].data, w.rows, w.rows, outs[i].cols};
  }
  return true;
}

// Decode: the products as one GEMV launch. Prefill: x converted to bf16 once for all of them
// (one product after the other converted it each time: 7 times a CSA layer's input). Else one
// product after the other.
void CudaDevice::linears(Tensor x, std::span<const DeviceWeight* const> ws, std::span<const Tensor> outs) {
  kn::GemvList list;
  if (gemv_list_of(x, ws, outs, list)) {
    Op op(*this, "linears (GEMV)");
    if (op) check(kn::gemv_list(x.data, x.rows, x.cols, x.cols, list, stream_), "GEMV list");
    return;
  }
  const bool query = std::any_of(outs.begin(), outs.end(), [&](const Tensor& t) { return t.data == query_.data; });
  const bool decode = x.rows <= kDecodeRows && !invariant_;
  if (fp32_ || !bf16_products_of(x, ws, outs) || (!query && (decode || ws.size() < 2))) {
    // (attention_query keeps a query in bf16 only where its product is one of these)
    if (!query) return Backend::linears(x, ws, outs);
    Op op(*this, "linears");
    if (op) expect(false, "linears: the attention query of [{}, {}] must be a bf16 product of whole rows", x.rows, x.cols);
    return;
  }
  Op op(*this, "linears (one bf16 input)");
  if (!op) return;
  const kn::bf16_t* xb = activations_bf16(x.data, x.rows * x.cols);
  for (size_t i = 0; xb && i < ws.size(); ++i) {
    const CudaWeight& w = cw(*ws[i]);
    if (!gemm_bf16(main_lane(), xb, x.rows, x.cols, x.cols, w, 0, w.rows, w.cols, 0, 1, outs[i].data, outs[i].cols, outs[i].data == query_.data))
      return;
  }
}

// Decode: the norm inside the products' GEMV launch (x is left as it was). Else the two ops.
void CudaDevice::rms_norm_linears(Tensor x, const DeviceWeight* weight, float eps, std::span<const DeviceWeight* const> ws,
                      std::span<const Tensor> outs) {
  kn::GemvList list;
  const CudaWeight* nw = weight ? &cw(*weight) : nullptr;  // (an unweighted norm: the two ops)
  if (!nw || !nw->f32 || nw->rows * nw->cols != x.cols || !gemv_list_of(x, ws, outs, list))
    return Backend::rms_norm_linears(x, weight, eps, ws, outs);
  Op op(*this, "rms_norm + linears (GEMV)");
  if (!op) return;
  list.norm = nw->f32;
  list.norm_eps = eps;
  check(kn::gemv_list(x.data, x.rows, x.cols, x.cols, list, stream_), "GEMV list with the input norm");
}

void CudaDevice::grouped_linear(Tensor x, const DeviceWeight& w, int groups, Tensor out) {
  Op op(*this, "grouped_linear", w.rows, w.cols);
  if (!op) return;
  if (!expect(groups > 0 && x.cols % groups == 0 && w.rows % groups == 0 && w.cols == x.cols / groups &&
                  out.cols == w.rows && out.rows == x.rows,
              "grouped_linear: [{}, {}] in {} groups with [{}, {}] into [{}, {}]", x.rows, x.cols, groups, w.rows, w.cols, out.rows,
              out.cols))
    return;
  const int64_t k = x.cols / groups, n = w.rows / groups;
  gemm(x.data, x.rows, k, x.cols, cw(w), 0, n, k, n * k, groups, out.data, out.cols, false);
}

// C[i] (rows x n, ldc) = X[i] (rows x k, ldx) @ W[i]^T for `batch` groups: X[i] = x + i * k,
// W[i] = w + w_off + i * w_stride, C[i] = c + i * n. bf16 weights (activations rounded to bf16)
// unless prefer_f32 and the weight has an fp32 copy; fp32 accumulation either way.
bool CudaDevice::gemm(const float* x, int64_t rows, int64_t k, int64_t ldx, const CudaWeight& w, int64_t w_off, int64_t n, int64_t wk,
          int64_t w_stride, int batch, float* c, int64_t ldc, bool prefer_f32) {
  if (rows == 0 || n == 0) return true;
  const float one = 1.0f, zero = 0.0f;
  const bool use_f32 = w.f32 && (prefer_f32 || (!w.b16 && !w.stored_values));
  if (invariant_ && use_f32) {
    if (!expect(wk == k && (batch == 1 || w_stride == n * k), "GEMM: a strided weight in batch-invariant mode")) return false;
    const int64_t part_floats = kn::tile_linear_f32_scratch(rows, k, n, batch);
    auto* part = part_floats ? static_cast<float*>(temp(static_cast<size_t>(part_floats) * 4)) : nullptr;
    return (!part_floats || part) &&
           check(kn::tile_linear_f32(x, rows, k, ldx, w.f32 + w_off, n, batch, c, ldc, part, stream_), "fp32 tile product");
  }
  if (use_f32) {
    return check_blas(cublasSgemmStridedBatched(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows),
                                                static_cast<int>(k), &one, w.f32 + w_off, static_cast<int>(wk), w_stride, x,
                                                static_cast<int>(ldx), k, &zero, c, static_cast<int>(ldc), n, batch),
                      "fp32 GEMM");
  }
  if (w.stored_values && !invariant_ && rows <= kn::kNativeGemvMaxRows) {
    bool ok = false;
    if (native_products(x, rows, k, ldx, w, w_off, n, wk, w_stride, batch, c, ldc, ok)) return ok;
  }
  if (!w.b16 && !w.stored_values) return expect(false, "GEMM with a weight that has no matrix copy on the device");
  if (w.b16 && !invariant_ && rows <= kDecodeRows && wk == k && (batch == 1 || w_stride == n * k) &&
      kn::gemv_supported(x, ldx, w.b16 + w_off, k))
    return check(kn::gemv(x, rows, ldx, w.b16 + w_off, n * batch, k, n, c, ldc, stream_), "GEMV");
  const kn::bf16_t* xb = activations_bf16(x, rows * ldx);
  return xb && gemm_bf16(main_lane(), xb, rows, k, ldx, w, w_off, n, wk, w_stride, batch, c, ldc);
}

// The activations x (n floats) as bf16 in the temporary arena, or null (the error kept).
const kn::bf16_t* CudaDevice::activations_bf16(const float* x, int64_t n) {
  auto* xb = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(n) * 2));
  return xb && check(kn::f32_to_bf16(x, xb, n, stream_), "activation to bf16") ? xb : nullptr;
}

const kn::bf16_t* CudaDevice::matrix_bf16(const CudaWeight& w, kn::Stream stream) {
  if (w.b16) return w.b16;
  if (!w.stored_values) {
    expect(false, "a product with a weight that has no matrix copy on the device");
    return nullptr;
  }
  auto* b = static_cast<kn::bf16_t*>(temp(static_cast<size_t>(std::max<int64_t>(w.count, 1) * w.rows * w.cols) * 2));
  if (!b) return nullptr;
  if (w.stored_format == kn::StoredFormat::kMxfp4) {  // (a stack's experts are one matrix of count x rows rows to MXFP4)
    kn::QuantizedWeight all = w.stored;
    all.rows *= std::max<int64_t>(w.count, 1);
    return check(kn::dequantize_mxfp4(all, b, nullptr, stream), "dequantizing stored experts") ? b : nullptr;
  }
  return check(kn::dequantize_fp8_block(w.stored, b, nullptr, stream), "dequantizing a stored weight") ? b : nullptr;
}

namespace {

// Rows [first, first + n) of a stored FP8 weight, where `first` starts a block row.
kn::QuantizedWeight stored_rows(const kn::QuantizedWeight& w, int64_t first, int64_t n) {
  kn::QuantizedWeight v = w;
  v.values = w.values + first * w.cols;
  v.scale = static_cast<const uint8_t*>(w.scale) + first / w.block_rows * w.scale_cols * kn::scale_bytes(w.scale_type);
  v.rows = n;
  return v;
}

}  // namespace

bool CudaDevice::native_products(const float* x, int64_t rows, int64_t k, int64_t ldx, const CudaWeight& w, int64_t w_off, int64_t n,
                                 int64_t wk, int64_t w_stride, int batch, float* c, int64_t ldc, bool& ok) {
  const kn::QuantizedWeight& q = w.stored;
  if (w.stored_format != kn::StoredFormat::kFp8Block || w.count > 1 || wk != k || k != q.cols || w_off % k != 0 ||
      (batch > 1 && w_stride != n * k))
    return false;
  for (int i = 0; i < batch; ++i) {
    const int64_t first = w_off / k + i * n;
    if (first % q.block_rows != 0 || first + n > q.rows ||
        !kn::native_gemv_supported(stored_rows(q, first, n), kn::StoredFormat::kFp8Block, x + i * k, ldx))
      return false;
  }
  const kn::QuantizedWeight first = stored_rows(q, w_off / k, n);
  ok = batch == 1 ? check(kn::native_gemv(x, rows, ldx, first, kn::StoredFormat::kFp8Block, c, ldc, stream_), "native GEMV")
                  : check(kn::native_grouped_gemv(x, rows, ldx, batch, first, kn::StoredFormat::kFp8Block, c, ldc, stream_),
                          "native grouped GEMV");
  return true;
}

bool CudaDevice::fp8_products(const Lane& lane, const kn::bf16_t* xb, int64_t rows, int64_t k, int64_t ldx, const CudaWeight& w,
                              int64_t w_off, int64_t n, int64_t wk, int64_t w_stride, int batch, float* c, int64_t ldc, bool c_bf16,
                              bool& ok) {
  constexpr int64_t B = kn::kFp8ScaleBlock;
  const kn::QuantizedWeight& q = w.stored;
  if (invariant_ || !w.stored_values || w.stored_format != kn::StoredFormat::kFp8Block || w.count > 1 || n < kFp8TensorCoreMinOutputs ||
      wk != k || k != q.cols || k % B != 0 || n % B != 0 || w_off % (B * k) != 0 || (batch > 1 && w_stride != n * k) || q.block_rows != B ||
      q.block_cols != B || ldx % 4 != 0 || reinterpret_cast<uintptr_t>(xb) % 8 != 0 || rows <= 0 || rows % kFp8RowMultiple != 0)
    return false;
  const int64_t kb = k / B, ld = (kb + 3) / 4 * 4;  // (cuBLASLt reads a block row's scales padded to 4)
  auto* xq = static_cast<uint8_t*>(temp(static_cast<size_t>(rows * k)));
  auto* xs = static_cast<float*>(temp(static_cast<size_t>(rows * kb) * 4));
  auto* ws = static_cast<float*>(temp(static_cast<size_t>(n / B * ld) * 4));
  ok = xq && xs && ws;
  for (int g = 0; ok && g < batch; ++g) {
    const kn::QuantizedWeight wg = stored_rows(q, w_off / k + g * n, n);
    ok = check(kn::weight_scales_f32(wg, ws, ld, lane.stream), "FP8 weight scales") &&
         check(kn::quantize_activations_e4m3(xb + g * k, rows, k, ldx, xq, xs, lane.stream), "FP8 activations");
    if (!ok) break;
    void* out = c_bf16 ? static_cast<void*>(reinterpret_cast<kn::bf16_t*>(c) + g * n) : static_cast<void*>(c + g * n);
    const cublasStatus_t s =
        fp8_gemm_.run({wg.values, ws, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F}, {xq, xs, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F}, rows,
                      n, k, out, ldc, c_bf16, lane.workspace, kBlasWorkspaceBytes, lane.stream.id);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED && g == 0) return false;  // (no algorithm for the shape: the bf16 product)
    ok = check_blas(s, "FP8 GEMM");
  }
  return true;
}

// gemm's cuBLAS product from activations already in bf16 (c_bf16: c holds bf16 values), on `lane`.
bool CudaDevice::gemm_bf16(const Lane& lane, const kn::bf16_t* xb, int64_t rows, int64_t k, int64_t ldx, const CudaWeight& w, int64_t w_off,
                           int64_t n, int64_t wk, int64_t w_stride, int batch, float* c, int64_t ldc, bool c_bf16) {
  const float one = 1.0f, zero = 0.0f;
  if (bool ok = false; fp8_products(lane, xb, rows, k, ldx, w, w_off, n, wk, w_stride, batch, c, ldc, c_bf16, ok)) return ok;
  const kn::bf16_t* wb = matrix_bf16(w, lane.stream);
  if (!wb) return false;
  if (invariant_) {
    if (!expect(!c_bf16 && wk == k && (batch == 1 || w_stride == n * k), "GEMM: a bf16 output or strided weight in batch-invariant mode"))
      return false;
    // wgmma wherever the shape allows (by the weight's shape alone: either kernel's sums are the same
    // for any rows; its chunks of K spread a decode step's few rows over the multiprocessors), the
    // mma.sync tiles for the rest. (Products of fewer than 4096 outputs on the mma.sync tiles instead:
    // 0.06 ms faster a batch-1 decode step on V4-Flash-4L, 3.0 ms slower a 4096-token prefill.)
    if (wgmma_ && kn::tile_linear_wgmma_supported(k, ldx, n, ldc, xb, wb + w_off, c)) {
      const int64_t part_floats = kn::tile_linear_wgmma_scratch(rows, k, n, batch);
      auto* part = part_floats ? static_cast<float*>(temp(static_cast<size_t>(part_floats) * 4)) : nullptr;
      return (!part_floats || part) &&
             check(kn::tile_linear_wgmma(xb, rows, k, ldx, wb + w_off, n, batch, c, ldc, part, lane.stream), "tile product (wgmma)");
    }
    const int64_t part_floats = kn::tile_linear_scratch(rows, k, n, batch);
    auto* part = part_floats ? static_cast<float*>(temp(static_cast<size_t>(part_floats) * 4)) : nullptr;
    return (!part_floats || part) &&
           check(kn::tile_linear(xb, rows, k, ldx, wb + w_off, n, batch, c, ldc, part, lane.stream), "tile product");
  }
  if (batch == 1)
    return check_blas(cublasGemmEx(lane.blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows), static_cast<int>(k),
                                   &one, wb + w_off, CUDA_R_16BF, static_cast<int>(wk), xb, CUDA_R_16BF, static_cast<int>(ldx), &zero, c,
                                   c_bf16 ? CUDA_R_16BF : CUDA_R_32F, static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      "bf16 GEMM");
  return check_blas(cublasGemmStridedBatchedEx(lane.blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows),
                                               static_cast<int>(k), &one, wb + w_off, CUDA_R_16BF, static_cast<int>(wk), w_stride, xb,
                                               CUDA_R_16BF, static_cast<int>(ldx), k, &zero, c, c_bf16 ? CUDA_R_16BF : CUDA_R_32F,
                                               static_cast<int>(ldc), n, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    "bf16 GEMM");
}

}  // namespace deepinfer
