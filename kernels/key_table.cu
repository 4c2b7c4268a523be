// The bf16 key tables the prefill kernels on wgmma read (attention_wgmma.cu, indexer_wgmma.cu): per
// forward and layer, each sequence's rows of the state gathered and converted once, so that every row
// that attends to a key reads it in half the bytes and straight into shared memory.
#include "common.cuh"
#include "mma.cuh"

namespace deepinfer::kernels {
namespace {

struct TableSpec {
  int32_t window;   // ring rows first (attention: the sliding window, when the sequence has a past), or 0
  int64_t offset;   // the entries' offset in a state block
  int32_t dim;      // floats a row
};

TableSpec spec_of(const LayerDev& L, KeyTableKind kind) {
  return kind == KeyTableKind::kAttention ? TableSpec{L.window, L.entry_offset, L.head_dim} : TableSpec{0, L.index_key_offset, L.index_dim};
}

__host__ __device__ __forceinline__ int64_t rows_of(int32_t n_past, int32_t n_tokens, int32_t rate, const TableSpec& t) {
  return (t.window > 0 && n_past > 0 ? t.window : 0) + (rate > 0 ? (static_cast<int64_t>(n_past) + n_tokens) / rate : 0);
}

// grid (chunks, n_seqs): the rows of sequence blockIdx.y, one warp a row; block (0, s) records the
// sequence's first table row.
__global__ void __launch_bounds__(256) key_table_kernel(BatchDev b, StateDev st, LayerDev L, TableSpec t, __nv_bfloat16* __restrict__ rows,
                                                        int32_t* __restrict__ seq_first) {
  pdl_begin();
  const int si = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __shared__ int32_t first_s;
  if (warp == 0) {
    int32_t sum = 0;
    for (int s = lane; s < si; s += 32) sum += static_cast<int32_t>(rows_of(b.seqs[s].n_past, b.seqs[s].n_tokens, L.rate, t));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(kFull, sum, o);
    if (lane == 0) first_s = sum;
  }
  __syncthreads();
  const int32_t first = first_s;
  const SeqInfo sq = b.seqs[si];
  if (blockIdx.x == 0 && threadIdx.x == 0) seq_first[si] = first;
  const int ring = t.window > 0 && sq.n_past > 0 ? t.window : 0, n = static_cast<int>(rows_of(sq.n_past, sq.n_tokens, L.rate, t));
  const float* ring_base = st.slots + static_cast<int64_t>(sq.slot) * st.slot_floats + L.window_offset;
  for (int i = blockIdx.x * 8 + warp; i < n; i += gridDim.x * 8) {
    const float* src = i < ring ? ring_base + static_cast<int64_t>(i) * t.dim : entry_ptr(b, st, L, sq, i - ring, t.offset, t.dim);
    __nv_bfloat16* dst = rows + (static_cast<int64_t>(first) + i) * t.dim;
    for (int c = lane * 4; c < t.dim; c += 128)
      store_bf16x4(dst + c, src ? *reinterpret_cast<const float4*>(src + c) : make_float4(0, 0, 0, 0));
  }
}

}  // namespace

int64_t key_table_rows(int32_t n_past, int32_t n_tokens, const LayerDev& L, KeyTableKind kind) {
  return rows_of(n_past, n_tokens, L.rate, spec_of(L, kind));
}

cudaError_t key_table_build(BatchDev b, StateDev st, LayerDev L, KeyTableKind kind, int64_t max_seq_rows, bf16_t* rows, int32_t* seq_first,
                            Stream s) {
  if (b.n_seqs <= 0) return cudaSuccess;
  const TableSpec t = spec_of(L, kind);
  if (t.dim <= 0 || t.dim > 512 || t.dim % 4 != 0 || t.offset % 4 != 0 || b.n_seqs > 65535) return cudaErrorInvalidValue;
  const int64_t want = (max_seq_rows + 7) / 8, chunks = want < 1 ? 1 : want > 1024 ? 1024 : want;
  launch(key_table_kernel, dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(b.n_seqs)), 256, 0, s)(
      b, st, L, t, reinterpret_cast<__nv_bfloat16*>(rows), seq_first);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
