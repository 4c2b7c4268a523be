// Element-wise kernels (elementwise.cu): conversions, synthetic weights, the embedding, sums, gathers,
// the greedy argmax, the clamped SwiGLU.
#pragma once

#include "launch.h"

namespace deepinfer::kernels {

cudaError_t f32_to_bf16(const float* x, bf16_t* y, int64_t n, Stream s);
cudaError_t bf16_to_f32(const bf16_t* x, float* y, int64_t n, Stream s);
// Element i = mean + stddev * u(seed, i), u uniform with unit variance (src/backend/random_fill.h
// computes the same values on the host). Writes f32 and/or bf16 (either may be null).
cudaError_t fill_random(float* f32, bf16_t* b16, int64_t n, float mean, float stddev, uint64_t seed, Stream s);
// The same n values quantized as DeepSeek's checkpoints store them, with one power-of-two scale for the
// whole fill (2^ceil(log2(amax / max)), amax = |mean| + sqrt(3) stddev, max 448 for E4M3 and 6 for
// E2M1): E4M3 bytes (nearest, saturated) or E2M1 nibbles (nearest, ties down; low nibble first, n
// even) into `values`, the scale's E8M0 code into each of the n_scales bytes at `scales`.
cudaError_t fill_random_stored(uint8_t* values, uint8_t* scales, int64_t n_scales, bool mxfp4, int64_t n, float mean, float stddev,
                               uint64_t seed, Stream s);
// Keeps one multiprocessor busy for about `ns` nanoseconds (lets the host queue work ahead when
// timing ops with events).
cudaError_t spin(int64_t ns, Stream s);
// out[r] = table[tokens[r]] repeated `times` times (bf16 table, or fp32 when table_b16 is null)
cudaError_t embed(const bf16_t* table_b16, const float* table_f32, int64_t vocab, int64_t cols, const int32_t* tokens,
                  int64_t rows, int times, float* out, Stream s);
cudaError_t add(float* a, const float* b, int64_t n, Stream s);
cudaError_t gather_rows(const float* x, int64_t cols, const int32_t* rows, int64_t n, float* out, Stream s);
// out[r] = index of the largest value of row r, the lowest among equal ones; -1 when the row is all
// -inf, -2 when it holds a NaN or +inf (greedy decoding without moving the logits).
cudaError_t argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out, Stream s);
// g = silu(min(g, limit)) * clamp(u, -limit, limit), in place on g
cudaError_t swiglu(float* g, const float* u, int64_t n, float limit, Stream s);
// h = bf16(silu(min(g, limit)) * clamp(u, -limit, limit))
cudaError_t swiglu_bf16(const float* g, const float* u, int64_t n, float limit, bf16_t* h, Stream s);

}  // namespace deepinfer::kernels
