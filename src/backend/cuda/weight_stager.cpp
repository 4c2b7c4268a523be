#include "backend/cuda/weight_stager.h"

#include "dequantize.h"

#include <cstring>

namespace deepinfer {

WeightStager::~WeightStager() {
  if (stored_) cudaFree(stored_);
  release();
}

void WeightStager::release() {
  for (int i = 0; i < kBuffers; ++i) {
    if (done_[i]) {
      cudaEventSynchronize(done_[i]);
      cudaEventDestroy(done_[i]);
    }
    if (pinned_[i]) cudaFreeHost(pinned_[i]);
    pinned_[i] = nullptr;
    done_[i] = nullptr;
  }
}

Result<void> WeightStager::make_buffers() {
  if (pinned_[0]) return ok();
  for (int i = 0; i < kBuffers; ++i) {
    cudaError_t e = cudaHostAlloc(&pinned_[i], kChunkBytes, cudaHostAllocDefault);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming);
    if (e != cudaSuccess) {
      cudaGetLastError();
      release();
      return cuda_error(e, "allocating page-locked staging for weight uploads");
    }
  }
  return ok();
}

Result<void> WeightStager::copy(void* dst, const void* src, size_t bytes, const std::string& what) {
  DI_TRYV(make_buffers());
  auto* d = static_cast<uint8_t*>(dst);
  const auto* h = static_cast<const uint8_t*>(src);
  for (size_t off = 0; off < bytes; off += kChunkBytes) {
    const size_t n = std::min(kChunkBytes, bytes - off);
    // The buffer's previous DMA must be done before it is refilled; the others keep the copy engine busy.
    cudaError_t e = cudaEventSynchronize(done_[next_]);
    if (e == cudaSuccess) {
      std::memcpy(pinned_[next_], h + off, n);
      e = cudaMemcpyAsync(d + off, pinned_[next_], n, cudaMemcpyHostToDevice, stream_.id);
    }
    if (e == cudaSuccess) e = cudaEventRecord(done_[next_], stream_.id);
    if (e != cudaSuccess) return make_error(Code::kBackend, "CUDA: uploading {}: {}", what, cudaGetErrorString(e));
    next_ = (next_ + 1) % kBuffers;
  }
  return ok();
}

kn::QuantizedWeight quantized_weight(const WeightSource& w, const void* values, const void* scale) {
  kn::QuantizedWeight q;
  q.values = static_cast<const uint8_t*>(values);
  q.scale = scale;
  q.rows = w.rows;
  q.cols = w.cols;
  switch (w.scale.dtype) {
    case DType::kF32: q.scale_type = kn::ScaleType::kF32; break;
    case DType::kBF16: q.scale_type = kn::ScaleType::kBF16; break;
    default: q.scale_type = kn::ScaleType::kE8M0; break;  // F8_E8M0 or U8 (validate_weight_source)
  }
  if (w.format == WeightFormat::kFp8Block) {
    q.block_rows = w.block_rows;
    q.block_cols = w.block_cols;
    q.scale_cols = w.scale.shape.size() == 2 ? w.scale.shape[1] : 1;
  }
  return q;
}

Result<void> WeightStager::dequantize(const WeightSource& w, uint16_t* b16, float* f32) {
  const size_t value_bytes = w.values.nbytes, scale_at = (value_bytes + 255) / 256 * 256;
  const size_t need = scale_at + w.scale.nbytes;
  if (need > stored_bytes_) {
    // The previous weight's conversion may still read the old buffer: cudaFree waits for it.
    if (stored_) cudaFree(stored_);
    stored_ = nullptr;
    stored_bytes_ = 0;
    DI_TRY(p, device_alloc_bytes(need, w.name + " (its stored bytes)"));
    stored_ = p;
    stored_bytes_ = need;
  }
  auto* base = static_cast<uint8_t*>(stored_);
  DI_TRYV(copy(base, w.values.data, value_bytes, w.name));
  DI_TRYV(copy(base + scale_at, w.scale.data, w.scale.nbytes, w.name));
  const kn::QuantizedWeight q = quantized_weight(w, base, base + scale_at);
  cudaError_t e;
  if (w.format == WeightFormat::kFp8Block) {
    e = kn::dequantize_fp8_block(q, b16, f32, stream_);
  } else if (w.format == WeightFormat::kMxfp4) {
    e = kn::dequantize_mxfp4(q, b16, f32, stream_);
  } else {
    return make_error(Code::kInternal, "tensor \"{}\": no stored format to dequantize", w.name);
  }
  if (e != cudaSuccess) return cuda_error(e, "dequantizing a weight");
  return ok();
}

Result<void> WeightStager::finish(const std::string& what) {
  cudaError_t e = cudaStreamSynchronize(stream_.id);
  if (stored_) cudaFree(stored_);
  stored_ = nullptr;
  stored_bytes_ = 0;
  if (e != cudaSuccess) return make_error(Code::kBackend, "CUDA: uploading {}: {}", what, cudaGetErrorString(e));
  return ok();
}

}  // namespace deepinfer
