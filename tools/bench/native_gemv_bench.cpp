// Decode products with weights in their checkpoint formats (kernels/native_gemv.h) beside the bf16
// product (kernels/gemv.h) on the same matrix shape: time per product, the stored bytes read per
// second, and that as a fraction of the device-to-device copy bandwidth measured in the same run.
// Weights are random bytes (timing only; tests/gpu/cuda_dequantize_test.cpp checks the numbers).
// --experts E adds the routed-expert product (native_expert_gemv) over a stack of E MXFP4 matrices of
// that shape, for decode batches of 1 to 64 rows choosing top-6 distinct experts at random: the bytes
// counted are the distinct experts' (what must be read).
//   native_gemv_bench [--outputs N] [--inputs K] [--iters I] [--experts E]
#include "di_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace deepinfer;

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "native_gemv_bench: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

void* device_random(size_t bytes, std::mt19937& rng, uint8_t byte_mask = 0xff, uint8_t byte_or = 0) {
  std::vector<uint8_t> host(bytes);
  for (auto& b : host) b = static_cast<uint8_t>((rng() & byte_mask) | byte_or);
  void* d = nullptr;
  check(cudaMalloc(&d, bytes), "cudaMalloc");
  check(cudaMemcpy(d, host.data(), bytes, cudaMemcpyHostToDevice), "upload");
  return d;
}

