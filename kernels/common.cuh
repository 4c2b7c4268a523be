// Device helpers shared by the kernel files.
#pragma once

#include "di_kernels.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <utility>

namespace deepinfer::kernels {

inline constexpr unsigned kFull = 0xffffffffu;

// Programmatic dependent launch (sm_90+). Every kernel here begins with pdl_begin() (the weight
// streaming ones may first ask L2 for weights, which no kernel writes): wait until the kernel before
// it in the stream has finished and its writes are visible, then let the next kernel launch, so that
// its blocks are scheduled (and reach their own wait) while this one runs; the launch and ramp-up of
// each small decode kernel overlap the previous one. Without the launch attribute (Stream::pdl
// false, or a launch by another library) both instructions do nothing.
__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// 16 bytes of a weight, streamed past L1 (read once; the activations keep L1).
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Raises Kernel's dynamic shared-memory limit (above the default 48 KB) to `bytes` on the current
// device, unless that is more than the device allows a block (`device_max`): its launches then fail.
template <auto Kernel>
cudaError_t allow_smem(size_t bytes, size_t device_max) {
  if (bytes > device_max) return cudaSuccess;
  return cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

// Each kernel file's part of prepare_device: allow_smem for its kernels above 48 KB.
cudaError_t prepare_attention_mma(size_t device_max);
cudaError_t prepare_attention_wgmma(size_t device_max);
cudaError_t prepare_hyper_connection(size_t device_max);
cudaError_t prepare_hc_mix_mma(size_t device_max);
cudaError_t prepare_indexer_mma(size_t device_max);
cudaError_t prepare_indexer_wgmma(size_t device_max);
cudaError_t prepare_moe(size_t device_max);
cudaError_t prepare_tile_linear(size_t device_max);
cudaError_t prepare_moe_wgmma(size_t device_max);

// launch(kernel, grid, block, smem, stream)(args...): the <<<>>> launch with the PDL attribute;
// launch(...).cluster(n)(args...) also groups the blocks in clusters of n along x (sm_90).
template <typename... P>
struct Launch {
  void (*kernel)(P...);
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute attr[2];
  unsigned n_attrs;
  Launch& cluster(unsigned n) {
    attr[n_attrs].id = cudaLaunchAttributeClusterDimension;
    attr[n_attrs].val.clusterDim.x = n;
    attr[n_attrs].val.clusterDim.y = 1;
    attr[n_attrs].val.clusterDim.z = 1;
    ++n_attrs;
    return *this;
  }
  template <typename... A>
  cudaError_t operator()(A&&... args) {
    cfg.attrs = attr;
    cfg.numAttrs = n_attrs;
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
  }
};
template <typename... P>
Launch<P...> launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, Stream s) {
  Launch<P...> l{kernel, {}, {}, 1};
  l.cfg.gridDim = grid;
  l.cfg.blockDim = block;
  l.cfg.dynamicSmemBytes = smem;
  l.cfg.stream = s.id;
  l.attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  l.attr[0].val.programmaticStreamSerializationAllowed = s.pdl ? 1 : 0;
  return l;
}

// A pointer the 16-byte vector loads and stores may use.
__host__ __device__ inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The current device's multiprocessors (0 where unknown).
inline int multiprocessors() {
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

// Sum over the block; every thread gets the result. `red` holds 32 floats; blockDim.x a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < nw ? red[lane] : 0.0f;
  return warp_sum(t);
}

// Exclusive prefix sum over the block of one int per thread; `red` holds 33 ints. Returns the
// exclusive prefix; *total gets the block total. blockDim.x a multiple of 32.
__device__ __forceinline__ int block_exclusive_scan(int v, int* red, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    int y = __shfl_up_sync(kFull, x, o);
    if (lane >= o) x += y;
  }
  __syncthreads();
  if (lane == 31) red[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int w = lane < nw ? red[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      int y = __shfl_up_sync(kFull, w, o);
      if (lane >= o) w += y;
    }
    if (lane < nw) red[lane] = w;  // inclusive over warps
    if (lane == 31) red[32] = w;
  }
  __syncthreads();
  const int before = warp ? red[warp - 1] : 0;
  *total = red[32];
  return before + x - v;
}

