// Device memory of the CUDA backend: weights (bf16 matrices, fp32 vectors and small matrices, int32
// tables), the model state (slot records and blocks), and a forward's scratch stack.
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/weight_stager.h"
#include "elementwise.h"

#include <algorithm>

namespace deepinfer {

WeightStager& CudaDevice::stager() {
  if (!stager_) stager_ = std::make_unique<WeightStager>(stream_);
  return *stager_;
}

// One weight into b16 and/or f32 (either may be null): stored bytes that already are the wanted type
// are copied, FP8 / MXFP4 are dequantized on the device, other conversions (rare: f16, fp32 to bf16)
// happen here.
Result<void> CudaDevice::stage_weight(const WeightSource& w, uint16_t* b16, float* f32) {
  WeightStager& st = stager();
  const size_t n = static_cast<size_t>(w.numel());
  if (w.format != WeightFormat::kPlain) return st.dequantize(w, b16, f32);
  std::vector<float> f;
  auto f32_values = [&]() -> const float* {
    if (w.values.dtype == DType::kF32) return reinterpret_cast<const float*>(w.values.data);
    if (f.size() != n) {
      f.resize(n);
      dequantize_to_f32(w, f.data());
    }
    return f.data();
  };
  if (b16) {
    if (w.values.dtype == DType::kBF16) {
      DI_TRYV(st.copy(b16, w.values.data, n * 2, w.name));
    } else {
      std::vector<uint16_t> h = to_bf16(f32_values(), n);
      DI_TRYV(st.copy(b16, h.data(), n * 2, w.name));
    }
  }
  if (f32) {
    DI_TRYV(st.copy(f32, f32_values(), n * 4, w.name));
  }
  return ok();
}

// An FP8 block-scaled matrix's stored bytes into out.stored (the native_weights option).
Result<void> CudaDevice::keep_stored(const WeightSource& w, CudaWeight& out) {
  DI_TRY(v, weight_alloc<uint8_t>(w.values.nbytes, w.name));
  out.stored_values = v;
  DI_TRY(sc, weight_alloc<uint8_t>(w.scale.nbytes, w.name + " (block scales)"));
  out.stored_scale = sc;
  out.stored = quantized_weight(w, out.stored_values, out.stored_scale);
  ++kept_stored_;
  DI_TRYV(stager().copy(out.stored_values, w.values.data, w.values.nbytes, w.name));
  return stager().copy(out.stored_scale, w.scale.data, w.scale.nbytes, w.name);
}

// Whether the stored values hold a NaN code (the decode product skips its test where none does).
Result<void> CudaDevice::note_nan_codes(CudaWeight& out, const std::string& what) {
  DI_TRY(flag, device_alloc<int>(1, what));
  int found = 0;
  cudaError_t e = cudaMemsetAsync(flag, 0, sizeof(int), stream_.id);
  if (e == cudaSuccess) e = kn::find_fp8_nan_codes(out.stored_values, out.rows * out.cols, flag, stream_);
  if (e == cudaSuccess) e = cudaMemcpyAsync(&found, flag, sizeof(int), cudaMemcpyDeviceToHost, stream_.id);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_.id);
  cudaFree(flag);
  if (e != cudaSuccess) return cuda_error(e, "scanning a weight for NaN codes");
  out.stored.nan_free = found == 0;
  return ok();
}

