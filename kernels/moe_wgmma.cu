// Prefill expert products on Hopper's warpgroup MMA (wgmma): the contracts of moe_gate_up and
// moe_down (moe.cu) for 128-row tiles (moe_plan's kMoeBigTileRows), where an expert's weights are
// the bytes that matter (a 4096-token prefill reads all 256 experts of a layer, ~96 rows each).
//
// A block per (tile, 128 output columns): two warpgroups, each multiplying 64 of the tile's rows by
// the block's 128 weight rows as m64n128k16 products, both operands K-major in shared memory in the
// 128-byte swizzled layout (wgmma.cuh). K advances 64 at a time through kStages buffers filled by
// cp.async (rows past the tile's end zero-filled), so the loads of the next slices are in flight
// while the tensor cores work on this one. Gate/up: the block's 128 weight rows are 64 rows of w1
// and the same 64 of w3, so each thread holds the gate and up values of its outputs and writes the
// clamped SwiGLU in bf16. Down: 128 rows of w2, fp32 out. Gate/up takes its rows from the unpermuted
// input through `sources` (row r of the tile is input row sources[r]), so no gathered copy is written.
//
// MXFP4 experts (kFp4, the native_weights option): cp.async brings each K slice's stored bytes (128
// rows x 32 bytes) and, every 8 slices, the rows' E8M0 scales for them into staging buffers; the
// threads turn a landed slice into the swizzled bf16 operand (value x scale, exact but where it falls
// below bf16's range: rounded as the host's dequantization does) while the tensor cores multiply the
// slice before it. The weights' bytes read from memory are a quarter of bf16's.
#include "common.cuh"
#include "stored_formats.cuh"
#include "tile_linear.h"
#include "wgmma.cuh"

#include <algorithm>
#include <type_traits>

namespace deepinfer::kernels {
namespace {

constexpr int kCols = 128, kK = 64, kStages = 3, kThreads = 256;
static_assert(kMoeBigTileRows == 128, "a tile is two warpgroups of 64 rows");
constexpr uint32_t kOperandBytes = 128 * 128;  // 128 rows x 64 bf16, swizzled
constexpr uint32_t kStageBytes = 2 * kOperandBytes;
constexpr size_t kSmemBytes = 1024 /* alignment */ + kStages * kStageBytes;
// kFp4: two slices' stored bytes (128 rows x 32) and two groups of 8 slices' scales (128 rows x 16)
constexpr uint32_t kFp4SliceBytes = 128 * 32, kFp4ScaleBytes = 128 * 16;
constexpr int kFp4ScaleSlices = 8;
constexpr size_t kFp4SmemBytes = kSmemBytes + 2 * kFp4SliceBytes + 2 * kFp4ScaleBytes;

// A stack of MXFP4 matrices (kFp4): expert e's row r at values + (e n + r) k / 2 (low nibble first),
// its E8M0 scales at scales + (e n + r) k / 32.
struct Fp4Stack {
  const uint8_t* values = nullptr;
  const uint8_t* scales = nullptr;
};

#if defined(DI_WGMMA)
// d (64 x 128, fp32) += A (64 x 16) B^T (16 x 128); A and B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "
      "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
        "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
        "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
        "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),
        "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
        "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(1));  // (accumulate: d starts at zero)
}
#endif

// grid (column blocks of 64 (kSwiglu) or kCols outputs, tiles): a tile's column blocks are neighbours,
// so they run together and its rows come from DRAM once (a 4096-token layer's 24 K rows do not fit in
// L2; read once per column block they would cost as much as the weights), and an expert's tiles are
// neighbours too (its weight rows shared through L2). kSwiglu: out = h (bf16, n = inter columns),
// weights w (w1) and w_up (w3); else out = y in bf16 into h (n = d columns), weight w (w2). x rows
// are k wide;
// sources (or null: row r is x's row r) maps the tiles' rows to x's. A dense product (tiles null,
// batch-invariant mode): tile blockIdx.y is rows 128 y .. of dense_rows, group blockIdx.z reads x + z k
// and weight z, writes out + z n (fp32 or bf16); rows of x are ldx apart, of out ldo.
//
// Dense products in K chunks (tile_linear_wgmma): each output sums K in `chunks` equal chunks, each
// chunk's slices from zero, the chunks added in order. ldw: the weights' row stride and a group's
// stride in x (k where K is not chunked). Split blocks (grid.z = groups x ldw / k): block chunk c
// multiplies K range [c k, c k + k) into its partial, h + c dense_rows ldo (sum_chunks adds them);
// kChunkSum: one block per tile runs all of K (k = ldw) and adds each chunk of chunk_slices slices
// to its output in order (the first chunk written, each later one added to what it wrote: the
// output stays in L2, and the shared memory of two blocks a multiprocessor is kept): the same bits.
template <bool kSwiglu, typename Out = __nv_bfloat16, bool kFp4 = false, bool kChunkSum = false>
__global__ void __launch_bounds__(kThreads, 2)
    moe_wgmma_kernel(const __nv_bfloat16* __restrict__ x, const int32_t* __restrict__ sources, const __nv_bfloat16* __restrict__ w,
                     const __nv_bfloat16* __restrict__ w_up, int64_t k, int64_t n, float limit, const int4* __restrict__ tiles,
                     const int32_t* __restrict__ n_tiles, Out* __restrict__ h, int64_t dense_rows, int64_t ldx, int64_t ldo, Fp4Stack q,
                     Fp4Stack q_up, int64_t ldw, int chunk_slices) {
  pdl_begin();
#if defined(DI_WGMMA)
  if (tiles && static_cast<int>(blockIdx.y) >= *n_tiles) return;
  if (!tiles && static_cast<int64_t>(blockIdx.y) * kMoeBigTileRows >= dense_rows) return;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* stages = smem_raw + ((1024 - (raw & 1023)) & 1023);  // [kStages][A: 128 rows x 128 B, B: 128 rows x 128 B]
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(stages));