// 16 bytes global -> shared without passing through registers; zero-filled when !valid (gmem is
// then not read but must still be a valid address).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

// The clamped SwiGLU of one gate / up pair: silu(min(g, limit)) * clamp(u, -limit, limit).
__device__ __forceinline__ float swiglu_clamped(float g, float u, float limit) {
  const float a = fminf(g, limit);
  const float b = fminf(fmaxf(u, -limit), limit);
  return a / (1.0f + expf(-a)) * b;
}

// Two bf16 values packed in a word (the lower-addressed one in the low half) as floats: exact.
__device__ __forceinline__ float2 unpack_bf16(uint32_t u) { return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u)); }

__device__ __forceinline__ bf16_t to_bf16_bits(float f) {
  __nv_bfloat16 h = __float2bfloat16_rn(f);
  return *reinterpret_cast<bf16_t*>(&h);
}

// Rope pair i's (channels 2i, 2i + 1 of the rope part) cosine and sine of position * inv_freq[i]
// (the negative angle if inverse), times attention_factor.
__device__ __forceinline__ float2 rope_cos_sin(const RopeDev& r, int32_t position, int i, bool inverse) {
  const float angle = static_cast<float>(position) * r.inv_freq[i];
  const float c = cosf(angle) * r.attention_factor;
  float sn = sinf(angle) * r.attention_factor;
  if (inverse) sn = -sn;
  return make_float2(c, sn);
}
__device__ __forceinline__ float2 rotate_by(float x0, float x1, float2 cs) { return make_float2(x0 * cs.x - x1 * cs.y, x1 * cs.x + x0 * cs.y); }

// Rope pair i rotated by position * inv_freq[i] (the negative angle if inverse).
__device__ __forceinline__ float2 rotate_pair(float x0, float x1, const RopeDev& r, int32_t position, int i, bool inverse) {
  return rotate_by(x0, x1, rope_cos_sin(r, position, i, inverse));
}

// Rotates the trailing rope_dim channels of one head vector held in memory (angle negated if inverse).
// Threads t of n_threads share the pairs.
__device__ __forceinline__ void rotate_pairs(float* head, int head_dim, const RopeDev& r, int32_t position, bool inverse,
                                             int t, int n_threads) {
  float* x = head + head_dim - r.rope_dim;
  for (int i = t; i < r.rope_dim / 2; i += n_threads) {
    const float2 v = rotate_pair(x[2 * i], x[2 * i + 1], r, position, i, inverse);
    x[2 * i] = v.x;
    x[2 * i + 1] = v.y;
  }
}

// Row of compressed entry w (of the entries at `offset`) of sequence sq, or null past its blocks.
__device__ __forceinline__ const float* entry_ptr(const BatchDev& b, const StateDev& st, const LayerDev& L,
                                                  const SeqInfo& sq, int32_t w, int64_t offset, int dim) {
  const int32_t bi = (w * L.rate) / st.block_tokens;
  if (bi < 0 || bi >= sq.n_blocks) return nullptr;
  const int32_t block = b.block_tables[sq.table_offset + bi];
  return st.blocks + static_cast<int64_t>(block) * st.block_floats + offset + static_cast<int64_t>(w % L.entries_per_block) * dim;
}

// The keys batch row r attends to, in order: its sliding window (oldest first, this step's rows from
// kv, earlier ones from the ring), then the compressed entries (the row's `selected` ones, or all
// visible). key(j) is null for a masked entry (selected -1, or past the sequence's blocks).
struct AttentionKeys {
  const float* kv;
  const int32_t* selected;
  int64_t sel_cols, r;
  SeqInfo sq;
  const float* ring;
  int32_t lo, n_win;
  int64_t total;

  __device__ AttentionKeys(const BatchDev& b, const StateDev& st, const LayerDev& L, const float* kv_, const int32_t* selected_,
                           int64_t sel_cols_, int64_t r_)
      : kv(kv_), selected(selected_), sel_cols(sel_cols_), r(r_), sq(b.seqs[b.row_seq[r_]]) {
    const int32_t p = b.positions[r];
    ring = st.slots + static_cast<int64_t>(sq.slot) * st.slot_floats + L.window_offset;
    lo = max(0, p - L.window + 1);
    n_win = p - lo + 1;
    const int64_t n_comp = L.rate > 0 ? (selected ? sel_cols : (p + 1) / L.rate) : 0;
    total = n_win + n_comp;
  }

