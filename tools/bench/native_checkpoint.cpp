// Writes a checkpoint in DeepSeek's released formats: FP8 E4M3 with one E8M0 scale per 128x128 block
// for the attention and shared-expert linears, MXFP4 (packed E2M1 pairs, one E8M0 scale per 32) for
// the routed experts, bf16 for embeddings, head, compressors, indexer weights and the gate, fp32 for
// the rest; safetensors shards of about --shard-gb each with their index.
//
//   native_checkpoint CONFIG.json OUT_DIR [--shard-gb 4] [--seed 1]
//       random weights of the config's shape (load timings and shape checks without a download)
//   native_checkpoint --from MODEL_DIR OUT_DIR [--shard-gb 4]
//       MODEL_DIR's weights (any stored format) quantized (weight_quantize.h), its config and
//       tokenizer files copied: e.g. the demo model in native formats, to compare perplexities
#include "backend/backend.h"
#include "backend/weight_quantize.h"
#include "model/deepseek_v4.h"
#include "model/native_formats.h"
#include "model/weight_catalog.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

using namespace deepinfer;
namespace fs = std::filesystem;

namespace {

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  size_t bytes;
  enum Fill { kFp8, kE8M0, kFp4, kBf16, kF32, kExperts } fill;
  DeepseekV4::WeightSpec spec;  // the model's weight this holds (or the scale of)
  int64_t modulus = 1;          // kExperts: ids below it
};

void add_spec(const DeepseekV4::WeightSpec& s, std::vector<Entry>& out) {
  const std::string stem = s.name.ends_with(".weight") ? s.name.substr(0, s.name.size() - 7) : s.name;
  const auto n = static_cast<size_t>(s.rows * s.cols);
  const std::vector<int64_t> shape = s.rows == 1 ? std::vector<int64_t>{s.cols} : std::vector<int64_t>{s.rows, s.cols};
  switch (native_format(s)) {
    case NativeFormat::kI32: out.push_back({s.name, "I32", {s.rows, s.cols}, n * 4, Entry::kExperts, s}); break;
    case NativeFormat::kMxfp4:
      out.push_back({s.name, "U8", {s.rows, s.cols / 2}, n / 2, Entry::kFp4, s});
      out.push_back({stem + ".scale", "F8_E8M0", {s.rows, s.cols / 32}, n / 32, Entry::kE8M0, s});
      break;
    case NativeFormat::kFp8Block: {
      const int64_t br = (s.rows + 127) / 128, bc = (s.cols + 127) / 128;
      out.push_back({s.name, "F8_E4M3", {s.rows, s.cols}, n, Entry::kFp8, s});
      out.push_back({stem + ".scale", "F8_E8M0", {br, bc}, static_cast<size_t>(br * bc), Entry::kE8M0, s});
      break;
    }
    case NativeFormat::kBf16: out.push_back({s.name, "BF16", shape, n * 2, Entry::kBf16, s}); break;
    case NativeFormat::kF32: out.push_back({s.name, "F32", shape, n * 4, Entry::kF32, s}); break;
  }
}

// Random bytes of each kind: FP8 codes of magnitude <= 1 (no NaN), scales near 2^-6, small floats.
void fill(const Entry& t, std::vector<uint8_t>& buf, uint64_t& state) {
  buf.resize(t.bytes);
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  switch (t.fill) {
    case Entry::kFp8:
    case Entry::kFp4:
      for (size_t i = 0; i < buf.size(); i += 8) {
        uint64_t r = next() & (t.fill == Entry::kFp8 ? 0xb7b7b7b7b7b7b7b7ull : ~0ull);  // exponent <= 6: |x| < 1
        std::memcpy(buf.data() + i, &r, std::min<size_t>(8, buf.size() - i));
      }
      break;
    case Entry::kE8M0:
      for (auto& b : buf) b = static_cast<uint8_t>(118 + next() % 4);
      break;
    case Entry::kBf16:
      for (size_t i = 0; i + 1 < buf.size(); i += 2) {
        const uint16_t h = static_cast<uint16_t>(0x3c00 | (next() & 0x80ff));  // +-[2^-7, 2^-6)
        std::memcpy(buf.data() + i, &h, 2);
      }
      break;
    case Entry::kF32:
      for (size_t i = 0; i + 3 < buf.size(); i += 4) {
        const float f = static_cast<float>(static_cast<int64_t>(next() % 2001) - 1000) * 1e-5f;
        std::memcpy(buf.data() + i, &f, 4);
      }
      break;
    case Entry::kExperts: {
      const size_t cols = static_cast<size_t>(t.shape[1]);
      for (size_t i = 0; i < buf.size() / 4; ++i) {
        const int32_t e = static_cast<int32_t>((i / cols * 7 + i % cols) % static_cast<size_t>(t.modulus));
        std::memcpy(buf.data() + 4 * i, &e, 4);
      }
      break;
    }
  }
}