Result<std::unique_ptr<DeviceWeight>> CudaDevice::upload(const WeightSource& w) {
  DI_TRYV(validate_weight_source(w));
  DI_TRYV(set_device());
  const size_t n = static_cast<size_t>(w.numel());
  // Stored bytes where the decode product takes them (FP8 blocks a multiple of 64 columns wide).
  const bool stored = native_ && !fp32_ && w.format == WeightFormat::kFp8Block && w.rows > 1 && w.cols % 16 == 0 && w.block_cols % 64 == 0;
  const bool want_b16 = w.rows > 1 && !fp32_ && !stored;
  const bool want_f32 = fp32_ || w.rows == 1 || w.numel() <= kSmallMatrix;
  auto out = std::make_unique<CudaWeight>();
  out->rows = w.rows;
  out->cols = w.cols;
  if (stored) {
    auto kept = keep_stored(w, *out);
    if (!kept) {
      (void)stager().finish(w.name);  // (nothing may still write to `out`)
      return kept.error();
    }
  }
  if (want_b16) {
    DI_TRY(p, weight_alloc<uint16_t>(n, w.name));
    out->b16 = p;
  }
  if (want_f32) {
    DI_TRY(p, weight_alloc<float>(n, w.name));
    out->f32 = p;
  }
  auto staged = out->b16 || out->f32 ? stage_weight(w, out->b16, out->f32) : ok();
  auto done = stager().finish(w.name);  // (also after a failure: nothing may still write to `out`)
  DI_TRYV(staged);
  DI_TRYV(done);
  if (stored) {
    DI_TRYV(note_nan_codes(*out, w.name));
  }
  return std::unique_ptr<DeviceWeight>(std::move(out));
}

Result<std::unique_ptr<DeviceWeight>> CudaDevice::upload_stacked(const std::vector<WeightSource>& ws) {
  if (ws.empty()) return make_error(Code::kInternal, "upload_stacked of nothing");
  DI_TRYV(set_device());
  auto out = std::make_unique<CudaWeight>();
  out->count = static_cast<int64_t>(ws.size());
  out->rows = ws[0].rows;
  out->cols = ws[0].cols;
  for (const WeightSource& w : ws) {
    if (w.rows != out->rows || w.cols != out->cols)
      return make_error(Code::kModelFormat, "tensor \"{}\": shape [{}, {}] differs from its siblings' [{}, {}]", w.name, w.rows, w.cols,
                        out->rows, out->cols);
    DI_TRYV(validate_weight_source(w));
  }
  // MXFP4 experts stay as stored (native_weights): the expert products read them (moe.cpp).
  const bool stored =
      native_ && !fp32_ && out->cols % 32 == 0 && std::all_of(ws.begin(), ws.end(), [&](const WeightSource& w) {
        return w.format == WeightFormat::kMxfp4 && w.values.nbytes == ws[0].values.nbytes && w.scale.nbytes == ws[0].scale.nbytes;
      });
  const size_t each = static_cast<size_t>(ws[0].numel());
  if (stored) {
    DI_TRY(v, weight_alloc<uint8_t>(ws[0].values.nbytes * ws.size(), ws[0].name));
    out->stored_values = v;
    DI_TRY(sc, weight_alloc<uint8_t>(ws[0].scale.nbytes * ws.size(), ws[0].name + " (scales)"));
    out->stored_scale = sc;
    out->stored = quantized_weight(ws[0], out->stored_values, out->stored_scale);
    out->stored_format = kn::StoredFormat::kMxfp4;
    ++kept_stored_;
  } else if (fp32_) {
    DI_TRY(p, weight_alloc<float>(each * ws.size(), ws[0].name));
    out->f32 = p;
  } else {
    DI_TRY(p, weight_alloc<uint16_t>(each * ws.size(), ws[0].name));
    out->b16 = p;
  }
  Result<void> staged = ok();
  for (size_t e = 0; e < ws.size() && staged; ++e) {
    if (stored) {
      const size_t nv = ws[e].values.nbytes, ns = ws[e].scale.nbytes;
      staged = stager().copy(out->stored_values + e * nv, ws[e].values.data, nv, ws[e].name);
      if (staged) staged = stager().copy(static_cast<uint8_t*>(out->stored_scale) + e * ns, ws[e].scale.data, ns, ws[e].name);
    } else {
      staged = stage_weight(ws[e], out->b16 ? out->b16 + e * each : nullptr, out->f32 ? out->f32 + e * each : nullptr);
    }
  }
  auto done = stager().finish(ws[0].name);
  DI_TRYV(staged);
  DI_TRYV(done);
  return std::unique_ptr<DeviceWeight>(std::move(out));
}

