// Sampling on the device: Backend::sample_rows (CudaDevice), its rows packed by SamplePack
// (sample_pack.h) for the kernels of kernels/sampling.cu.
//
// The op is an entry point like read(): it launches a pending decode graph first, so it runs after
// the forward whose logits it samples, eagerly (one kernel, the results back, one wait; the specs'
// upload runs on the side stream while the forward does).
// The logits are left as they are (the processed rows go to temporaries). Its kernels' launch
// sizes depend only on the rows and the vocabulary, and the specs come in one upload, so a step
// that sampled inside its graph would capture them unchanged.
#include "backend/cuda/cuda_device.h"
#include "sample/philox.h"

namespace deepinfer {

Result<void> CudaDevice::sample_rows(Tensor logits, std::span<const RowSampling> rows, std::vector<Result<SampleResult>>& out) {
  out.clear();
  DI_TRYV(check_row_count(logits.rows, rows.size()));
  if (rows.empty()) return ok();
  if (!logits.data) return make_error(Code::kInvalidArgument, "sample_rows: logits without device memory");
  if (logits.cols <= 0 || logits.cols > kn::kMaxSampleVocab)
    return make_error(Code::kInvalidArgument, "sample_rows: rows of {} logits (the device samples rows of 1 to {})", logits.cols,
                      kn::kMaxSampleVocab);
  DI_TRYV(set_device());
  DI_TRYV(flush_pending());  // the forward that made the logits
  if (failed_) return error_;
  DI_TRYV(sampling_.pack(rows, logits.cols));
  {
    Op op(*this, "sample_rows", logits.rows, logits.cols);
    if (op) launch_sampling(logits);
  }
  const Result<void> waited = sync("sampling rows");  // (also after a failure: the next pack reuses the buffers)
  if (failed_) return error_;
  DI_TRYV(waited);
  sampling_.unpack(out);
  return ok();
}

void CudaDevice::launch_sampling(Tensor logits) {
  const int64_t rows = logits.rows, vocab = logits.cols;
  const bool processed = sampling_.any_processed();  // (else no work rows)
  auto* work = processed ? static_cast<float*>(temp(static_cast<size_t>(rows * kn::sample_work_stride(vocab)) * sizeof(float))) : nullptr;
  auto* results = static_cast<kn::SampleOut*>(temp(sampling_.results_bytes()));
  if ((processed && !work) || !results) return;
  const void* uploaded = nullptr;  // (copied while the forward runs)
  if (!check(sampling_.upload_beside(side_stream_.id, stream_.id, &uploaded), "uploading sampling specs")) return;
  const auto* meta = static_cast<const char*>(uploaded);
  const kn::PhiloxConstants philox{kPhiloxMultiplier0, kPhiloxMultiplier1, kPhiloxWeyl0, kPhiloxWeyl1};
  const auto* specs = reinterpret_cast<const kn::SampleRowSpec*>(meta);
  const auto* edits = reinterpret_cast<const kn::SampleEdit*>(meta + sampling_.edits_offset());
  const auto* masks = reinterpret_cast<const uint32_t*>(meta + sampling_.masks_offset());
  if (!check(kn::sample_rows(logits.data, rows, vocab, specs, edits, masks, work, results, philox, stream_), "sample_rows")) return;
  check(cudaMemcpyAsync(sampling_.results(), results, sampling_.results_bytes(), cudaMemcpyDeviceToHost, stream_.id),
        "reading sampled tokens");
}

}  // namespace deepinfer