  const int64_t splits = tiles ? 1 : ldw / k;  // (dense: K chunks run by blocks of their own)
  const int4 t = tiles ? tiles[blockIdx.y]     // expert, first row, end row
                       : make_int4(static_cast<int>(blockIdx.z / splits), static_cast<int>(blockIdx.y) * kMoeBigTileRows,
                                   static_cast<int>(dense_rows < (blockIdx.y + 1) * int64_t{kMoeBigTileRows}
                                                        ? dense_rows
                                                        : (blockIdx.y + 1) * int64_t{kMoeBigTileRows}),
                                   0);
  const int64_t e = t.x, row0 = t.y;
  const int rows = t.z - t.y;
  const int64_t split = blockIdx.z % splits, k0 = split * k;  // this block's K range [k0, k0 + k)
  if (!tiles) {
    x += e * ldw + k0;
    h += e * n + split * dense_rows * ldo;
  } else {
    ldx = k;
    ldo = n;
  }
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  constexpr int kColsPerBlock = kSwiglu ? kCols / 2 : kCols;  // outputs a block (gate/up: 64 of each weight)
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kColsPerBlock;

  // This thread's copies per stage: rows tid / 8 + 32 u of A and of B, 16-byte chunk tid % 8.
  const int chunk = tid & 7;
  const __nv_bfloat16* a_src[4];
  const __nv_bfloat16* b_src[4];
  bool a_live[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int r = (tid >> 3) + 32 * u;
    a_live[u] = r < rows;
    const int64_t row = row0 + (a_live[u] ? r : 0);
    a_src[u] = x + (sources ? sources[row] : row) * ldx + 8 * chunk;
    const int64_t wrow = kSwiglu ? c0 + (r & 63) : c0 + r;
    if constexpr (!kFp4) b_src[u] = (kSwiglu && r >= 64 ? w_up : w) + (e * n + wrow) * ldw + k0 + 8 * chunk;
  }
  // kFp4: this thread copies half (16 bytes) of weight row tid / 2's slice, and (tid < 128) row tid's
  // scales; it turns the bytes it copied into bf16.
  unsigned char* fp4_slices = stages + kStages * kStageBytes;   // [2][128 rows x 32 bytes]
  unsigned char* fp4_scales = fp4_slices + 2 * kFp4SliceBytes;  // [2][128 rows x 16 bytes]
  const int fp4_row = tid >> 1, fp4_half = tid & 1;
  const uint8_t* fp4_src = nullptr;
  const uint8_t* fp4_scale_src = nullptr;
  if constexpr (kFp4) {
    const auto row_of = [&](int r) { return e * n + (kSwiglu ? c0 + (r & 63) : c0 + r); };
    const Fp4Stack& mv = kSwiglu && fp4_row >= 64 ? q_up : q;
    fp4_src = mv.values + row_of(fp4_row) * (k / 2) + 16 * fp4_half;
    const Fp4Stack& ms = kSwiglu && tid >= 64 ? q_up : q;
    if (tid < 128) fp4_scale_src = ms.scales + row_of(tid) * (k / 32);
  }
  auto issue = [&](int64_t kt) {  // K slice kt into its stage buffer
    unsigned char* a_dst = stages + (kt % kStages) * kStageBytes;
    unsigned char* b_dst = a_dst + kOperandBytes;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int r = (tid >> 3) + 32 * u;
      cp_async16(a_dst + swizzle128(r, chunk), a_src[u] + kt * kK, a_live[u]);
      if constexpr (!kFp4) cp_async16(b_dst + swizzle128(r, chunk), b_src[u] + kt * kK, true);
    }
    if constexpr (kFp4) {
      cp_async16(fp4_slices + (kt & 1) * kFp4SliceBytes + fp4_row * 32 + 16 * fp4_half, fp4_src + kt * (kK / 2), true);
      if (kt % kFp4ScaleSlices == 0 && tid < 128)
        cp_async16(fp4_scales + ((kt / kFp4ScaleSlices) & 1) * kFp4ScaleBytes + tid * 16, fp4_scale_src + kt * (kK / 32), true);
    }
  };
  // kFp4: slice kt's stored bytes (landed) into its stage's B operand, 32 values of row fp4_row.
  auto decode = [&](int64_t kt) {
    const uint4 v = *reinterpret_cast<const uint4*>(fp4_slices + (kt & 1) * kFp4SliceBytes + fp4_row * 32 + 16 * fp4_half);
    const uint8_t scale = fp4_scales[((kt / kFp4ScaleSlices) & 1) * kFp4ScaleBytes + fp4_row * 16 + (kt % kFp4ScaleSlices) * 2 + fp4_half];
    unsigned char* b_dst = stages + (kt % kStages) * kStageBytes + kOperandBytes;
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // a word: 8 values, one 16-byte chunk of the operand row
      uint32_t packed[4];
      e2m1x8_to_bf16(words[j], scale, packed);
      *reinterpret_cast<uint4*>(b_dst + swizzle128(fp4_row, 4 * fp4_half + j)) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
  };

  const int64_t nk = k / kK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nk) issue(s);
    cp_async_commit();  // (empty groups keep the count of groups per slice fixed)
  }
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  // acc[4 i + {0, 1, 2, 3}]: rows 64 wg + 16 warp + g (+ 8 for 2, 3), columns 8 i + 2 t4 (+ 1 for 1, 3)
  // of the block's 128 weight rows.
  const int r_lo = 64 * wg + 16 * warp + g, r_hi = r_lo + 8;
  // A dense product's fp32 out: acc written, or (add) added to what the block wrote before (kChunkSum:
  // the chunks so far; out + acc, fp32 adds being commutative, is total + chunk). The loads first, in
  // flight together, then the stores.
  [[maybe_unused]] const auto write_f32 = [&](bool add) {
    if (add) {
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int64_t col = c0 + 8 * i + 2 * t4;
        if (r_lo < rows) {
          const float2 p = *reinterpret_cast<const float2*>(h + (row0 + r_lo) * ldo + col);
          acc[4 * i] = p.x + acc[4 * i];
          acc[4 * i + 1] = p.y + acc[4 * i + 1];
        }
        if (r_hi < rows) {
          const float2 p = *reinterpret_cast<const float2*>(h + (row0 + r_hi) * ldo + col);
          acc[4 * i + 2] = p.x + acc[4 * i + 2];
          acc[4 * i + 3] = p.y + acc[4 * i + 3];
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int64_t col = c0 + 8 * i + 2 * t4;
      if (r_lo < rows) *reinterpret_cast<float2*>(h + (row0 + r_lo) * ldo + col) = make_float2(acc[4 * i], acc[4 * i + 1]);
      if (r_hi < rows) *reinterpret_cast<float2*>(h + (row0 + r_hi) * ldo + col) = make_float2(acc[4 * i + 2], acc[4 * i + 3]);
    }
  };
  const auto multiply = [&](int64_t kt) {  // acc += slice kt's product, left in flight
    const uint32_t a_addr = base + static_cast<uint32_t>(kt % kStages) * kStageBytes + wg * (kOperandBytes / 2);
    const uint32_t b_addr = base + static_cast<uint32_t>(kt % kStages) * kStageBytes + kOperandBytes;
    fence_operands(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kK / 16; ++ks)
      wgmma_m64n128k16_ss(acc, smem_desc(a_addr + ks * 32, 16, 1024), smem_desc(b_addr + ks * 32, 16, 1024));
    wgmma_commit();
  };
  if constexpr (kFp4) {
    // Slice kt + 1 is decoded while the tensor cores multiply slice kt (B operands of the two in
    // different stage buffers); slice kt + 2's copies are in flight meanwhile.
    cp_async_wait<kStages - 2>();
    __syncthreads();
    decode(0);
    fence_proxy_async();  // (the tensor cores read what the threads wrote)
    __syncthreads();
    for (int64_t kt = 0; kt < nk; ++kt) {
      // (slice kt - 1's buffers are free: its product ended before the last barrier; slice kt's
      // staging buffer was decoded before it)
      if (kt + kStages - 1 < nk) issue(kt + kStages - 1);
      cp_async_commit();
      multiply(kt);
      if (kt + 1 < nk) {
        cp_async_wait<kStages - 2>();  // slice kt + 1 has landed (this thread's copies) ...
        __syncthreads();               // ... everyone's
        decode(kt + 1);
      }
      wgmma_wait<0>();
      fence_operands(acc);
      fence_proxy_async();
      __syncthreads();  // slice kt + 1's operands are visible; every product of slice kt is done
    }
  } else {
    for (int64_t kt = 0; kt < nk; ++kt) {
      cp_async_wait<kStages - 2>();  // slice kt has landed (this thread's copies)
      fence_proxy_async();
      __syncthreads();  // ... everyone's; and every product of slice kt - 1 is done (its buffer is free)
      if (kt + kStages - 1 < nk) issue(kt + kStages - 1);
      cp_async_commit();
      multiply(kt);
      wgmma_wait<0>();  // (left in flight across the back edge, ptxas serializes every product)
      fence_operands(acc);
      if constexpr (kChunkSum) {
        if ((kt + 1) % chunk_slices == 0) {  // a chunk's end: out (the total so far) += it; the next from zero
          write_f32(kt + 1 != chunk_slices);
#pragma unroll
          for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
        }
      }
    }
  }
  if constexpr (kChunkSum) return;  // (every chunk's end wrote out)
  if constexpr (kSwiglu) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // gate columns 8 i.., up columns 64 + 8 i..
      const int64_t col = c0 + 8 * i + 2 * t4;
      if (r_lo < rows) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(swiglu_clamped(acc[4 * i], acc[4 * (i + 8)], limit),
                                                       swiglu_clamped(acc[4 * i + 1], acc[4 * (i + 8) + 1], limit));
        *reinterpret_cast<__nv_bfloat162*>(h + (row0 + r_lo) * ldo + col) = v;
      }
      if (r_hi < rows) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(swiglu_clamped(acc[4 * i + 2], acc[4 * (i + 8) + 2], limit),
                                                       swiglu_clamped(acc[4 * i + 3], acc[4 * (i + 8) + 3], limit));
        *reinterpret_cast<__nv_bfloat162*>(h + (row0 + r_hi) * ldo + col) = v;
      }
    }
  } else if constexpr (std::is_same_v<Out, float>) {
    write_f32(false);
  } else {  // y in bf16, into h
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int64_t col = c0 + 8 * i + 2 * t4;
      if (r_lo < rows)
        *reinterpret_cast<__nv_bfloat162*>(h + (row0 + r_lo) * ldo + col) = __floats2bfloat162_rn(acc[4 * i], acc[4 * i + 1]);
      if (r_hi < rows)
        *reinterpret_cast<__nv_bfloat162*>(h + (row0 + r_hi) * ldo + col) = __floats2bfloat162_rn(acc[4 * i + 2], acc[4 * i + 3]);
    }
  }
