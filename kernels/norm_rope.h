// RMS norms with the rope of each normalised head, and the rope alone (norm_rope.cu).
#pragma once

#include "launch.h"

namespace deepinfer::kernels {

// x and out may alias. With rope (and positions), each normalised group is then rotated as
// rope(..., head_dim = group, inverse = false) would.
cudaError_t rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t cols, int group, float* out,
                     Stream s, const RopeDev* rope = nullptr, const int32_t* positions = nullptr);
// rms_norm of two tensors of the same rows (and group, eps, rope) in one launch.
struct NormTensor {
  const float* x = nullptr;
  const float* weight = nullptr;  // group floats, or null
  int64_t cols = 0;               // a multiple of the group (0: no tensor)
  float* out = nullptr;
  bool bf16 = false;  // x and out hold bf16 values (cols, group and rope_dim multiples of 4; 8-byte aligned)
};
cudaError_t rms_norm_pair(const NormTensor& a, const NormTensor& b, float eps, int64_t rows, int group, Stream s,
                          const RopeDev* rope = nullptr, const int32_t* positions = nullptr);
cudaError_t rope(float* x, int64_t rows, int64_t cols, int head_dim, RopeDev rope, const int32_t* positions, bool inverse,
                 Stream s);
// rope on bf16 values (rotated in fp32, rounded back).
cudaError_t rope_bf16(bf16_t* x, int64_t rows, int64_t cols, int head_dim, RopeDev rope, const int32_t* positions, bool inverse,
                      Stream s);

}  // namespace deepinfer::kernels