  // Keys [begin, end) of share `split` of n_splits contiguous shares (a block's part of a split row).
  __device__ void share(int split, int n_splits, int64_t& begin, int64_t& end) const {
    const int64_t size = (total + n_splits - 1) / n_splits;
    begin = size * split;
    end = min(total, begin + size);
  }

  // (b, st, L: the same as given to the constructor.)
  __device__ const float* key(int64_t j, const BatchDev& b, const StateDev& st, const LayerDev& L) const {
    const int hd = L.head_dim;
    if (j < n_win) {
      const int32_t pos = lo + static_cast<int32_t>(j);
      return pos >= sq.n_past ? kv + static_cast<int64_t>(sq.first_row + pos - sq.n_past) * hd
                              : ring + static_cast<int64_t>(pos % L.window) * hd;
    }
    const int64_t idx = j - n_win;
    const int32_t w = selected ? selected[r * sel_cols + idx] : static_cast<int32_t>(idx);
    return w >= 0 ? entry_ptr(b, st, L, sq, w, L.entry_offset, hd) : nullptr;
  }
};

// A head's output scale from its running max m and denominator l, with the sink joining the
// softmax: {f, inv} = {exp(m - mx), 1 / (l f + exp(sink - mx))}, mx the larger of m and the sink;
// the output is o f inv.
__device__ __forceinline__ float2 sink_scale(float m, float l, float sink) {
  const float mx = fmaxf(m, sink);
  const float f = l > 0.0f ? expf(m - mx) : 0.0f;
  return make_float2(f, 1.0f / (l * f + expf(sink - mx)));
}

inline constexpr int kMaxAttnSplits = 32;
// Merges the key shares of an attention launch (partial: per (row, head, share) the unnormalised
// sum over the share's keys, its max and its denominator) with the sinks; one block per (row, head).
// n_splits <= kMaxAttnSplits. With unrope.inv_freq, each output head's rope channels are rotated back
// by its row's position (Backend::attention's unrope).
cudaError_t attention_combine(const float* partial, const float* sinks, int64_t row_heads, int heads, int hd, int n_splits, float* out,
                              Stream s, RopeDev unrope = {}, const int32_t* positions = nullptr);

// For a block's rows i0 .. i0 + R - 1 of a launch over rows row_begin .. row_begin + n_rows - 1 (the
// indexer kernels): each row's visible compressed entries ((position + 1) / rate; 0 past n_rows) and
// sequence (-1 past n_rows). Returns the largest count; `shared`: every valid row is of one sequence.
template <int R>
__device__ __forceinline__ int32_t rows_visible(const BatchDev& b, const LayerDev& L, int64_t row_begin, int64_t i0, int64_t n_rows,
                                                int32_t (&vis)[R], int32_t (&seq)[R], bool& shared) {
  int32_t vis_max = 0;
  shared = true;
#pragma unroll
  for (int j = 0; j < R; ++j) {
    const bool valid = i0 + j < n_rows;
    const int64_t r = row_begin + i0 + j;
    vis[j] = valid ? (b.positions[r] + 1) / L.rate : 0;
    seq[j] = valid ? b.row_seq[r] : -1;
    vis_max = max(vis_max, vis[j]);
    shared = shared && (!valid || seq[j] == seq[0]);
  }
  return vis_max;
}

// Hyper-connection mixes (mix_partial): columns per partial, and the tensor-core path for many rows
// (hc_mix_mma.cu; x and w 16-byte aligned, K % 4 == 0, n <= kMixMmaMaxOut).
inline constexpr int kMixChunk = 512, kMixMmaMaxOut = 24, kMixMmaMinRows = 1024;
cudaError_t mix_partial_mma(const float* x, int64_t rows, int64_t K, const float* w, int n, int splits, float* partial, Stream s);

inline unsigned blocks_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 2147483647 ? 2147483647 : b));
}

}  // namespace deepinfer::kernels