#else
  __trap();  // built without sm_90a: wgmma_supported() keeps the backend from launching this
#endif
}

template <bool kSwiglu>
cudaError_t launch_moe_wgmma(const bf16_t* x, const int32_t* sources, const bf16_t* w, const bf16_t* w_up, int64_t k, int64_t n, float limit, const int4* tiles,
                             const int32_t* n_tiles, int max_tiles, bf16_t* h, Stream s) {
  if (max_tiles <= 0) return cudaSuccess;
  constexpr int per_block = kSwiglu ? kCols / 2 : kCols;
  if (k % kK != 0 || n % per_block != 0 || max_tiles > 65535 || !aligned16(x) || !aligned16(w) || (kSwiglu && !aligned16(w_up)))
    return cudaErrorInvalidValue;
  launch(moe_wgmma_kernel<kSwiglu>, dim3(static_cast<unsigned>(n / per_block), static_cast<unsigned>(max_tiles)), kThreads, kSmemBytes, s)(
      reinterpret_cast<const __nv_bfloat16*>(x), sources, reinterpret_cast<const __nv_bfloat16*>(w),
      reinterpret_cast<const __nv_bfloat16*>(w_up), k, n, limit, tiles, n_tiles, reinterpret_cast<__nv_bfloat16*>(h), int64_t{0}, k, n,
      Fp4Stack{}, Fp4Stack{}, k, 0);
  return cudaGetLastError();
}

