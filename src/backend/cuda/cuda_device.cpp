// The device context of the CUDA backend: streams and cuBLAS handles, options, errors, the start of a
// forward (metadata upload, graphs) and the entry points that are not ops (finish, host copies,
// profiling).
#include "backend/cuda/cuda_device.h"
#include "elementwise.h"

#include <algorithm>

namespace deepinfer {
namespace {

// A cuBLAS handle on `stream` with a fixed workspace of its own (cuBLAS then never allocates during
// forwards, and graphs can capture its products).
Result<void> create_blas(cudaStream_t stream, cublasHandle_t& handle, void*& workspace) {
  cublasStatus_t s = cublasCreate(&handle);
  if (s != CUBLAS_STATUS_SUCCESS) return make_error(Code::kBackend, "cuBLAS: cannot create a handle: {}", blas_name(s));
  s = cublasSetStream(handle, stream);
  if (s == CUBLAS_STATUS_SUCCESS) {
    DI_TRY(ws, device_alloc<char>(kBlasWorkspaceBytes, "cuBLAS workspace"));
    workspace = ws;
    s = cublasSetWorkspace(handle, workspace, kBlasWorkspaceBytes);
  }
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);  // no TF32 for fp32 products
  if (s != CUBLAS_STATUS_SUCCESS) return make_error(Code::kBackend, "cuBLAS: setting up a handle: {}", blas_name(s));
  return ok();
}

}  // namespace

CudaDevice::CudaDevice(int device, const BackendOptions& options) : device_(device), fp32_(options.fp32_weights) { apply(options); }

Result<void> CudaDevice::init(const CudaFeatures& features) {
  DI_TRYV(set_device());
  wgmma_ = features.wgmma && kn::wgmma_supported();
  if (const cudaError_t e = kn::prepare_device(wgmma_); e != cudaSuccess) return cuda_error(e, "preparing the kernels");
  cudaError_t e = cudaStreamCreateWithFlags(&stream_.id, cudaStreamNonBlocking);
  if (e != cudaSuccess) return cuda_error(e, "creating a stream");
  int low = 0, high = 0;  // the side stream's blocks go first where both have some waiting
  e = cudaDeviceGetStreamPriorityRange(&low, &high);
  if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&side_stream_.id, cudaStreamNonBlocking, high);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&fork_event_, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&join_event_, cudaEventDisableTiming);
  if (e != cudaSuccess) return cuda_error(e, "creating the side stream");
  DI_TRYV(upload_.init());
  DI_TRYV(create_blas(stream_.id, blas_, blas_ws_));
  DI_TRYV(create_blas(side_stream_.id, side_blas_, side_blas_ws_));  // (its own workspace: both may run at once)
  if (const cublasStatus_t s = fp8_gemm_.init(); s != CUBLAS_STATUS_SUCCESS)
    return make_error(Code::kBackend, "cuBLASLt: cannot create a handle: {}", blas_name(s));
  DI_TRY(c, device_alloc<unsigned>(kCounters, "kernel counters"));
  counters_ = c;
  e = cudaMemset(counters_, 0, kCounters * sizeof(unsigned));
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return cuda_error(e, "zeroing kernel counters");
  return ok();
}

void CudaDevice::quiesce() {
  cudaSetDevice(device_);
  graphs_.abandon(stream_.id);  // a forward whose work never ran: dropped
  if (stream_.id) cudaStreamSynchronize(stream_.id);
  if (side_stream_.id) cudaStreamSynchronize(side_stream_.id);
}

CudaDevice::~CudaDevice() {
  quiesce();
  graphs_.clear();
  stager_.reset();
  if (moe_host_) cudaFreeHost(moe_host_);
  if (blas_) cublasDestroy(blas_);
  if (blas_ws_) cudaFree(blas_ws_);
  if (side_blas_) cublasDestroy(side_blas_);
  if (side_blas_ws_) cudaFree(side_blas_ws_);
  if (fork_event_) cudaEventDestroy(fork_event_);
  if (join_event_) cudaEventDestroy(join_event_);
  if (side_stream_.id) cudaStreamDestroy(side_stream_.id);
  if (counters_) cudaFree(counters_);
  if (slots_) cudaFree(slots_);
  if (blocks_) cudaFree(blocks_);
  if (stream_.id) cudaStreamDestroy(stream_.id);
}

std::string CudaDevice::name() const { return "cuda:" + std::to_string(device_) + (fp32_ ? " (fp32)" : ""); }

