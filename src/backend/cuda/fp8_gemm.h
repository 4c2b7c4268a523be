// FP8 tensor-core products: cuBLASLt's block-scaled E4M3 matmul on Hopper (the scaling of DeepSeek's
// own kernels: the weight with one fp32 scale per 128 x 128 block, or per row and 128 columns; the
// activations per row and 128 columns; kernels/fp8_operands.h makes both). Algorithms are found once
// per shape and kept. Depends on cuBLASLt alone (tools/bench/fp8_prefill_bench builds it too).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

namespace deepinfer {

class Fp8Gemm {
 public:
  // E4M3 values (row-major, K fastest) and their fp32 scales in cuBLASLt's layout for `mode`
  // (BLK128x128_32F: [row block][ceil(k / 128) rounded up to 4]; VEC128_32F: [k / 128][row]).
  struct Operand {
    const uint8_t* values;
    const float* scales;
    cublasLtMatmulMatrixScale_t mode;
  };

  Fp8Gemm() = default;
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;
  ~Fp8Gemm();
  cublasStatus_t init();

  // out (rows x n, row stride ldo; fp32, or bf16 where out_bf16) = x (rows x k) @ w (n x k)^T with fp32
  // accumulation, on `stream` with `workspace`. CUBLAS_STATUS_NOT_SUPPORTED: cuBLASLt has no algorithm
  // for this shape (nothing launched).
  cublasStatus_t run(Operand w, Operand x, int64_t rows, int64_t n, int64_t k, void* out, int64_t ldo, bool out_bf16, void* workspace,
                     size_t workspace_bytes, cudaStream_t stream);

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int, int, bool>;  // rows, n, k, ldo, modes, out_bf16
  static constexpr size_t kMaxAlgos = 4096;                                    // (prefill chunks of any row count: forgotten past this)
  cublasLtHandle_t lt_ = nullptr;
  std::map<Key, std::pair<bool, cublasLtMatmulAlgo_t>> algos_;  // (false: no algorithm)
};

}  // namespace deepinfer