Result<std::unique_ptr<DeviceWeight>> CudaDevice::upload_floats(const std::vector<float>& v, int64_t rows, int64_t cols) {
  if (static_cast<int64_t>(v.size()) != rows * cols)
    return make_error(Code::kInternal, "upload_floats: {} values for [{}, {}]", v.size(), rows, cols);
  WeightSource w;
  w.name = "floats";
  w.rows = rows;
  w.cols = cols;
  w.values.dtype = DType::kF32;
  w.values.shape = {rows, cols};
  w.values.data = reinterpret_cast<const uint8_t*>(v.data());
  w.values.nbytes = v.size() * sizeof(float);
  return upload(w);
}

Result<std::unique_ptr<DeviceWeight>> CudaDevice::upload_ints(const std::vector<int32_t>& v, int64_t rows, int64_t cols) {
  if (static_cast<int64_t>(v.size()) != rows * cols)
    return make_error(Code::kInternal, "upload_ints: {} values for [{}, {}]", v.size(), rows, cols);
  DI_TRYV(set_device());
  auto out = std::make_unique<CudaWeight>();
  out->rows = rows;
  out->cols = cols;
  DI_TRY(p, weight_alloc<int32_t>(v.size(), "int table"));
  out->i32 = p;
  DI_TRYV(copy_to_device(out->i32, v.data(), v.size() * 4, "int table"));
  return std::unique_ptr<DeviceWeight>(std::move(out));
}

Result<void> CudaDevice::random_stored(CudaWeight& out, bool mxfp4, float mean, float stddev, uint64_t seed) {
  const int64_t n = out.count * out.rows * out.cols;
  const int64_t scales = mxfp4 ? n / 32 : out.count * ((out.rows + 127) / 128) * ((out.cols + 127) / 128);
  const std::string what = fmt::format("a random {} x [{}, {}] weight", out.count, out.rows, out.cols);
  DI_TRY(v, weight_alloc<uint8_t>(static_cast<size_t>(mxfp4 ? n / 2 : n), what));
  out.stored_values = v;
  DI_TRY(sc, weight_alloc<uint8_t>(static_cast<size_t>(scales), what + " (scales)"));
  out.stored_scale = sc;
  kn::QuantizedWeight& q = out.stored;
  q.values = out.stored_values;
  q.scale = out.stored_scale;
  q.scale_type = kn::ScaleType::kE8M0;
  q.rows = out.rows;
  q.cols = out.cols;
  q.block_rows = q.block_cols = 128;
  q.scale_cols = mxfp4 ? 0 : (out.cols + 127) / 128;
  q.nan_free = true;  // (saturated: no NaN code)
  out.stored_format = mxfp4 ? kn::StoredFormat::kMxfp4 : kn::StoredFormat::kFp8Block;
  ++kept_stored_;
  const cudaError_t e =
      kn::fill_random_stored(out.stored_values, static_cast<uint8_t*>(out.stored_scale), scales, mxfp4, n, mean, stddev, seed, stream_);
  if (e != cudaSuccess) return cuda_error(e, "filling a random stored weight");
  return ok();
}

