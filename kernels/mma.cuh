// Tensor-core building blocks (mma.sync m16n8k16 with bf16 operands, ldmatrix) for the kernels
// whose query heads share one key (attention_mma.cu, indexer.cu). Fragment layouts are PTX's:
// lane = 4 g + t4; A (16x16, row-major) regs hold (g, 2t4..+1), (g+8, 2t4..), (g, 2t4+8..),
// (g+8, 2t4+8..); B (16x8) regs hold rows (2t4..+1, col g) and (2t4+8.., g); C holds (g, 2t4..+1)
// and (g+8, 2t4..+1).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace deepinfer::kernels {

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* p) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* p) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// d += a (16x16, row) * b (16x8, col); bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Scores in the online softmax are kept in base 2 (the caller folds log2(e) into its scale, and
// multiplies the final max by ln 2): p = 2^(s - m) is one MUFU.EX2, and 2^-inf is 0 without a select.
inline constexpr float kLog2e = 1.44269504088896341f, kLn2 = 0.693147180559945309f;

__device__ __forceinline__ float exp2_approx(float x) {  // (2 ulp; subnormal results flush to 0)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// One step of the online softmax for a thread's two rows of an m16 tile (g and g + 8) over N scores
// each in base 2 (-inf: masked), the rows spread over the four lanes of a quad: the quad's row maxima
// update the running max m, the scores become p = 2^(s - m) (0 where masked), this lane's share of the
// denominator l is rescaled and grows by its p. Returns the factors {a, b} that rescale each row's
// earlier output. A row with no valid key so far keeps max -inf: its p and factors are 0 (its output
// and denominator are still 0).
template <int N>
__device__ __forceinline__ float2 online_softmax_step(float (&sa)[N], float (&sb)[N], float& m_a, float& m_b, float& l_a, float& l_b) {
  float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    mx_a = fmaxf(mx_a, sa[i]);
    mx_b = fmaxf(mx_b, sb[i]);
  }
  mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
  mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
  mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
  mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
  const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
  const float base_a = mn_a == -INFINITY ? 0.0f : mn_a, base_b = mn_b == -INFINITY ? 0.0f : mn_b;  // (-inf - -inf is NaN)
  const float corr_a = exp2_approx(m_a - base_a), corr_b = exp2_approx(m_b - base_b);
  float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    sa[i] = exp2_approx(sa[i] - base_a);
    sb[i] = exp2_approx(sb[i] - base_b);
    sum_a += sa[i];
    sum_b += sb[i];
  }
  l_a = l_a * corr_a + sum_a;
  l_b = l_b * corr_b + sum_b;
  m_a = mn_a;
  m_b = mn_b;
  return make_float2(corr_a, corr_b);
}

// Four fp32 values (or zeros) as four bf16 into shared memory.
__device__ __forceinline__ void store_bf16x4(__nv_bfloat16* dst, float4 v) {
  uint2 u;
  u.x = pack_bf16(v.x, v.y);
  u.y = pack_bf16(v.z, v.w);
  *reinterpret_cast<uint2*>(dst) = u;
}

}  // namespace deepinfer::kernels
