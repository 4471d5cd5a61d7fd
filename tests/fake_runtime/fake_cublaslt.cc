// tests/fake_runtime/fake_cublaslt.cc — test double of libcublasLt.so.13.
//
// Model: descriptors are attribute maps (bytes per attribute id, defaults set
// at creation: TRANSA/TRANSB = N, BATCH_COUNT = 1). cublasLtMatmul computes
// m = rows(D), n = cols(D), k = cols(op(A)), batch = BATCH_COUNT(D) and
// enqueues one "kernel" on `stream` for the same modelled GEMM time as
// cuBLAS (fake_core GemmDurationNs). No arithmetic on the matrices.
//
// Thread-safety: descriptor objects are not shared by cuBLASLt callers
// across threads while being modified (the real API's rule); reads during
// cublasLtMatmul take the descriptor's mutex anyway so concurrent matmuls
// with one descriptor are safe.
#include <cublasLt.h>
#include <cublas_api.h>

#include <cstring>
#include <map>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "fake_core.h"

namespace fk = xpu::fake;

struct cublasLtContext {
  int device = 0;
};

namespace {

constexpr uint32_t kDescMagic = 0x44455343;    // "DESC"
constexpr uint32_t kLayoutMagic = 0x4c41594f;  // "LAYO"
constexpr uint32_t kPrefMagic = 0x50524546;    // "PREF"

// Lives inside the caller-visible opaque struct storage: the real opaque
// types are fixed-size arrays of uint64_t, so we allocate our own object and
// hand out its address cast to the opaque pointer type.
struct AttrObject {
  uint32_t magic;
  std::mutex mu;
  std::map<int, std::vector<uint8_t>> attrs;

  template <typename T>
  void Set(int id, T v) {
    std::vector<uint8_t> b(sizeof(T));
    memcpy(b.data(), &v, sizeof(T));
    attrs[id] = std::move(b);
  }
  template <typename T>
  T Get(int id, T def) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = attrs.find(id);
    if (it == attrs.end() || it->second.size() < sizeof(T)) return def;
    T v;
    memcpy(&v, it->second.data(), sizeof(T));
    return v;
  }
};

// Live descriptors and handles: bogus pointers are rejected without being
// dereferenced.
std::mutex& RegMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_set<const void*>& Live() {
  static auto* s = new std::unordered_set<const void*>;
  return *s;
}
void Register(const void* p) {
  std::lock_guard<std::mutex> lock(RegMu());
  Live().insert(p);
}
bool Unregister(const void* p) {
  std::lock_guard<std::mutex> lock(RegMu());
  return Live().erase(p) != 0;
}
bool IsLive(const void* p) {
  std::lock_guard<std::mutex> lock(RegMu());
  return Live().count(p) != 0;
}

AttrObject* AsObj(const void* p, uint32_t magic) {
  if (!IsLive(p)) return nullptr;
  auto* o = static_cast<AttrObject*>(const_cast<void*>(p));
  return o->magic == magic ? o : nullptr;
}