Result<std::unique_ptr<DeviceWeight>> CudaDevice::random_weight(int64_t count, int64_t rows, int64_t cols, float mean, float stddev,
                                                                uint64_t seed, WeightFormat released) {
  if (count <= 0 || rows <= 0 || cols <= 0)
    return make_error(Code::kInternal, "random_weight of {} x [{}, {}]", count, rows, cols);
  DI_TRYV(set_device());
  const int64_t n = count * rows * cols;
  auto out = std::make_unique<CudaWeight>();
  out->count = count;
  out->rows = rows;
  out->cols = cols;
  // The copies upload / upload_stacked would keep for such a weight (native_weights: a released FP8
  // matrix or MXFP4 stack as stored, its values quantized; a small FP8 matrix's fp32 copy from those).
  const bool fp8 = released == WeightFormat::kFp8Block && count == 1 && rows > 1 && cols % 16 == 0;
  const bool mxfp4 = released == WeightFormat::kMxfp4 && cols % 32 == 0;
  const bool stored = native_ && !fp32_ && (fp8 || mxfp4);
  const bool want_b16 = !fp32_ && rows > 1 && !stored;
  const bool want_f32 = fp32_ || (count == 1 && (rows == 1 || n <= kSmallMatrix));
  const std::string what = fmt::format("a random {} x [{}, {}] weight", count, rows, cols);
  if (stored) {
    DI_TRYV(random_stored(*out, mxfp4, mean, stddev, seed));
  }
  if (want_b16) {
    DI_TRY(p, weight_alloc<uint16_t>(static_cast<size_t>(n), what));
    out->b16 = p;
  }
  if (want_f32) {
    DI_TRY(p, weight_alloc<float>(static_cast<size_t>(n), what));
    out->f32 = p;
  }
  cudaError_t e = stored ? out->f32 ? kn::dequantize_fp8_block(out->stored, nullptr, out->f32, stream_) : cudaSuccess
                         : kn::fill_random(out->f32, out->b16, n, mean, stddev, seed, stream_);
  if (e != cudaSuccess) return cuda_error(e, "filling a random weight");
  return std::unique_ptr<DeviceWeight>(std::move(out));
}

Result<void> CudaDevice::allocate_state(const StateLayout& layout, int n_slots, int n_blocks) {
  DI_TRYV(set_device());
  DI_TRYV(flush_pending());
  DI_TRYV(sync("allocate_state"));
  ++state_generation_;
  if (stager_) stager_->release();  // the model is loaded
  if (slots_) cudaFree(slots_);
  if (blocks_) cudaFree(blocks_);
  slots_ = blocks_ = nullptr;
  layout_ = layout;
  n_slots_ = n_slots;
  n_blocks_ = n_blocks;
  if (layout.block_tokens <= 0) return make_error(Code::kInternal, "state layout with block_tokens {}", layout.block_tokens);
  const size_t slot_n = layout.slot_floats * static_cast<size_t>(std::max(n_slots, 0));
  const size_t block_n = layout.block_floats * static_cast<size_t>(std::max(n_blocks, 0));
  auto oom = [&](const Error& e) {
    return make_error(Code::kOutOfMemory, "cannot allocate model state for {} slots and {} blocks ({} MiB): {}", n_slots, n_blocks,
                      (slot_n + block_n) * 4 >> 20, e.message);
  };
  auto s = device_alloc<float>(slot_n, "state slots");
  if (!s) return oom(s.error());
  slots_ = s.value();
  auto b = device_alloc<float>(block_n, "state blocks");
  if (!b) return oom(b.error());
  blocks_ = b.value();
  // On this stream (non-blocking: a plain cudaMemset on the legacy stream would not be ordered
  // before its later work).
  cudaError_t e = cudaMemsetAsync(slots_, 0, std::max<size_t>(slot_n, 1) * 4, stream_.id);
  if (e == cudaSuccess) e = cudaMemsetAsync(blocks_, 0, std::max<size_t>(block_n, 1) * 4, stream_.id);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_.id);
  if (e != cudaSuccess) return cuda_error(e, "zeroing model state");
  layers_.clear();
  for (const LayerStateLayout& L : layout.layers) {
    kn::LayerDev d;
    d.head_dim = L.head_dim;
    d.window = L.window;
    d.rate = L.rate;
    d.overlap = L.overlap ? 1 : 0;
    d.index_dim = L.index_dim;
    d.entries_per_block = std::max(L.entries_per_block, 1);
    d.window_offset = static_cast<int64_t>(L.window_offset);
    d.ring_offset = static_cast<int64_t>(L.ring_offset);
    d.index_ring_offset = static_cast<int64_t>(L.index_ring_offset);
    d.entry_offset = static_cast<int64_t>(L.entry_offset);
    d.index_key_offset = static_cast<int64_t>(L.index_key_offset);
    layers_.push_back(d);
  }
  return ok();
}