Fp4Stack fp4_stack(const QuantizedWeight& w) { return Fp4Stack{w.values, static_cast<const uint8_t*>(w.scale)}; }

bool fp4_fits(const QuantizedWeight& w, int64_t rows, int64_t k) {
  return w.values && w.scale && w.rows == rows && w.cols == k && w.scale_type == ScaleType::kE8M0 && k % (kK * kFp4ScaleSlices) == 0 &&
         aligned16(w.values) && aligned16(w.scale);
}

template <bool kSwiglu>
cudaError_t launch_moe_wgmma_fp4(const bf16_t* x, const int32_t* sources, const QuantizedWeight& w, const QuantizedWeight* w_up, int64_t k,
                                 int64_t n, float limit, const int4* tiles, const int32_t* n_tiles, int max_tiles, bf16_t* h, Stream s) {
  if (max_tiles <= 0) return cudaSuccess;
  constexpr int per_block = kSwiglu ? kCols / 2 : kCols;
  if (n % per_block != 0 || max_tiles > 65535 || !aligned16(x) || !fp4_fits(w, n, k) || (kSwiglu && !fp4_fits(*w_up, n, k)))
    return cudaErrorInvalidValue;
  launch(moe_wgmma_kernel<kSwiglu, __nv_bfloat16, true>, dim3(static_cast<unsigned>(n / per_block), static_cast<unsigned>(max_tiles)),
         kThreads, kFp4SmemBytes, s)(reinterpret_cast<const __nv_bfloat16*>(x), sources, nullptr, nullptr, k, n, limit, tiles, n_tiles,
                                     reinterpret_cast<__nv_bfloat16*>(h), int64_t{0}, k, n, fp4_stack(w),
                                     kSwiglu ? fp4_stack(*w_up) : Fp4Stack{}, k, 0);
  return cudaGetLastError();
}

}  // namespace