// Mean milliseconds of f() over iters launches (after a warm-up).
template <class F>
double time_ms(int iters, F&& f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  check(f(), "warm-up");
  check(cudaEventRecord(a), "record");
  for (int i = 0; i < iters; ++i) check(f(), "launch");
  check(cudaEventRecord(b), "record");
  check(cudaEventSynchronize(b), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 16384, k = 4096;  // 64 MB of FP8 per matrix: well past L2
  int iters = 200, n_exp = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--outputs")
      n = std::atoll(argv[i + 1]);
    else if (a == "--inputs")
      k = std::atoll(argv[i + 1]);
    else if (a == "--iters")
      iters = std::atoi(argv[i + 1]);
    else if (a == "--experts")
      n_exp = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: native_gemv_bench [--outputs N] [--inputs K] [--iters I] [--experts E]\n");
      return 2;
    }
  }
  if (n <= 0 || k <= 0 || k % 128 != 0 || iters <= 0 || n_exp < 0 || (n_exp > 0 && n_exp < 6)) {
    std::fprintf(stderr, "native_gemv_bench: outputs > 0, inputs a multiple of 128, experts 0 or >= 6\n");
    return 2;
  }
  std::mt19937 rng(7);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "device");

  // Copy bandwidth: 1 GiB device to device counts 2 GiB moved.
  const size_t copy_bytes = size_t{1} << 30;
  void *src = nullptr, *dst = nullptr;
  check(cudaMalloc(&src, copy_bytes), "cudaMalloc");
  check(cudaMalloc(&dst, copy_bytes), "cudaMalloc");
  const double copy_ms = time_ms(10, [&] { return cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice); });
  const double bandwidth = 2.0 * static_cast<double>(copy_bytes) / (copy_ms * 1e-3);
  cudaFree(src);
  cudaFree(dst);

  // FP8 values without NaN codes (bit 0x40 clear), E8M0 scales near 1; MXFP4 any nibble.
  kernels::QuantizedWeight fp8;
  fp8.values = static_cast<const uint8_t*>(device_random(static_cast<size_t>(n * k), rng, 0xbf));
  fp8.rows = n;
  fp8.cols = k;
  fp8.scale_cols = k / 128;
  fp8.nan_free = true;
  fp8.scale = device_random(static_cast<size_t>((n + 127) / 128 * fp8.scale_cols), rng, 0x03, 0x7c);
  kernels::QuantizedWeight fp4;
  fp4.values = static_cast<const uint8_t*>(device_random(static_cast<size_t>(n * k / 2), rng));
  fp4.rows = n;
  fp4.cols = k;
  fp4.scale = device_random(static_cast<size_t>(n * k / 32), rng, 0x03, 0x7c);
  const auto* bf16 = static_cast<const kernels::bf16_t*>(device_random(static_cast<size_t>(n * k * 2), rng, 0xff, 0));
  float* x = static_cast<float*>(device_random(static_cast<size_t>(8 * k * 4), rng, 0x3f, 0));  // small positive floats
  float* out = nullptr;
  check(cudaMalloc(&out, static_cast<size_t>(8 * n * 4)), "cudaMalloc");
  const kernels::Stream s{nullptr, true};

  const double fp8_bytes = static_cast<double>(n * k + (n + 127) / 128 * (k / 128));
  const double fp4_bytes = static_cast<double>(n * k / 2 + n * k / 32);
  const double bf16_bytes = static_cast<double>(n * k * 2);
  std::printf("device: %s; measured copy bandwidth %.2f TB/s (1 GiB device-to-device, read + write)\n", prop.name, bandwidth / 1e12);
  std::printf("weight [%lld x %lld], %d launches each\n\n", static_cast<long long>(n), static_cast<long long>(k), iters);
  std::printf("| format | rows | stored MB | us | GB/s | of copy bandwidth |\n|---|---:|---:|---:|---:|---:|\n");
  for (int rows = 1; rows <= kernels::kNativeGemvMaxRows; rows *= 2) {
    struct Row {
      const char* name;
      double bytes, ms;
    } table[] = {
        {"bf16 (gemv)", bf16_bytes,
         rows <= kernels::kGemvMaxRows ? time_ms(iters, [&] { return kernels::gemv(x, rows, k, bf16, n, k, n, out, n, s); }) : 0.0},
        {"fp8 block-scaled", fp8_bytes,
         time_ms(iters, [&] { return kernels::native_gemv(x, rows, k, fp8, kernels::StoredFormat::kFp8Block, out, n, s); })},
        {"mxfp4", fp4_bytes,
         time_ms(iters, [&] { return kernels::native_gemv(x, rows, k, fp4, kernels::StoredFormat::kMxfp4, out, n, s); })},
    };
    for (const Row& r : table) {
      if (r.ms == 0.0) continue;  // (more rows than the bf16 product takes)
      const double rate = r.bytes / (r.ms * 1e-3);
      std::printf("| %s | %d | %.1f | %.1f | %.0f | %.2f |\n", r.name, rows, r.bytes / 1e6, r.ms * 1e3, rate / 1e9, rate / bandwidth);
    }
  }
  if (n_exp == 0) return 0;

  kernels::QuantizedWeight stack = fp4;
  stack.values = static_cast<const uint8_t*>(device_random(static_cast<size_t>(n_exp * n * k / 2), rng));
  stack.scale = device_random(static_cast<size_t>(n_exp * n * k / 32), rng, 0x03, 0x7c);
  float* xs = static_cast<float*>(device_random(static_cast<size_t>(64 * k * 4), rng, 0x3f, 0));
  float* ys = nullptr;
  int32_t* ids = nullptr;
  check(cudaMalloc(&ys, static_cast<size_t>(64 * 6 * n * 4)), "cudaMalloc");
  check(cudaMalloc(&ids, 64 * 6 * 4), "cudaMalloc");
  std::printf("\nrouted experts: %d MXFP4 matrices of [%lld x %lld], top-6 per row\n\n", n_exp, static_cast<long long>(n),
              static_cast<long long>(k));
  std::printf("| rows | pairs | distinct experts | stored MB | us | GB/s | of copy bandwidth |\n|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int rows : {1, 4, 8, 16, 32, 64}) {
    std::vector<int32_t> host;
    std::vector<bool> used(static_cast<size_t>(n_exp));
    for (int r = 0; r < rows; ++r) {
      std::vector<int32_t> pick;
      while (pick.size() < 6) {
        const int32_t e = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_exp));
        if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
      }
      for (int32_t e : pick) used[static_cast<size_t>(e)] = true, host.push_back(e);
    }
    check(cudaMemcpy(ids, host.data(), host.size() * 4, cudaMemcpyHostToDevice), "upload");
    const int64_t distinct = std::count(used.begin(), used.end(), true), pairs = static_cast<int64_t>(host.size());
    const double ms = time_ms(
        iters, [&] { return kernels::native_expert_gemv(xs, k, ids, pairs, 6, stack, n_exp, kernels::StoredFormat::kMxfp4, ys, n, s); });
    const double bytes = fp4_bytes * static_cast<double>(distinct), rate = bytes / (ms * 1e-3);
    std::printf("| %d | %lld | %lld | %.1f | %.1f | %.0f | %.2f |\n", rows, static_cast<long long>(pairs), static_cast<long long>(distinct),
                bytes / 1e6, ms * 1e3, rate / 1e9, rate / bandwidth);
  }
  return 0;
}
