#include "model/safetensors.h"

#include "util/file_reading.h"
#include "util/json_excerpt.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>

namespace deepinfer {
namespace fs = std::filesystem;
using json = nlohmann::json;

int64_t StoredTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// An index lists one line per tensor: DeepSeek-V3's is ~9 MB.
constexpr uint64_t kMaxIndexBytes = 256ull << 20;

// Tensors whose bytes overlap would alias each other's data: a malformed (or crafted) file.
Result<void> check_disjoint(const std::string& path, const std::vector<StoredTensor>& tensors) {
  std::vector<const StoredTensor*> by_start;
  for (const StoredTensor& t : tensors)
    if (t.nbytes > 0) by_start.push_back(&t);
  std::sort(by_start.begin(), by_start.end(), [](const StoredTensor* a, const StoredTensor* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_start.size(); ++i) {
    const StoredTensor& prev = *by_start[i - 1];
    if (prev.data + prev.nbytes > by_start[i]->data)
      return make_error(Code::kModelFormat, "{}: the data of tensors \"{}\" and \"{}\" overlap", path,
                        text_excerpt(prev.name), text_excerpt(by_start[i]->name));
  }
  return ok();
}

Result<StoredTensor> parse_entry(const std::string& path, const std::string& name, const json& e,
                                 const uint8_t* data_start, uint64_t data_size) {
  auto bad = [&](const std::string& why) {
    return make_error(Code::kModelFormat, "{}: tensor \"{}\": {}", path, text_excerpt(name), why);
  };
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    return bad("entry needs dtype, shape and data_offsets");
  if (!e["dtype"].is_string()) return bad("dtype is not a string");
  auto dtype = parse_safetensors_dtype(e["dtype"].get<std::string>());
  if (!dtype) return make_error(dtype.error().code, "{}: tensor \"{}\": {}", path, text_excerpt(name), dtype.error().message);
  StoredTensor t;
  t.name = name;
  t.dtype = dtype.value();
  const json& shape = e["shape"];
  if (!shape.is_array() || shape.size() > 8) return bad("shape must be an array of at most 8 dimensions");
  uint64_t numel = 1;
  for (const json& d : shape) {
    if (!d.is_number_unsigned()) return bad("shape entries must be non-negative integers");
    uint64_t v = d.get<uint64_t>();
    if (v > (1ull << 40) || (v && numel > std::numeric_limits<uint64_t>::max() / v / 8)) return bad("shape too large");
    numel *= v;
    t.shape.push_back(static_cast<int64_t>(v));
  }
  const json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    return bad("data_offsets must be two non-negative integers");
  uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end || end > data_size)
    return bad(fmt::format("data [{}, {}) lies outside the {} data bytes (truncated file?)", begin, end, data_size));
  if (end - begin != numel * dtype_size(t.dtype))
    return bad(fmt::format("{} bytes stored for {} elements of {}", end - begin, numel, dtype_name(t.dtype)));
  t.data = data_start + begin;
  t.nbytes = static_cast<size_t>(end - begin);
  return t;
}

}  // namespace

Result<std::vector<StoredTensor>> parse_safetensors(const uint8_t* p, uint64_t size, const std::string& path) {
  if (size < 8) return make_error(Code::kModelFormat, "{}: file of {} bytes is too short for a safetensors header", path, size);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | p[i];
  if (header_len > SafetensorsFile::kMaxHeaderBytes)
    return make_error(Code::kModelFormat, "{}: header of {} bytes exceeds the {} byte limit", path, header_len,
                      SafetensorsFile::kMaxHeaderBytes);
  if (header_len > size - 8)
    return make_error(Code::kModelFormat, "{}: header of {} bytes runs past the end of the {} byte file (truncated?)", path,
                      header_len, size);
  json header = json::parse(p + 8, p + 8 + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return make_error(Code::kModelFormat, "{}: header is not a JSON object", path);
  const uint8_t* data_start = p + 8 + header_len;
  uint64_t data_size = size - 8 - header_len;
  std::vector<StoredTensor> tensors;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    DI_TRY(t, parse_entry(path, it.key(), it.value(), data_start, data_size));
    tensors.push_back(std::move(t));
  }
  DI_TRYV(check_disjoint(path, tensors));
  return tensors;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  DI_TRY(mapped, MappedFile::open(path));
  auto file = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  file->file_ = std::move(mapped);
  DI_TRY(tensors, parse_safetensors(file->file_.data(), file->file_.size(), path));
  file->tensors_ = std::move(tensors);
  for (auto& t : file->tensors_) t.file = &file->file_.path();
  return file;
}

Result<std::map<std::string, std::string>> parse_safetensors_index(std::string_view text, const std::string& path) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return make_error(Code::kModelFormat, "{}: not a JSON object with a weight_map", path);
  std::map<std::string, std::string> index;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      return make_error(Code::kModelFormat, "{}: weight_map[\"{}\"] is not a file name", path, text_excerpt(it.key()));
    std::string f = it.value().get<std::string>();
    if (f.find('/') != std::string::npos || f == "..")
      return make_error(Code::kModelFormat, "{}: file name \"{}\" must not contain a path", path, text_excerpt(f));
    index[it.key()] = std::move(f);
  }
  return index;
}

Result<Checkpoint> Checkpoint::open_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return make_error(Code::kNotFound, "model directory {} does not exist", dir);
  std::vector<std::string> paths;
  std::map<std::string, std::string> index;  // tensor -> file, when an index exists
  fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  if (entry_exists(index_path)) {
    DI_TRY(text, read_whole_file(index_path, FileLimits{kMaxIndexBytes}));
    DI_TRY(parsed, parse_safetensors_index(text, index_path.string()));
    index = std::move(parsed);
    std::set<std::string> files;
    for (const auto& [tensor, f] : index) files.insert(f);
    for (const auto& f : files) paths.push_back((fs::path(dir) / f).string());
  } else {
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().extension() == ".safetensors") paths.push_back(entry.path().string());
    std::sort(paths.begin(), paths.end());
  }
  if (paths.empty()) return make_error(Code::kNotFound, "no *.safetensors file in {}", dir);

  Checkpoint ck;
  for (const auto& path : paths) {
    DI_TRY(file, SafetensorsFile::open(path));
    for (const auto& t : file->tensors()) {
      if (!ck.by_name_.emplace(t.name, &t).second)
        return make_error(Code::kModelFormat, "tensor \"{}\" appears twice ({} and {})", text_excerpt(t.name),
                          *ck.by_name_[t.name]->file, path);
    }
    ck.files_.push_back(std::move(file));
  }
  for (const auto& [name, f] : index) {
    auto it = ck.by_name_.find(name);
    if (it == ck.by_name_.end())
      return make_error(Code::kModelFormat, "index lists tensor \"{}\" in {} but the file does not hold it", text_excerpt(name),
                        text_excerpt(f));
    if (fs::path(*it->second->file).filename() != f)
      return make_error(Code::kModelFormat, "index lists tensor \"{}\" in {} but it is in {}", text_excerpt(name), text_excerpt(f),
                        *it->second->file);
  }
  return ck;
}

const StoredTensor* Checkpoint::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

}  // namespace deepinfer
