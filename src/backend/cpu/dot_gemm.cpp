// Built with -ffp-contract=off (src/backend/CMakeLists.txt): a multiply-add fused in one tile shape
// but not in another would make a row's result depend on the tile it falls in.
#include "backend/cpu/dot_gemm.h"

#include <algorithm>
#include <cstring>

namespace deepinfer {
namespace {

constexpr int kLanes = 8;
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));

// Register tile: kRows rows of a against kCols rows of b (12 accumulators leave room for the operands
// in the 16 vector registers of AVX2).
constexpr int kRows = 4, kCols = 3;
// Columns of b per pass over the rows of a: kColumnBlock * k floats stay in L2 (128 KiB at k = 256).
constexpr int64_t kColumnBlock = 128;

// Vectors go by reference: by value they would change the ABI between the two clones (-Wpsabi).
[[gnu::always_inline]] inline void load(Lanes& v, const float* p) { std::memcpy(&v, p, sizeof v); }

// The one reduction order every output uses.
[[gnu::always_inline]] inline float sum_lanes(const Lanes& v) {
  return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

// The k % 8 trailing elements of `rows` rows, zero padded (0 * 0 adds nothing to a lane), into
// `tails` (kLanes floats a row), so that tiles load whole vectors.
void pad_tails(const float* x, int64_t ld, int64_t rows, int64_t full, int64_t k, float* tails) {
  for (int64_t r = 0; r < rows; ++r) {
    float* t = tails + r * kLanes;
    std::fill_n(t, kLanes, 0.0f);
    std::copy(x + r * ld + full, x + r * ld + k, t);
  }
}

// c[R, C] = a[R rows] . b[C rows]; at and bt hold the rows' padded tails. Every tile shape does the
// same arithmetic per element, so the remainder tiles at the bottom and right edges give what a full
// tile would.
template <int R, int C>
[[gnu::always_inline]] inline void tile(const float* a, int64_t lda, const float* at, const float* b, int64_t ldb,
                                        const float* bt, float* c, int64_t ldc, int64_t k) {
  Lanes acc[R][C] = {};
  auto step = [&](const float* ap, int64_t as, const float* bp, int64_t bs) __attribute__((always_inline)) {
    Lanes av[R];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) load(av[i], ap + i * as);
#pragma GCC unroll 4
    for (int j = 0; j < C; ++j) {
      Lanes bv;
      load(bv, bp + j * bs);
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) acc[i][j] += av[i] * bv;
    }
  };
  const int64_t full = k - k % kLanes;
  for (int64_t p = 0; p < full; p += kLanes) step(a + p, lda, b + p, ldb);
  if (full < k) step(at, kLanes, bt, kLanes);
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) c[i * ldc + j] = sum_lanes(acc[i][j]);
}

template <int R>
[[gnu::always_inline]] inline void row_tile(const float* a, int64_t lda, const float* at, const float* b, int64_t ldb,
                                            const float* bt, float* c, int64_t ldc, int64_t n, int64_t k) {
  int64_t j = 0;
  for (; j + kCols <= n; j += kCols) tile<R, kCols>(a, lda, at, b + j * ldb, ldb, bt + j * kLanes, c + j, ldc, k);
  static_assert(kCols == 3);
  switch (n - j) {
    case 2: tile<R, 2>(a, lda, at, b + j * ldb, ldb, bt + j * kLanes, c + j, ldc, k); break;
    case 1: tile<R, 1>(a, lda, at, b + j * ldb, ldb, bt + j * kLanes, c + j, ldc, k); break;
    default: break;
  }
}

}  // namespace

// The AVX2 clone runs the same operations on 256-bit registers (no FMA: contraction is off), so both
// clones give the same bits; one is picked per process.
__attribute__((target_clones("avx2", "default"))) void dot_gemm_nt(const float* a, int64_t lda, const float* b, int64_t ldb,
                                                                     float* c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  const int64_t full = k - k % kLanes;
  float a_tails[kRows * kLanes], b_tails[kColumnBlock * kLanes];
  for (int64_t jb = 0; jb < n; jb += kColumnBlock) {
    const int64_t nb = std::min(kColumnBlock, n - jb);
    const float* bb = b + jb * ldb;
    pad_tails(bb, ldb, nb, full, k, b_tails);
    for (int64_t i = 0; i < m; i += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, m - i);
      const float* ai = a + i * lda;
      float* ci = c + i * ldc + jb;
      pad_tails(ai, lda, rows, full, k, a_tails);
      switch (rows) {
        case 4: row_tile<4>(ai, lda, a_tails, bb, ldb, b_tails, ci, ldc, nb, k); break;
        case 3: row_tile<3>(ai, lda, a_tails, bb, ldb, b_tails, ci, ldc, nb, k); break;
        case 2: row_tile<2>(ai, lda, a_tails, bb, ldb, b_tails, ci, ldc, nb, k); break;
        default: row_tile<1>(ai, lda, a_tails, bb, ldb, b_tails, ci, ldc, nb, k); break;
      }
    }
  }
}

}  // namespace deepinfer
