// Reading safetensors checkpoints by memory map: one file, or several listed by
// model.safetensors.index.json. Every header is validated before any tensor is handed out.
#pragma once

#include "util/dtype.h"
#include "util/mapped_file.h"
#include "util/result.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer {

// A tensor as stored: bytes inside a mapped file.
struct StoredTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  const std::string* file = nullptr;  // path of the file that holds it (for messages)

  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Headers larger than this are refused (the format's reference implementation uses 100 MB).
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  const std::vector<StoredTensor>& tensors() const { return tensors_; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  std::vector<StoredTensor> tensors_;
};

// The tensors described by the bytes of a safetensors file (their data points into `bytes`); every
// header field is validated (sizes, shapes, offsets inside the data, no overlap). `path` names the
// file in errors; StoredTensor::file is left null.
Result<std::vector<StoredTensor>> parse_safetensors(const uint8_t* bytes, uint64_t size, const std::string& path);

// model.safetensors.index.json's weight_map: tensor name -> shard file name (a plain file name).
Result<std::map<std::string, std::string>> parse_safetensors_index(std::string_view text, const std::string& path);

// All tensors of a checkpoint directory, by name.
class Checkpoint {
 public:
  // Opens DIR/model.safetensors.index.json's files when the index exists, else every DIR/*.safetensors.
  static Result<Checkpoint> open_dir(const std::string& dir);

  const StoredTensor* find(const std::string& name) const;
  const std::map<std::string, const StoredTensor*>& tensors() const { return by_name_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const StoredTensor*> by_name_;
};

}  // namespace deepinfer