cudaError_t prepare_moe_wgmma(size_t device_max) {
  cudaError_t e = allow_smem<moe_wgmma_kernel<true>>(kSmemBytes, device_max);
  if (e == cudaSuccess) e = allow_smem<moe_wgmma_kernel<false>>(kSmemBytes, device_max);
  if (e == cudaSuccess) e = allow_smem<moe_wgmma_kernel<true, __nv_bfloat16, true>>(kFp4SmemBytes, device_max);
  if (e == cudaSuccess) e = allow_smem<moe_wgmma_kernel<false, __nv_bfloat16, true>>(kFp4SmemBytes, device_max);
  if (e == cudaSuccess) e = allow_smem<moe_wgmma_kernel<false, float, false, true>>(kSmemBytes, device_max);
  return e == cudaSuccess ? allow_smem<moe_wgmma_kernel<false, float>>(kSmemBytes, device_max) : e;
}

bool tile_linear_wgmma_supported(int64_t k, int64_t ldx, int64_t n, int64_t ldy, const bf16_t* x, const bf16_t* w, const float* y) {
  return k % kK == 0 && n % kCols == 0 && ldx % 8 == 0 && ldy % 2 == 0 && aligned16(x) && aligned16(w) &&
         reinterpret_cast<uintptr_t>(y) % 8 == 0;
}