// --from: the bytes of each entry from the source model's weights, quantized where the entry is
// stored quantized (a weight's scale comes from quantizing its values, just before).
class Quantizer {
 public:
  explicit Quantizer(const Checkpoint& ckpt) : cat_(ckpt, 128, 128) {}
  Result<void> fill(const Entry& t, std::vector<uint8_t>& buf) {
    const auto& s = t.spec;
    if (t.fill == Entry::kE8M0) {
      buf = std::move(scale_);
      if (buf.size() != t.bytes) return make_error(Code::kInternal, "{}: no scale", t.name);
      return ok();
    }
    if (t.fill == Entry::kExperts) {
      DI_TRY(table, cat_.int_table(s.name, s.rows, s.cols));
      buf.resize(table.size() * 4);
      std::memcpy(buf.data(), table.data(), buf.size());
      return ok();
    }
    DI_TRY(src, cat_.matrix(s.name, s.rows, s.cols));
    std::vector<float> f(static_cast<size_t>(src.numel()));
    dequantize_to_f32(src, f.data());
    switch (t.fill) {
      case Entry::kFp8: quantize_fp8_block(f.data(), s.rows, s.cols, 128, buf, scale_); break;
      case Entry::kFp4: quantize_mxfp4(f.data(), s.rows, s.cols, buf, scale_); break;
      case Entry::kBf16:
        buf.resize(f.size() * 2);
        for (size_t i = 0; i < f.size(); ++i) {
          const uint16_t h = f32_to_bf16(f[i]);
          std::memcpy(buf.data() + 2 * i, &h, 2);
        }
        break;
      default: buf.resize(f.size() * 4); std::memcpy(buf.data(), f.data(), buf.size());
    }
    return ok();
  }

 private:
  WeightCatalog cat_;
  std::vector<uint8_t> scale_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: native_checkpoint CONFIG.json OUT_DIR [--shard-gb 4] [--seed 1]\n"
                 "       native_checkpoint --from MODEL_DIR OUT_DIR [--shard-gb 4]\n");
    return 2;
  }
  const bool from = !std::strcmp(argv[1], "--from");
  const int first = from ? 2 : 1;
  if (argc < first + 2) return 2;
  const std::string config_path = argv[first], out = argv[first + 1];
  double shard_gb = 4;
  uint64_t seed = 1;
  for (int i = first + 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--shard-gb"))
      shard_gb = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seed"))
      seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  auto fail = [](const Error& e) {
    std::fprintf(stderr, "%s\n", e.message.c_str());
    return 1;
  };
  auto config = DeepseekV4::read_config(config_path);
  if (!config) return fail(config.error());
  auto cpu = make_cpu_backend(1);
  if (!cpu) return fail(cpu.error());
  auto specs = DeepseekV4::weight_specs(config.value(), *cpu.value());
  if (!specs) return fail(specs.error());
  std::optional<Checkpoint> source;
  std::optional<Quantizer> quantizer;
  if (from) {
    auto ckpt = Checkpoint::open_dir(config_path);
    if (!ckpt) return fail(ckpt.error());
    source.emplace(std::move(ckpt.value()));
    quantizer.emplace(*source);
  }
  std::vector<Entry> tensors;
  for (const auto& s : specs.value()) add_spec(s, tensors);
  for (auto& t : tensors) t.modulus = std::max<int64_t>(config.value().num_experts, 1);

  // Shards in order, each up to shard_gb (a tensor never splits).
  std::vector<std::vector<const Entry*>> shards(1);
  size_t in_shard = 0;
  for (const Entry& t : tensors) {
    if (in_shard > 0 && static_cast<double>(in_shard + t.bytes) > shard_gb * 1e9) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&t);
    in_shard += t.bytes;
  }
  fs::create_directories(out);
  fs::copy_file(fs::is_directory(config_path) ? fs::path(config_path) / "config.json" : fs::path(config_path),
                fs::path(out) / "config.json", fs::copy_options::overwrite_existing);
  if (from) {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
      if (fs::exists(fs::path(config_path) / f))
        fs::copy_file(fs::path(config_path) / f, fs::path(out) / f, fs::copy_options::overwrite_existing);
  }
  nlohmann::ordered_json index = {{"metadata", {{"format", from ? "native, quantized" : "native, random"}}},
                                  {"weight_map", nlohmann::ordered_json::object()}};
  uint64_t state = seed * 0x9e3779b97f4a7c15ull | 1, total = 0;
  std::vector<uint8_t> buf;
  for (size_t k = 0; k < shards.size(); ++k) {
    char file[64];
    std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    size_t offset = 0;
    for (const Entry* t : shards[k]) {
      header[t->name] = {{"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->bytes}}};
      offset += t->bytes;
      index["weight_map"][t->name] = file;
    }
    std::string h = header.dump();
    h.append((8 - h.size() % 8) % 8, ' ');
    std::ofstream f(fs::path(out) / file, std::ios::binary);
    const uint64_t n = h.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (const Entry* t : shards[k]) {
      if (quantizer) {
        if (auto filled = quantizer->fill(*t, buf); !filled) return fail(filled.error());
      } else {
        fill(*t, buf, state);
      }
      f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    }
    if (!f) {
      std::fprintf(stderr, "writing %s failed\n", file);
      return 1;
    }
    total += offset;
    std::printf("%s: %zu tensors, %.2f GB\n", file, shards[k].size(), static_cast<double>(offset) / 1e9);
  }
  std::ofstream(fs::path(out) / "model.safetensors.index.json") << index.dump(1) << "\n";
  std::printf("%zu tensors, %.2f GB in %zu shards\n", tensors.size(), static_cast<double>(total) / 1e9, shards.size());
  return 0;
}
