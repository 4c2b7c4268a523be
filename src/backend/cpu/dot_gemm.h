// The CPU backend's matrix product, batch-invariant by construction: every output is a pure function
// of its two input rows and k. BLAS libraries pick kernels and reduction orders by the shape of the
// call, so a row's result would depend on which other rows share the call (seeded sampling would then
// depend on the batch).
#pragma once

#include <cstdint>

namespace deepinfer {

// c[i][j] = dot(a[i], b[j]) for i < m, j < n: a is [m, k] with row stride lda, b is [n, k] with row
// stride ldb, c is [m, n] with row stride ldc. Each dot product is accumulated in 8 lanes (lane l takes
// elements l, l + 8, ...; the last partial group padded with zeros) and the lanes are summed in a fixed
// order, whatever tile the element is computed in. Runs on the calling thread; any split of rows or
// columns over threads gives the same values.
void dot_gemm_nt(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
                 int64_t k);

}  // namespace deepinfer