cublasStatus_t SetAttr(void* obj, uint32_t magic, int attr, const void* buf, size_t size) {
  AttrObject* o = AsObj(obj, magic);
  if (o == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (buf == nullptr || size == 0 || size > 64) return CUBLAS_STATUS_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(o->mu);
  o->attrs[attr].assign(static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + size);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t GetAttr(void* obj, uint32_t magic, int attr, void* buf, size_t size,
                       size_t* written) {
  AttrObject* o = AsObj(obj, magic);
  if (o == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(o->mu);
  auto it = o->attrs.find(attr);
  size_t have = it == o->attrs.end() ? 0 : it->second.size();
  if (it == o->attrs.end()) return CUBLAS_STATUS_INVALID_VALUE;
  if (buf == nullptr && size == 0) {  // size query, as documented
    if (written == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *written = have;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (buf == nullptr || size < have) return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(buf, it->second.data(), have);
  if (written) *written = have;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

// cuBLASLt shares the cuBLAS version number.
size_t cublasLtGetVersion(void) {
  XPU_FAKE_COUNT_CALL();
  return CUBLAS_VERSION;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
  XPU_FAKE_COUNT_CALL();
  if (lightHandle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* h = new cublasLtContext;
  h->device = fk::CurrentDevice();
  Register(h);
  *lightHandle = h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  XPU_FAKE_COUNT_CALL();
  if (!Unregister(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType) {
  XPU_FAKE_COUNT_CALL();
  if (matmulDesc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* o = new AttrObject;
  o->magic = kDescMagic;
  o->Set<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, computeType);
  o->Set<int32_t>(CUBLASLT_MATMUL_DESC_SCALE_TYPE, scaleType);
  o->Set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
  o->Set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  Register(o);
  *matmulDesc = reinterpret_cast<cublasLtMatmulDesc_t>(o);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  XPU_FAKE_COUNT_CALL();
  AttrObject* o = AsObj(matmulDesc, kDescMagic);
  if (o == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  Unregister(o);
  o->magic = 0;
  delete o;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t sizeInBytes) {
  XPU_FAKE_COUNT_CALL();
  return SetAttr(matmulDesc, kDescMagic, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, void* buf,
                                              size_t sizeInBytes, size_t* sizeWritten) {
  XPU_FAKE_COUNT_CALL();
  return GetAttr(matmulDesc, kDescMagic, attr, buf, sizeInBytes, sizeWritten);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  XPU_FAKE_COUNT_CALL();
  if (matLayout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* o = new AttrObject;
  o->magic = kLayoutMagic;
  o->Set<uint32_t>(CUBLASLT_MATRIX_LAYOUT_TYPE, type);
  o->Set<int32_t>(CUBLASLT_MATRIX_LAYOUT_ORDER, CUBLASLT_ORDER_COL);
  o->Set<uint64_t>(CUBLASLT_MATRIX_LAYOUT_ROWS, rows);
  o->Set<uint64_t>(CUBLASLT_MATRIX_LAYOUT_COLS, cols);
  o->Set<int64_t>(CUBLASLT_MATRIX_LAYOUT_LD, ld);
  o->Set<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
  o->Set<int64_t>(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 0);
  Register(o);
  *matLayout = reinterpret_cast<cublasLtMatrixLayout_t>(o);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(const cublasLtMatrixLayout_t matLayout) {
  XPU_FAKE_COUNT_CALL();
  AttrObject* o = AsObj(matLayout, kLayoutMagic);
  if (o == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  Unregister(o);
  o->magic = 0;
  delete o;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes) {
  XPU_FAKE_COUNT_CALL();
  return SetAttr(matLayout, kLayoutMagic, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr, void* buf,
                                                size_t sizeInBytes, size_t* sizeWritten) {
  XPU_FAKE_COUNT_CALL();
  return GetAttr(matLayout, kLayoutMagic, attr, buf, sizeInBytes, sizeWritten);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  XPU_FAKE_COUNT_CALL();
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* o = new AttrObject;
  o->magic = kPrefMagic;
  Register(o);
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(o);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  XPU_FAKE_COUNT_CALL();
  AttrObject* o = AsObj(pref, kPrefMagic);
  if (o == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  Unregister(o);
  o->magic = 0;
  delete o;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes) {
  XPU_FAKE_COUNT_CALL();
  return SetAttr(pref, kPrefMagic, attr, buf, sizeInBytes);
}

// One "algorithm" always fits: the double has no algorithm choice.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  XPU_FAKE_COUNT_CALL();
  if (!IsLive(lightHandle) || returnAlgoCount == nullptr || requestedAlgoCount < 1 ||
      heuristicResultsArray == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  memset(&heuristicResultsArray[0], 0, sizeof(heuristicResultsArray[0]));
  heuristicResultsArray[0].state = CUBLAS_STATUS_SUCCESS;
  heuristicResultsArray[0].wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                              const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                              const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  AttrObject* desc = AsObj(computeDesc, kDescMagic);
  AttrObject* a = AsObj(Adesc, kLayoutMagic);
  AttrObject* d = AsObj(Ddesc, kLayoutMagic);
  if (!IsLive(lightHandle) || desc == nullptr || a == nullptr || d == nullptr) {
    return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  uint64_t m = d->Get<uint64_t>(CUBLASLT_MATRIX_LAYOUT_ROWS, 0);
  uint64_t n = d->Get<uint64_t>(CUBLASLT_MATRIX_LAYOUT_COLS, 0);
  bool trans_a = desc->Get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N) != CUBLAS_OP_N;
  uint64_t k = trans_a ? a->Get<uint64_t>(CUBLASLT_MATRIX_LAYOUT_ROWS, 0)
                       : a->Get<uint64_t>(CUBLASLT_MATRIX_LAYOUT_COLS, 0);
  int32_t batch = d->Get<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
  if (batch < 1) return CUBLAS_STATUS_INVALID_VALUE;
  fk::Stream* s = fk::ResolveStream(stream);
  if (s == nullptr) return CUBLAS_STATUS_EXECUTION_FAILED;
  return fk::EnqueueKernel(s, fk::GemmDurationNs(m, n, k, static_cast<uint64_t>(batch)),
                           "xpu_fake_gemm_lt_kernel") == cudaSuccess
             ? CUBLAS_STATUS_SUCCESS
             : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
