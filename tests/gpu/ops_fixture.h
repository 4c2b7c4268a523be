// The fixture of the op tests: the CPU reference and the default CUDA backend side by side, with
// state storage for batches without layer state. Skips where no GPU is present.
#pragma once

#include "twin.h"

namespace deepinfer::testing {

inline constexpr double kBf16Tol = 1.5e-2;  // bf16 weights and activations into fp32-accumulated products
inline constexpr double kF32Tol = 2e-5;     // fp32 on both sides: summation order and libm only

inline StateLayout empty_layout() {
  StateLayout l;
  l.block_tokens = 16;
  return l;
}

// One sequence of T rows in slot 0 at position n_past.
inline ForwardBatch rows_batch(int32_t T, int32_t n_past = 0) {
  StateLayout l = empty_layout();
  std::vector<int32_t> blocks(static_cast<size_t>(l.blocks_for(n_past + T)), 0);  // no layer state: any valid id
  return make_batch({{0, n_past, T, blocks}});
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    auto g = gpu_backend();
    if (!g) {
      if (g.error().code == Code::kUnsupported) GTEST_SKIP() << g.error().message;
      FAIL() << g.error().message;
    }
    t.gpu = std::move(g.value());
    t.cpu = make_cpu_backend(2).value();
    t.allocate(empty_layout(), 2, 4096);
  }
  Twin t;
  std::mt19937 rng{1234};
};

}  // namespace deepinfer::testing
