#include "backend/cuda/fp8_gemm.h"

namespace deepinfer {
namespace {

template <class T, cublasStatus_t (*destroy)(T)>
struct Owned {
  T v = nullptr;
  ~Owned() {
    if (v) destroy(v);
  }
};

}  // namespace

Fp8Gemm::~Fp8Gemm() {
  if (lt_) cublasLtDestroy(lt_);
}

cublasStatus_t Fp8Gemm::init() { return lt_ ? CUBLAS_STATUS_SUCCESS : cublasLtCreate(&lt_); }

cublasStatus_t Fp8Gemm::run(Operand w, Operand x, int64_t rows, int64_t n, int64_t k, void* out, int64_t ldo, bool out_bf16,
                            void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (!lt_) return CUBLAS_STATUS_NOT_INITIALIZED;
  // cuBLAS is column-major: out^T (n x rows) = W (k x n stored, transposed) x X (k x rows stored).
  Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> desc;
  cublasStatus_t s = cublasLtMatmulDescCreate(&desc.v, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
  const int32_t a_mode = w.mode, b_mode = x.mode;
  auto set = [&](cublasLtMatmulDescAttributes_t a, const void* v, size_t bytes) {
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(desc.v, a, v, bytes);
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose));
  set(CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none));
  set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode));
  set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode));
  set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w.scales, sizeof(w.scales));
  set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x.scales, sizeof(x.scales));
  Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> a, b, c;
  const cudaDataType_t out_type = out_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&a.v, CUDA_R_8F_E4M3, k, n, k);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&b.v, CUDA_R_8F_E4M3, k, rows, k);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&c.v, out_type, n, rows, ldo);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  const Key key{rows, n, k, ldo, a_mode, b_mode, out_bf16};
  auto it = algos_.find(key);
  if (it == algos_.end()) {
    Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> pref;
    s = cublasLtMatmulPreferenceCreate(&pref.v);
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulPreferenceSetAttribute(pref.v, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulAlgoGetHeuristic(lt_, desc.v, a.v, b.v, c.v, c.v, pref.v, 1, &result, &found);
    if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED) return s;
    if (algos_.size() >= kMaxAlgos) algos_.clear();
    it = algos_.emplace(key, std::make_pair(s == CUBLAS_STATUS_SUCCESS && found > 0, result.algo)).first;
  }
  if (!it->second.first) return CUBLAS_STATUS_NOT_SUPPORTED;
  const float one = 1.0f, zero = 0.0f;
  return cublasLtMatmul(lt_, desc.v, &one, w.values, a.v, x.values, b.v, &zero, out, c.v, out, c.v, &it->second.second, workspace,
                        workspace_bytes, stream);
}

}  // namespace deepinfer