void CudaDevice::reset_slot(int slot) {
  if (!flush_pending()) return;
  if (slot < 0 || slot >= n_slots_) return fail(make_error(Code::kInternal, "reset_slot({}) outside the {} slots", slot, n_slots_));
  if (layout_.slot_floats == 0) return;
  check(cudaMemsetAsync(slots_ + static_cast<size_t>(slot) * layout_.slot_floats, 0, layout_.slot_floats * 4, stream_.id), "reset_slot");
}

Result<void> CudaDevice::randomize_state(uint64_t seed) {
  DI_TRYV(set_device());
  DI_TRYV(flush_pending());
  const int64_t slot_n = static_cast<int64_t>(layout_.slot_floats) * n_slots_;
  const int64_t block_n = static_cast<int64_t>(layout_.block_floats) * n_blocks_;
  cudaError_t e = kn::fill_random(slots_, nullptr, slot_n, 0.0f, 0.57735027f, seed, stream_);  // uniform [-1, 1)
  if (e == cudaSuccess) e = kn::fill_random(blocks_, nullptr, block_n, 0.0f, 0.57735027f, seed ^ 0x5bd1e995u, stream_);
  if (e != cudaSuccess) return cuda_error(e, "randomizing the model state");
  return sync("randomizing the model state");
}

Tensor CudaDevice::scratch(int64_t rows, int64_t cols) {
  Tensor t{nullptr, rows, cols};
  t.data = static_cast<float*>(take_scratch(rows * cols, true));
  return t;
}

IntTensor CudaDevice::scratch_int(int64_t rows, int64_t cols) {
  IntTensor t{nullptr, rows, cols};
  t.data = static_cast<int32_t*>(take_scratch(rows * cols, true));
  return t;
}

Tensor CudaDevice::scratch_uninit(int64_t rows, int64_t cols) {
  Tensor t{nullptr, rows, cols};
  t.data = static_cast<float*>(take_scratch(rows * cols, zero_all_scratch_));
  return t;
}

IntTensor CudaDevice::scratch_int_uninit(int64_t rows, int64_t cols) {
  IntTensor t{nullptr, rows, cols};
  t.data = static_cast<int32_t*>(take_scratch(rows * cols, zero_all_scratch_));
  return t;
}

ScratchMark CudaDevice::scratch_mark() {
  const auto m = scratch_.mark();
  return ScratchMark{m.first, m.second};
}

void CudaDevice::scratch_release(ScratchMark m) {
  scratch_.release({m.a, m.b});
  query_ = {};  // its memory may be handed out again
}

void* CudaDevice::take_scratch(int64_t n, bool zero) {
  if (failed_ || n <= 0) return nullptr;
  void* p = scratch_.take(static_cast<size_t>(n) * 4);
  if (!p) {
    fail(make_error(Code::kOutOfMemory, "CUDA: no device memory for a scratch tensor of {} elements", n));
    return nullptr;
  }
  if (zero && mode() != LaunchMode::kReplay) {  // (the graph zero-fills it)
    const int pr = profiling_ && op_depth_ == 0 ? profiler_.begin("scratch zero-fill", 0, 0, stream_.id) : -1;
    check(cudaMemsetAsync(p, 0, static_cast<size_t>(n) * 4, stream_.id), "zeroing scratch");
    if (pr >= 0) profiler_.end(pr, stream_.id);
  }
  return p;
}

}  // namespace deepinfer
