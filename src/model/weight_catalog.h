// Finds the model's tensors in a checkpoint under DeepSeek's native names, with or without a
// `model.` prefix and with the aliases HF's save_pretrained writes, and describes each as a
// WeightSource (plain, fp8 + block scale, or MXFP4 + scale). Remembers what was used so that an
// unexpected tensor is reported instead of silently ignored.
#pragma once

#include "backend/weight_source.h"
#include "model/safetensors.h"
#include "util/result.h"

#include <set>
#include <string>
#include <vector>

namespace deepinfer {

class WeightCatalog {
 public:
  WeightCatalog(const Checkpoint& ckpt, int block_rows, int block_cols)
      : ckpt_(ckpt), block_rows_(block_rows), block_cols_(block_cols) {}

  // A matrix [rows, cols] (a vector when rows == 1) stored under `name` (native, unprefixed).
  Result<WeightSource> matrix(const std::string& name, int64_t rows, int64_t cols);
  // An integer table [rows, cols] (I64 or I32), e.g. tid2eid.
  Result<std::vector<int32_t>> int_table(const std::string& name, int64_t rows, int64_t cols);
  bool has(const std::string& name) const { return find(name) != nullptr; }

  // Error for the first tensor that was never used (tensors of the MTP module, `mtp.*`, are skipped).
  Result<void> check_all_used() const;

 private:
  const StoredTensor* find(const std::string& name) const;
  const StoredTensor* take(const std::string& name);

  const Checkpoint& ckpt_;
  int block_rows_, block_cols_;
  std::set<std::string> used_;
};

}  // namespace deepinfer