cudaError_t tile_gate_up_wgmma(const bf16_t* x, int64_t rows, int64_t d, const bf16_t* w1, const bf16_t* w3, int64_t inter, float limit,
                               bf16_t* h, Stream s) {
  if (rows <= 0 || inter <= 0) return cudaSuccess;
  const int64_t tiles = (rows + kMoeBigTileRows - 1) / kMoeBigTileRows;
  if (d % kK != 0 || inter % (kCols / 2) != 0 || tiles > 65535 || !aligned16(x) || !aligned16(w1) || !aligned16(w3) || !aligned16(h))
    return cudaErrorInvalidValue;
  launch(moe_wgmma_kernel<true>, dim3(static_cast<unsigned>(inter / (kCols / 2)), static_cast<unsigned>(tiles)), kThreads, kSmemBytes, s)(
      reinterpret_cast<const __nv_bfloat16*>(x), nullptr, reinterpret_cast<const __nv_bfloat16*>(w1),
      reinterpret_cast<const __nv_bfloat16*>(w3), d, inter, limit, nullptr, nullptr, reinterpret_cast<__nv_bfloat16*>(h), rows, d, inter,
      Fp4Stack{}, Fp4Stack{}, d, 0);
  return cudaGetLastError();
}

namespace {
// K chunks of a dense product on wgmma, by its shape alone: enough that one row tile's column blocks
// times the chunks fill about 128 multiprocessors (at most 4; a chunk a multiple of 64).
int wgmma_chunks(int64_t k, int64_t n, int groups) {
  const int64_t blocks = n / kCols * groups;
  int c = static_cast<int>(std::clamp<int64_t>(128 / std::max<int64_t>(blocks, 1), 1, 4));
  while (c > 1 && k % (c * kK) != 0) --c;
  return c;
}
// A single row tile (decode) runs the chunks as blocks of their own; more tiles sum them in one.
bool wgmma_split(int64_t rows, int chunks) { return chunks > 1 && rows <= kMoeBigTileRows; }
}  // namespace

int64_t tile_linear_wgmma_scratch(int64_t rows, int64_t k, int64_t n, int groups) {
  const int chunks = wgmma_chunks(k, n, groups);
  return wgmma_split(rows, chunks) ? rows * n * groups * chunks : 0;
}

