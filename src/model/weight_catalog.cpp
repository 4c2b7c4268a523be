#include "model/weight_catalog.h"

#include "util/log.h"

#include <cstring>
#include <utility>

namespace deepinfer {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Other names under which save_pretrained stores a native tensor.
std::vector<std::string> aliases(const std::string& name) {
  static const std::pair<const char*, const char*> kGlobal[] = {
      {"embed.weight", "embed_tokens.weight"}, {"head.weight", "lm_head.weight"},
      {"hc_head_fn", "hc_head.hc_fn"},        {"hc_head_base", "hc_head.hc_base"},
      {"hc_head_scale", "hc_head.hc_scale"},
  };
  std::vector<std::string> out{name};
  for (const auto& [native, alt] : kGlobal)
    if (name == native) out.push_back(alt);
  if (ends_with(name, ".attn.kv_norm.weight")) out.push_back(name.substr(0, name.size() - 14) + "norm.weight");
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) out.push_back("model." + out[i]);
  return out;
}

HostTensor host(const StoredTensor& t) { return HostTensor{t.dtype, t.shape, t.data, t.nbytes}; }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

const StoredTensor* WeightCatalog::find(const std::string& name) const {
  for (const auto& candidate : aliases(name))
    if (const StoredTensor* t = ckpt_.find(candidate)) return t;
  return nullptr;
}

const StoredTensor* WeightCatalog::take(const std::string& name) {
  const StoredTensor* t = find(name);
  if (t) used_.insert(t->name);
  return t;
}

Result<WeightSource> WeightCatalog::matrix(const std::string& name, int64_t rows, int64_t cols) {
  const StoredTensor* t = take(name);
  if (!t) return make_error(Code::kModelFormat, "missing tensor \"{}\"", name);
  WeightSource w;
  w.name = t->name + " (" + *t->file + ")";
  w.rows = rows;
  w.cols = cols;
  w.values = host(*t);
  w.block_rows = block_rows_;
  w.block_cols = block_cols_;
  const bool is_weight = ends_with(t->name, ".weight");
  const std::string stem = is_weight ? t->name.substr(0, t->name.size() - 7) : t->name;
  const StoredTensor* scale = is_weight ? ckpt_.find(stem + ".scale") : nullptr;
  const StoredTensor* scale_inv = is_weight ? ckpt_.find(stem + ".weight_scale_inv") : nullptr;
  if (scale && scale_inv) return make_error(Code::kModelFormat, "tensor \"{}\" has both a .scale and a .weight_scale_inv", t->name);
  if (!scale) scale = scale_inv;
  if (scale) used_.insert(scale->name);

  if (t->dtype == DType::kF8E4M3) {
    if (!scale) return make_error(Code::kModelFormat, "fp8 tensor \"{}\" ({}) has no .scale or .weight_scale_inv", t->name, *t->file);
    w.format = WeightFormat::kFp8Block;
    w.scale = host(*scale);
  } else if (t->dtype == DType::kI8 || t->dtype == DType::kU8) {
    if (!scale) return make_error(Code::kModelFormat, "packed MXFP4 tensor \"{}\" ({}) has no .scale", t->name, *t->file);
    w.format = WeightFormat::kMxfp4;
    w.scale = host(*scale);
  } else if (scale) {
    return make_error(Code::kModelFormat, "tensor \"{}\" of dtype {} has a quantization scale", t->name, dtype_name(t->dtype));
  }
  DI_TRYV(validate_weight_source(w));
  return w;
}

Result<std::vector<int32_t>> WeightCatalog::int_table(const std::string& name, int64_t rows, int64_t cols) {
  const StoredTensor* t = take(name);
  if (!t) return make_error(Code::kModelFormat, "missing tensor \"{}\"", name);
  if (t->dtype != DType::kI64 && t->dtype != DType::kI32)
    return make_error(Code::kModelFormat, "tensor \"{}\" ({}) has dtype {}, expected I64 or I32", t->name, *t->file, dtype_name(t->dtype));
  if (t->shape.size() != 2 || t->shape[0] != rows || t->shape[1] != cols)
    return make_error(Code::kModelFormat, "tensor \"{}\" ({}) has shape {}, expected [{}, {}]", t->name, *t->file, shape_str(t->shape), rows, cols);
  std::vector<int32_t> out(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t v;
    if (t->dtype == DType::kI64) {
      std::memcpy(&v, t->data + 8 * i, 8);
    } else {
      int32_t v32;
      std::memcpy(&v32, t->data + 4 * i, 4);
      v = v32;
    }
    if (v < INT32_MIN || v > INT32_MAX) return make_error(Code::kModelFormat, "tensor \"{}\": value {} out of range", t->name, v);
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

Result<void> WeightCatalog::check_all_used() const {
  size_t skipped = 0;
  for (const auto& [name, t] : ckpt_.tensors()) {
    if (used_.count(name)) continue;
    if (name.rfind("mtp.", 0) == 0 || name.rfind("model.mtp.", 0) == 0) {
      ++skipped;
      continue;
    }
    return make_error(Code::kModelFormat, "unexpected tensor \"{}\" in {} (not part of this model's configuration)", name, *t->file);
  }
  if (skipped) log(LogLevel::kInfo, "ignoring {} tensors of the multi-token-prediction module", skipped);
  return ok();
}

}  // namespace deepinfer
