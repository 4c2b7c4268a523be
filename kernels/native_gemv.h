// Products of a few activation rows (decode) with weights kept in their checkpoint formats
// (native_gemv.cu): FP8 E4M3 with block scales, MXFP4. Each stored byte is read once and
// dequantized in registers; the bytes read are the checkpoint's, not bf16's two (FP8) or four (MXFP4)
// times as many.
#pragma once

#include "dequantize.h"

namespace deepinfer::kernels {

inline constexpr int kNativeGemvMaxRows = 8;
// Whether the kernels take w (w.rows outputs of w.cols inputs) and x: cols a multiple of 16 (FP8, with
// block_cols a multiple of 64) or 32 (MXFP4, E8M0 scales), w.values and x 16-byte aligned and ldx a
// multiple of 4.
bool native_gemv_supported(const QuantizedWeight& w, StoredFormat format, const float* x, int64_t ldx);
// out[r, o] (ldo floats apart) = Σ_c x[r, c] · W[o, c] for r < rows <= kNativeGemvMaxRows and
// o < w.rows, W the dequantized weight, on the tensor cores: x rounded to bf16, the weight's values
// exact, FP8 block scales applied to fp32 partial sums, fp32 sums in a fixed order (a row's result
// does not depend on the others or on their number; parts below fp32's normal range may flush to
// zero). w.nan_free spares the FP8 kernel its test for NaN codes. A NaN value or scale makes the
// output NaN, as the dequantized weight's would.
cudaError_t native_gemv(const float* x, int64_t rows, int64_t ldx, const QuantizedWeight& w, StoredFormat format, float* out, int64_t ldo,
                        Stream s);

// Routed-expert products of decode rows: for each pair p < pairs (<= 65535), out[p * ldo + o] =
// Σ_c x[p / k, c] · W_e[o, c] for o < stack.rows, where e = experts[p] (device memory) and W_e is
// matrix e of `stack`: n_exp matrices of stack.rows x stack.cols stored one after the other, their
// scales likewise. An id outside [0, n_exp) gives
// zeros. With k = 1 each pair has its own activation row (the experts' down products).
cudaError_t native_expert_gemv(const float* x, int64_t ldx, const int32_t* experts, int64_t pairs, int k, const QuantizedWeight& stack,
                               int64_t n_exp, StoredFormat format, float* out, int64_t ldo, Stream s);

// Grouped products of decode rows (wo_a's form): for each group i < groups, out[r * ldo + i * stack.rows
// + o] = Σ_c x[r * ldx + i * stack.cols + c] · W_i[o, c] for r < rows <= kNativeGemvMaxRows, W_i matrix
// i of `stack` (as in native_expert_gemv; FP8: stack.rows a multiple of its block rows). One launch.
cudaError_t native_grouped_gemv(const float* x, int64_t rows, int64_t ldx, int groups, const QuantizedWeight& stack, StoredFormat format,
                                float* out, int64_t ldo, Stream s);

}  // namespace deepinfer::kernels