int64_t CudaDevice::free_memory_bytes() const {
  size_t free_b = 0, total_b = 0;
  cudaSetDevice(device_);
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return static_cast<int64_t>(free_b);
}

// --- options and tools

void CudaDevice::apply(const BackendOptions& o) {
  stream_.pdl = side_stream_.pdl = o.pdl;
  stream_.invariant = side_stream_.invariant = o.batch_invariant;
  zero_all_scratch_ = o.zero_scratch;
  invariant_ = o.batch_invariant;
  native_ = o.native_weights;
  graphs_allowed_ = o.graphs;
  graphs_on_ = graphs_wanted_ && graphs_allowed_;
}

Result<void> CudaDevice::set_options(const BackendOptions& o) {
  if (o.cuda_device != device_ || o.fp32_weights != fp32_)
    return make_error(Code::kInvalidArgument, "cuda_device and fp32_weights are fixed when the backend is made");
  (void)flush_pending();
  graphs_.clear();  // graphs hold the launches they were captured with
  apply(o);
  return ok();
}

void CudaDevice::set_graphs(bool on) {
  if (mode() != LaunchMode::kEager) (void)flush_pending();
  graphs_wanted_ = on;
  graphs_on_ = on && graphs_allowed_;
  if (!graphs_on_) graphs_.clear();
}

void CudaDevice::set_op_profiling(bool on) {
  if (mode() != LaunchMode::kEager) (void)flush_pending();
  profiling_ = on;
  profiler_.clear();
}

Result<std::vector<OpTime>> CudaDevice::take_op_profile() {
  DI_TRYV(finish());
  return profiler_.take();
}

Result<DeviceCeilings> CudaDevice::measure_ceilings() {
  DI_TRYV(set_device());
  DI_TRYV(finish());
  return measure_device_ceilings(device_, stream_, blas_);
}

// --- one forward

Result<void> CudaDevice::begin_forward(const ForwardBatch& batch) {
  query_ = {};
  reset_forward_state();
  DI_TRYV(set_device());
  DI_TRYV(flush_pending());
  if (failed_) {  // a failure of the previous forward that nobody read yet
    failed_ = false;
    return error_;
  }
  DI_TRYV(validate_batch(batch, layout_, n_slots_, n_blocks_));

  // A decode step (one new token for each sequence) can run as a captured graph (graphs.h).
  const int32_t T = batch.rows(), S = static_cast<int32_t>(batch.seqs.size());
  bool graph = graphs_on_ && !profiling_ && T > 0 && T == S;
  int32_t max_blocks = 1;
  for (const auto& s : batch.seqs) {
    if (s.n_tokens != 1) graph = false;
    max_blocks = std::max(max_blocks, s.n_blocks);
  }
  const int32_t bucket = GraphCache::kGraphBlockBucket;
  const int32_t block_cap = (max_blocks + bucket - 1) / bucket * bucket;

  // No wait for the previous forward: this stream runs the work in order, so it is done with the
  // scratch, temporaries and device metadata before this one's uses them.
  scratch_.reset(stream_.id);
  temp_.reset(stream_.id);
  DI_TRYV(upload_.upload(batch, layout_, graph ? block_cap : 0, stream_.id, fwd_));
  state_.slots = slots_;
  state_.blocks = blocks_;
  state_.slot_floats = static_cast<int64_t>(layout_.slot_floats);
  state_.block_floats = static_cast<int64_t>(layout_.block_floats);
  state_.block_tokens = layout_.block_tokens;
  batch_ = &batch;

  if (graph) graphs_.begin(GraphKey{T, static_cast<int32_t>(batch.logit_rows.size()), block_cap, batch.greedy_tokens}, generation(), stream_.id);
  if (profiling_) check(kn::spin(OpProfiler::kHeadStartNs, stream_), "profiling head start");
  return ok();
}

Result<void> CudaDevice::flush_pending() {
  if (mode() == LaunchMode::kEager) return ok();
  Result<void> r = graphs_.finish(stream_.id, failed_);
  if (r) return ok();
  if (graphs_.capture_failed()) graphs_on_ = false;  // later forwards run without graphs
  fail(r.error());
  return error_;
}

uint64_t CudaDevice::generation() const {
  return scratch_.generation() + temp_.generation() + upload_.generation() + state_generation_;
}

Result<void> CudaDevice::finish() {
  DI_TRYV(set_device());
  DI_TRYV(flush_pending());
  if (failed_) return error_;
  return sync("finishing the forward");
}

