#include "backend/weight_source.h"

#include <cstring>

namespace deepinfer {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool is_matrix(const HostTensor& t, int64_t rows, int64_t cols) {
  if (t.shape.size() == 2) return t.shape[0] == rows && t.shape[1] == cols;
  if (t.shape.size() == 1) return rows == 1 && t.shape[0] == cols;
  return false;
}

float scale_value(const HostTensor& s, size_t i) {
  switch (s.dtype) {
    case DType::kF8E8M0:
    case DType::kU8: return e8m0_to_f32(s.data[i]);
    case DType::kF32: {
      float v;
      std::memcpy(&v, s.data + 4 * i, 4);
      return v;
    }
    case DType::kBF16: {
      uint16_t v;
      std::memcpy(&v, s.data + 2 * i, 2);
      return bf16_to_f32(v);
    }
    default: return 0.0f;
  }
}

}  // namespace

Result<void> validate_weight_source(const WeightSource& w) {
  auto bad = [&](const std::string& why) { return make_error(Code::kModelFormat, "tensor \"{}\": {}", w.name, why); };
  switch (w.format) {
    case WeightFormat::kPlain:
      if (w.values.dtype != DType::kF32 && w.values.dtype != DType::kBF16 && w.values.dtype != DType::kF16)
        return bad(fmt::format("dtype {} is not a float type (F32, BF16, F16, or F8_E4M3 with a scale)", dtype_name(w.values.dtype)));
      if (!is_matrix(w.values, w.rows, w.cols))
        return bad(fmt::format("shape {} where [{}, {}] was expected", shape_str(w.values.shape), w.rows, w.cols));
      return ok();
    case WeightFormat::kFp8Block: {
      if (w.values.dtype != DType::kF8E4M3) return bad("fp8 weight must be F8_E4M3");
      if (!is_matrix(w.values, w.rows, w.cols))
        return bad(fmt::format("shape {} where [{}, {}] was expected", shape_str(w.values.shape), w.rows, w.cols));
      int64_t sr = (w.rows + w.block_rows - 1) / w.block_rows, sc = (w.cols + w.block_cols - 1) / w.block_cols;
      if (w.scale.shape.size() != 2 || w.scale.shape[0] != sr || w.scale.shape[1] != sc)
        return bad(fmt::format("block scale shape {} where [{}, {}] was expected for {}x{} blocks", shape_str(w.scale.shape), sr, sc,
                               w.block_rows, w.block_cols));
      if (w.scale.dtype != DType::kF8E8M0 && w.scale.dtype != DType::kU8 && w.scale.dtype != DType::kF32 && w.scale.dtype != DType::kBF16)
        return bad(fmt::format("block scale dtype {} (F8_E8M0, U8, F32 or BF16 expected)", dtype_name(w.scale.dtype)));
      return ok();
    }
    case WeightFormat::kMxfp4: {
      if (w.values.dtype != DType::kI8 && w.values.dtype != DType::kU8) return bad("MXFP4 weight must be I8 or U8 (packed pairs)");
      if (w.cols % kMxfp4Group) return bad(fmt::format("MXFP4 needs columns divisible by {}, got {}", kMxfp4Group, w.cols));
      if (!is_matrix(w.values, w.rows, w.cols / 2))
        return bad(fmt::format("packed shape {} where [{}, {}] was expected", shape_str(w.values.shape), w.rows, w.cols / 2));
      if (w.scale.dtype != DType::kF8E8M0 && w.scale.dtype != DType::kU8) return bad("MXFP4 scale must be F8_E8M0 or U8");
      if (!is_matrix(w.scale, w.rows, w.cols / kMxfp4Group))
        return bad(fmt::format("MXFP4 scale shape {} where [{}, {}] was expected", shape_str(w.scale.shape), w.rows, w.cols / kMxfp4Group));
      return ok();
    }
  }
  return bad("unknown weight format");
}

void dequantize_to_f32(const WeightSource& w, float* out) {
  const size_t n = static_cast<size_t>(w.numel());
  switch (w.format) {
    case WeightFormat::kPlain:
      if (w.values.dtype == DType::kF32) {
        std::memcpy(out, w.values.data, n * 4);
      } else {
        for (size_t i = 0; i < n; ++i) {
          uint16_t v;
          std::memcpy(&v, w.values.data + 2 * i, 2);
          out[i] = w.values.dtype == DType::kBF16 ? bf16_to_f32(v) : f16_to_f32(v);
        }
      }
      return;
    case WeightFormat::kFp8Block: {
      const int64_t scale_cols = w.scale.shape[1];
      for (int64_t r = 0; r < w.rows; ++r)
        for (int64_t c = 0; c < w.cols; ++c) {
          float s = scale_value(w.scale, static_cast<size_t>((r / w.block_rows) * scale_cols + c / w.block_cols));
          out[r * w.cols + c] = fp8_e4m3_to_f32(w.values.data[r * w.cols + c]) * s;
        }
      return;
    }
    case WeightFormat::kMxfp4: {
      const int64_t groups = w.cols / kMxfp4Group;
      for (int64_t r = 0; r < w.rows; ++r)
        for (int64_t c = 0; c < w.cols; ++c) {
          uint8_t byte = w.values.data[r * (w.cols / 2) + c / 2];
          uint8_t code = (c & 1) ? (byte >> 4) : (byte & 0xf);
          out[r * w.cols + c] = fp4_e2m1_to_f32(code) * e8m0_to_f32(w.scale.data[r * groups + c / kMxfp4Group]);
        }
      return;
    }
  }
}

}  // namespace deepinfer