cudaError_t tile_linear_wgmma(const bf16_t* x, int64_t rows, int64_t k, int64_t ldx, const bf16_t* w, int64_t n, int groups, float* y,
                              int64_t ldy, float* part, Stream s) {
  if (rows <= 0 || n <= 0 || groups <= 0) return cudaSuccess;
  const int64_t tiles = (rows + kMoeBigTileRows - 1) / kMoeBigTileRows;
  const int chunks = wgmma_chunks(k, n, groups);
  const bool split = wgmma_split(rows, chunks);
  if (!tile_linear_wgmma_supported(k, ldx, n, ldy, x, w, y) || tiles > 65535 || groups * (split ? chunks : 1) > 65535 || (split && !part))
    return cudaErrorInvalidValue;
  const auto* xb = reinterpret_cast<const __nv_bfloat16*>(x);
  const auto* wb = reinterpret_cast<const __nv_bfloat16*>(w);
  const dim3 grid(static_cast<unsigned>(n / kCols), static_cast<unsigned>(tiles), static_cast<unsigned>(groups * (split ? chunks : 1)));
  if (split) {
    launch(moe_wgmma_kernel<false, float>, grid, kThreads, kSmemBytes, s)(xb, nullptr, wb, nullptr, k / chunks, n, 0.0f, nullptr, nullptr,
                                                                          part, rows, ldx, n * groups, Fp4Stack{}, Fp4Stack{}, k, 0);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    return sum_chunks(part, rows, n * groups, chunks, y, ldy, s);
  }
  if (chunks > 1)
    launch(moe_wgmma_kernel<false, float, false, true>, grid, kThreads, kSmemBytes, s)(xb, nullptr, wb, nullptr, k, n, 0.0f, nullptr,
                                                                                       nullptr, y, rows, ldx, ldy, Fp4Stack{}, Fp4Stack{},
                                                                                       k, static_cast<int>(k / chunks / kK));
  else
    launch(moe_wgmma_kernel<false, float>, grid, kThreads, kSmemBytes, s)(xb, nullptr, wb, nullptr, k, n, 0.0f, nullptr, nullptr, y, rows,
                                                                          ldx, ldy, Fp4Stack{}, Fp4Stack{}, k, 0);
  return cudaGetLastError();
}

cudaError_t moe_gate_up_wgmma(const bf16_t* x, const int32_t* sources, const bf16_t* w1, const bf16_t* w3, int64_t d, int64_t inter,
                              float limit, const int4* tiles, const int32_t* n_tiles, int max_tiles, bf16_t* h, Stream s) {
  return launch_moe_wgmma<true>(x, sources, w1, w3, d, inter, limit, tiles, n_tiles, max_tiles, h, s);
}

cudaError_t moe_down_wgmma(const bf16_t* h, const bf16_t* w2, int64_t inter, int64_t d, const int4* tiles, const int32_t* n_tiles,
                           int max_tiles, bf16_t* y, Stream s) {
  return launch_moe_wgmma<false>(h, nullptr, w2, nullptr, inter, d, 0.0f, tiles, n_tiles, max_tiles, y, s);
}

bool moe_wgmma_fp4_supported(const QuantizedWeight& w1, const QuantizedWeight& w3, const QuantizedWeight& w2, int64_t d, int64_t inter) {
  return d % kCols == 0 && inter % kCols == 0 && fp4_fits(w1, inter, d) && fp4_fits(w3, inter, d) && fp4_fits(w2, d, inter);
}

cudaError_t moe_gate_up_wgmma_fp4(const bf16_t* x, const int32_t* sources, const QuantizedWeight& w1, const QuantizedWeight& w3, int64_t d,
                                  int64_t inter, float limit, const int4* tiles, const int32_t* n_tiles, int max_tiles, bf16_t* h,
                                  Stream s) {
  return launch_moe_wgmma_fp4<true>(x, sources, w1, &w3, d, inter, limit, tiles, n_tiles, max_tiles, h, s);
}

cudaError_t moe_down_wgmma_fp4(const bf16_t* h, const QuantizedWeight& w2, int64_t inter, int64_t d, const int4* tiles,
                               const int32_t* n_tiles, int max_tiles, bf16_t* y, Stream s) {
  return launch_moe_wgmma_fp4<false>(h, nullptr, w2, nullptr, inter, d, 0.0f, tiles, n_tiles, max_tiles, y, s);
}

}  // namespace deepinfer::kernels