Result<void> CudaDevice::read(Tensor t, float* host) { return copy_out(t.data, host, t.rows * t.cols); }
Result<void> CudaDevice::read_ints(IntTensor t, int32_t* host) { return copy_out(t.data, host, t.rows * t.cols); }
Result<void> CudaDevice::write(Tensor t, const float* host) { return copy_in(t.data, host, t.rows * t.cols); }
Result<void> CudaDevice::write_ints(IntTensor t, const int32_t* host) { return copy_in(t.data, host, t.rows * t.cols); }

Result<HostFloats> CudaDevice::allocate_host(size_t count) {
  void* p = nullptr;
  cudaError_t e = cudaMallocHost(&p, std::max<size_t>(count, 1) * sizeof(float));
  if (e != cudaSuccess) return cuda_error(e, "allocating pinned host memory");
  return HostFloats(static_cast<float*>(p), HostRelease{[](float* q) { cudaFreeHost(q); }});
}

template <class T>
Result<void> CudaDevice::copy_out(const T* dev, T* host, int64_t n) {
  DI_TRYV(flush_pending());
  if (failed_) return error_;
  if (n > 0) {
    cudaError_t e = cudaMemcpyAsync(host, dev, static_cast<size_t>(n) * sizeof(T), cudaMemcpyDeviceToHost, stream_.id);
    if (e != cudaSuccess) return cuda_error(e, "reading a tensor");
  }
  DI_TRYV(sync("reading a tensor"));
  return ok();
}

template <class T>
Result<void> CudaDevice::copy_in(T* dev, const T* host, int64_t n) {
  DI_TRYV(flush_pending());
  if (failed_) return error_;
  if (n > 0) {
    cudaError_t e = cudaMemcpyAsync(dev, host, static_cast<size_t>(n) * sizeof(T), cudaMemcpyHostToDevice, stream_.id);
    if (e != cudaSuccess) return cuda_error(e, "writing a tensor");
  }
  DI_TRYV(sync("writing a tensor"));
  return ok();
}

// --- ops: marks, errors, helpers

CudaDevice::Op::Op(CudaDevice& b, const char* name, int64_t n, int64_t k) : b_(b) {
  if (b_.op_depth_++ != 0 || b_.failed_ || b_.mode() == LaunchMode::kReplay) return;
  b_.temp_.reset(b_.stream_.id, b_.mode() != LaunchMode::kCapture);
  if (b_.profiling_) prof_ = b_.profiler_.begin(name, n, k, b_.stream_.id);
}

CudaDevice::Op::~Op() {
  --b_.op_depth_;
  if (prof_ >= 0) b_.profiler_.end(prof_, b_.stream_.id);
}

void CudaDevice::fail(Error e) {
  if (failed_) return;
  failed_ = true;
  error_ = std::move(e);
}

bool CudaDevice::check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fail(cuda_error(e, what));
  return false;
}

bool CudaDevice::check_blas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  fail(blas_error(s, what));
  return false;
}

bool CudaDevice::layer_ok(int layer) {
  return expect(layer >= 0 && layer < static_cast<int>(layers_.size()), "layer {} outside the state layout's {}", layer, layers_.size());
}

Result<void> CudaDevice::set_device() {
  cudaError_t e = cudaSetDevice(device_);
  if (e != cudaSuccess) return cuda_error(e, "selecting the device");
  return ok();
}

Result<void> CudaDevice::sync(const char* what) {
  cudaError_t e = cudaStreamSynchronize(stream_.id);
  if (e != cudaSuccess) return cuda_error(e, what);
  return ok();
}

void* CudaDevice::temp(size_t bytes) {
  void* p = temp_.take(bytes);
  if (!p) fail(make_error(Code::kOutOfMemory, "CUDA: no device memory for {} bytes of temporaries", bytes));
  return p;
}

const float* CudaDevice::fvec(const DeviceWeight& w, const char* what) {
  const float* p = cw(w).f32;
  if (!p) fail(make_error(Code::kInternal, "{} has no fp32 copy on the device", what));
  return p;
}

kn::RopeDev CudaDevice::rope_dev(const Rope& rope) {
  kn::RopeDev r;
  r.inv_freq = rope.inv_freq ? fvec(*rope.inv_freq, "rope inv_freq") : nullptr;
  if (!rope.inv_freq) fail(make_error(Code::kInternal, "rope without inv_freq"));
  r.rope_dim = rope.rope_dim;
  r.attention_factor = rope.attention_factor;
  return r;
}

bool CudaDevice::defer_query_norm(const DeviceWeight*, float, int, const kn::RopeDev&) { return false; }

}  // namespace deepinfer
