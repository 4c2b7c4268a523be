// A weight as the checkpoint stores it (plain float, fp8 with block scales, or MXFP4), described
// without reference to the model; backends turn it into their own layout (fp32 on the CPU).
#pragma once

#include "util/dtype.h"
#include "util/result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer {

struct HostTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // as stored
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
};

enum class WeightFormat {
  kPlain,     // F32 / F16 / BF16 values of the logical shape
  kFp8Block,  // F8_E4M3 values, one scale per block_rows x block_cols block (E8M0 or float)
  kMxfp4,     // two E2M1 codes per byte (low nibble first), one E8M0 scale per 32 along a row
};

// One logical matrix [rows, cols] (or vector: rows = 1).
struct WeightSource {
  std::string name;  // for messages
  WeightFormat format = WeightFormat::kPlain;
  int64_t rows = 0, cols = 0;
  HostTensor values;
  HostTensor scale;  // fp8 / mxfp4 only
  int block_rows = 128, block_cols = 128;

  int64_t numel() const { return rows * cols; }
};

inline constexpr int kMxfp4Group = 32;

// Checks that values/scale have the dtype and shape the format requires.
Result<void> validate_weight_source(const WeightSource& w);

// Writes the weight as rows*cols fp32 values (row-major). The source must be valid.
void dequantize_to_f32(const WeightSource& w, float* out);

}  // namespace deepinfer
