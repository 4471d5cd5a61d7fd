// hook/interposers/interposers_unittest.cc — the interposition layers (this
// folder) driven through their exported entry points, with the hook core
// replaced by the recording double of fake_core_for_test.h and the "real"
// CUDA / cuBLAS / NCCL functions replaced by the fakes below. Checks what each layer
// records (signature fields, streams, seqs, group timing order), that real
// statuses come back unchanged, and that nested calls are not counted twice.
// Thread-safety: single-threaded tests; the fakes are not thread-safe.
#undef CUDA_API_PER_THREAD_DEFAULT_STREAM
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "hook/interposers/comm_registry.h"
#include "hook/interposers/fake_core_for_test.h"
#include "hook/interposers/launch_tracing.h"

extern "C" cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args,
                                             size_t shared_mem, cudaStream_t stream);
extern "C" cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                          size_t shared_mem, cudaStream_t stream);

namespace xpu::hook {
namespace {

namespace fk = ::xpu::hook::fake;

// ---- fakes of the real libraries ------------------------------------------

int g_kernel_launches = 0;
int g_func_name_lookups = 0;
cudaError_t g_launch_status = cudaSuccess;

cudaError_t FakeLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t) {
  ++g_kernel_launches;
  fk::Log("launch");
  return g_launch_status;
}
cudaError_t FakeKernelHandleLaunch(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t) {
  ++g_kernel_launches;
  return g_launch_status;
}
cudaError_t FakeFuncGetName(const char** name, const void* func) {
  ++g_func_name_lookups;
  *name = reinterpret_cast<uintptr_t>(func) == 0x100 ? "kernel_a" : "kernel_b";
  return cudaSuccess;
}
CUresult FakeKernelGetName(const char** name, CUkernel) {
  *name = "handle_kernel";
  return CUDA_SUCCESS;
}
cudaError_t FakeGraphLaunch(cudaGraphExec_t, cudaStream_t) { return cudaSuccess; }
cudaError_t FakeStreamSynchronize(cudaStream_t) {
  fk::Log("sync");
  return cudaErrorLaunchFailure;
}
cudaError_t FakeMemcpy(void*, const void*, size_t, cudaMemcpyKind) { return cudaSuccess; }
cudaError_t FakeGetDevice(int* dev) {
  *dev = 5;
  return cudaSuccess;
}

int g_cu_launches = 0;
CUresult FakeCuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**) {
  ++g_cu_launches;
  return CUDA_SUCCESS;
}
CUresult FakeCuFuncGetName(const char** name, CUfunction) {
  *name = "driver_kernel";
  return CUDA_SUCCESS;
}
CUresult FakeOtherDriverFn() { return CUDA_SUCCESS; }
CUresult FakeCuGetProcAddress(const char* symbol, void** pfn, int, cuuint64_t,
                              CUdriverProcAddressQueryResult* status) {
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  *pfn = std::strcmp(symbol, "cuLaunchKernel") == 0 ? reinterpret_cast<void*>(&FakeCuLaunchKernel)
                                                    : reinterpret_cast<void*>(&FakeOtherDriverFn);
  return CUDA_SUCCESS;
}

const cudaStream_t kBlasStream = reinterpret_cast<cudaStream_t>(0x5000);
cublasStatus_t g_gemm_status = CUBLAS_STATUS_SUCCESS;
cublasStatus_t FakeGetStream(cublasHandle_t, cudaStream_t* s) {
  *s = kBlasStream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t FakeGemmEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                          const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                          int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                          cublasGemmAlgo_t) {
  // cuBLAS launches its kernel through the runtime: must not be counted.
  cudaLaunchKernel(reinterpret_cast<const void*>(0x100), dim3(1), dim3(1), nullptr, 0, nullptr);
  return g_gemm_status;
}
cublasStatus_t FakeSgemmStridedBatched(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                       int, int, const float*, const float*, int, long long,
                                       const float*, int, long long, const float*, float*, int,
                                       long long, int) {
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLASLt descriptors as plain structs behind the opaque handles.
struct FakeLtDesc {
  int32_t transa, transb, compute;
};
struct FakeLtLayout {
  uint32_t type;
  uint64_t rows, cols;
  int32_t batch;
};
cublasStatus_t FakeLtDescGet(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, void* buf,
                             size_t size, size_t* written) {
  const FakeLtDesc* desc = reinterpret_cast<const FakeLtDesc*>(d);
  int32_t v;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      v = desc->transa;
      break;
    case CUBLASLT_MATMUL_DESC_TRANSB:
      v = desc->transb;
      break;
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      v = desc->compute;
      break;
    default:
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (size != sizeof(v)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, &v, sizeof(v));
  *written = sizeof(v);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t FakeLtLayoutGet(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                               void* buf, size_t size, size_t* written) {
  const FakeLtLayout* layout = reinterpret_cast<const FakeLtLayout*>(l);
  const void* src;
  size_t n;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
      src = &layout->type;
      n = 4;
      break;
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
      src = &layout->rows;
      n = 8;
      break;
    case CUBLASLT_MATRIX_LAYOUT_COLS:
      src = &layout->cols;
      n = 8;
      break;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      src = &layout->batch;
      n = 4;
      break;
    default:
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (size != n) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, src, n);
  *written = n;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t FakeLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*,
                            cublasLtMatrixLayout_t, const void*, cublasLtMatrixLayout_t,
                            const void*, const void*, cublasLtMatrixLayout_t, void*,
                            cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t,
                            cudaStream_t) {
  return CUBLAS_STATUS_SUCCESS;
}

// NCCL communicators as plain structs behind ncclComm_t.
struct FakeComm {
  int rank, nranks, device;
};
ncclComm_t AsComm(FakeComm* c) { return reinterpret_cast<ncclComm_t>(c); }
FakeComm* Of(ncclComm_t c) { return reinterpret_cast<FakeComm*>(c); }

ncclResult_t FakeInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  *comm = AsComm(new FakeComm{rank, nranks, 2});
  return ncclSuccess;
}
ncclResult_t FakeSplit(ncclComm_t parent, int color, int key, ncclComm_t* newcomm, ncclConfig_t*) {
  *newcomm =
      color == NCCL_SPLIT_NOCOLOR ? nullptr : AsComm(new FakeComm{key, 2, Of(parent)->device});
  return ncclSuccess;
}
ncclResult_t FakeDestroy(ncclComm_t c) {
  delete Of(c);
  return ncclSuccess;
}
ncclResult_t FakeCuDevice(const ncclComm_t c, int* d) {
  *d = Of(c)->device;
  return ncclSuccess;
}
ncclResult_t FakeUserRank(const ncclComm_t c, int* r) {
  *r = Of(c)->rank;
  return ncclSuccess;
}
ncclResult_t FakeCount(const ncclComm_t c, int* n) {
  *n = Of(c)->nranks;
  return ncclSuccess;
}
ncclResult_t FakeAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                           cudaStream_t) {
  fk::Log("allreduce");
  return ncclSuccess;
}
ncclResult_t FakeSend(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
ncclResult_t FakeRecv(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
ncclResult_t FakeGroupStart() { return ncclSuccess; }
ncclResult_t FakeGroupEnd() {
  fk::Log("group_end");
  return ncclSuccess;
}

// Registered before main(): XPU_REAL_FN caches on the first call.
const bool kRealsRegistered = [] {
  auto set = [](const char* n, auto fn) { fk::SetReal(n, reinterpret_cast<void*>(fn)); };
  set("cudaLaunchKernel", &FakeLaunchKernel);
  set("cudaLaunchKernel_ptsz", &FakeLaunchKernel);
  set("__cudaLaunchKernel", &FakeKernelHandleLaunch);
  set("cudaFuncGetName", &FakeFuncGetName);
  set("cuKernelGetName", &FakeKernelGetName);
  set("cudaGraphLaunch", &FakeGraphLaunch);
  set("cudaStreamSynchronize", &FakeStreamSynchronize);
  set("cudaMemcpy", &FakeMemcpy);
  set("cudaGetDevice", &FakeGetDevice);
  set("cuLaunchKernel", &FakeCuLaunchKernel);
  set("cuFuncGetName", &FakeCuFuncGetName);
  set("cuGetProcAddress_v2", &FakeCuGetProcAddress);
  set("cublasGetStream_v2", &FakeGetStream);
  set("cublasGemmEx", &FakeGemmEx);
  set("cublasSgemmStridedBatched", &FakeSgemmStridedBatched);
  set("cublasLtMatmul", &FakeLtMatmul);
  set("cublasLtMatmulDescGetAttribute", &FakeLtDescGet);
  set("cublasLtMatrixLayoutGetAttribute", &FakeLtLayoutGet);
  set("ncclCommInitRank", &FakeInitRank);
  set("ncclCommSplit", &FakeSplit);
  set("ncclCommDestroy", &FakeDestroy);
  set("ncclCommCuDevice", &FakeCuDevice);
  set("ncclCommUserRank", &FakeUserRank);
  set("ncclCommCount", &FakeCount);
  set("ncclAllReduce", &FakeAllReduce);
  set("ncclSend", &FakeSend);
  set("ncclRecv", &FakeRecv);
  set("ncclGroupStart", &FakeGroupStart);
  set("ncclGroupEnd", &FakeGroupEnd);
  return true;
}();

class LayersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kRealsRegistered);
    fk::Reset();
    fk::SetActive(true);
    fk::SetKernelSampleEvery(0);
    fk::SetPicked(false);
    fk::SetPyCallsite(0);
    g_launch_status = cudaSuccess;
    g_gemm_status = CUBLAS_STATUS_SUCCESS;
    t_launch_tally = LaunchTally{};
  }
};

const void* const kKernelA = reinterpret_cast<const void*>(0x100);
const void* const kKernelB = reinterpret_cast<const void*>(0x200);
const cudaStream_t kStream = reinterpret_cast<cudaStream_t>(0x7000);

// ---- cudart ------------------------------------------------------------------

TEST_F(LayersTest, PlainLaunchesAreCountedNotTraced) {
  const int before = g_kernel_launches;
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(cudaLaunchKernel(kKernelA, dim3(1), dim3(1), nullptr, 0, kStream), cudaSuccess);
  }
  EXPECT_EQ(g_kernel_launches - before, 300);
  EXPECT_TRUE(fk::Begins().empty());
  // Flushed in batches of kUntracedFlushEvery; the rest is still per-thread.
  EXPECT_EQ(fk::Counter(XPU_CNT_LAUNCHES_UNTRACED) + t_launch_tally.untraced, 300u);
  EXPECT_EQ(fk::Counter(XPU_CNT_LAUNCHES_UNTRACED), kUntracedFlushEvery);
}

TEST_F(LayersTest, SampledLaunchesAreTracedAndNamedOnce) {
  fk::SetKernelSampleEvery(4);
  const int lookups_before = g_func_name_lookups;
  for (int i = 0; i < 8; ++i) cudaLaunchKernel(kKernelB, dim3(1), dim3(1), nullptr, 0, kStream);
  const auto begins = fk::Begins();
  ASSERT_EQ(begins.size(), 2u);
  EXPECT_EQ(fk::Ends().size(), 2u);
  EXPECT_EQ(begins[0].stream, kStream);
  EXPECT_TRUE(begins[0].flags & XPU_REC_SAMPLED);
  const fk::InternedSig sig = fk::Sig(begins[0].sig_id);
  EXPECT_EQ(sig.sig.kind, XPU_OP_KERNEL);
  EXPECT_EQ(sig.name, "kernel_b");
  EXPECT_EQ(begins[1].sig_id, begins[0].sig_id);
  EXPECT_EQ(g_func_name_lookups - lookups_before, 1);  // cached per function
  EXPECT_EQ(t_launch_tally.untraced, 6u);
}

TEST_F(LayersTest, LaunchStatusIsReturnedUnchangedAndPassedToEnd) {
  fk::SetKernelSampleEvery(1);
  g_launch_status = cudaErrorInvalidConfiguration;
  EXPECT_EQ(cudaLaunchKernel(kKernelA, dim3(1), dim3(1), nullptr, 0, kStream),
            cudaErrorInvalidConfiguration);
  ASSERT_EQ(fk::Ends().size(), 1u);
  EXPECT_EQ(fk::Ends()[0].status, static_cast<int>(cudaErrorInvalidConfiguration));
}

TEST_F(LayersTest, PtszNullStreamIsTimedOnPerThreadStream) {
  fk::SetKernelSampleEvery(1);
  cudaLaunchKernel_ptsz(kKernelA, dim3(1), dim3(1), nullptr, 0, nullptr);
  ASSERT_EQ(fk::Begins().size(), 1u);
  EXPECT_EQ(fk::Begins()[0].stream, reinterpret_cast<const void*>(kPerThreadStream));
  cudaLaunchKernel(kKernelA, dim3(1), dim3(1), nullptr, 0, nullptr);
  EXPECT_EQ(fk::Begins()[1].stream, nullptr);  // legacy stream stays legacy
}

TEST_F(LayersTest, TripleChevronPathIsNamedByTheDriver) {
  fk::SetKernelSampleEvery(1);
  __cudaLaunchKernel(reinterpret_cast<cudaKernel_t>(0x900), dim3(1), dim3(1), nullptr, 0, kStream);
  ASSERT_EQ(fk::Begins().size(), 1u);
  EXPECT_EQ(fk::Sig(fk::Begins()[0].sig_id).name, "handle_kernel");
}

TEST_F(LayersTest, InactiveMeansPassThrough) {
  fk::SetActive(false);
  fk::SetKernelSampleEvery(1);
  const int before = g_kernel_launches;
  cudaLaunchKernel(kKernelA, dim3(1), dim3(1), nullptr, 0, kStream);
  cudaGraphLaunch(nullptr, kStream);
  EXPECT_EQ(g_kernel_launches - before, 1);
  EXPECT_TRUE(fk::Begins().empty());
  EXPECT_EQ(t_launch_tally.untraced, 0u);
}

TEST_F(LayersTest, GraphLaunchIsAlwaysTraced) {
  EXPECT_EQ(cudaGraphLaunch(nullptr, kStream), cudaSuccess);
  ASSERT_EQ(fk::Begins().size(), 1u);
  EXPECT_EQ(fk::Sig(fk::Begins()[0].sig_id).sig.kind, XPU_OP_GRAPH_LAUNCH);
  EXPECT_EQ(fk::Sig(fk::Begins()[0].sig_id).name, "cudaGraphLaunch");
}

TEST_F(LayersTest, SyncIsAHostIntervalWithTheRealStatus) {
  EXPECT_EQ(cudaStreamSynchronize(kStream), cudaErrorLaunchFailure);
  const auto hosts = fk::Hosts();
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(fk::Sig(hosts[0].sig_id).sig.kind, XPU_OP_SYNC_STREAM);
  EXPECT_LT(hosts[0].start_ns, hosts[0].end_ns);
  EXPECT_EQ(hosts[0].value, StreamIndex(kStream));
  EXPECT_TRUE(hosts[0].flags & XPU_REC_CALL_FAILED);
}

TEST_F(LayersTest, MemcpyRecordsBytesAndDirection) {
  char buf[16] = {};
  EXPECT_EQ(cudaMemcpy(buf, buf, 4096, cudaMemcpyDeviceToHost), cudaSuccess);
  const auto hosts = fk::Hosts();
  ASSERT_EQ(hosts.size(), 1u);
  const fk::InternedSig sig = fk::Sig(hosts[0].sig_id);
  EXPECT_EQ(sig.sig.kind, XPU_OP_MEMCPY);
  EXPECT_EQ(sig.sig.count, 4096u);
  EXPECT_EQ(sig.name, "cudaMemcpy DtoH");
  EXPECT_EQ(hosts[0].value, 4096u);
}

// ---- driver ------------------------------------------------------------------

TEST_F(LayersTest, GetProcAddressHandsOutTracingWrapper) {
  fk::SetKernelSampleEvery(1);
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st;
  ASSERT_EQ(cuGetProcAddress_v2("cuLaunchKernel", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st),
            CUDA_SUCCESS);
  ASSERT_NE(fn, nullptr);
  EXPECT_NE(fn, reinterpret_cast<void*>(&FakeCuLaunchKernel));
  const int before = g_cu_launches;
  auto launch = reinterpret_cast<decltype(&cuLaunchKernel)>(fn);
  EXPECT_EQ(launch(reinterpret_cast<CUfunction>(0xf00), 1, 1, 1, 1, 1, 1, 0,
                   reinterpret_cast<CUstream>(kStream), nullptr, nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(g_cu_launches - before, 1);
  ASSERT_EQ(fk::Begins().size(), 1u);
  EXPECT_EQ(fk::Sig(fk::Begins()[0].sig_id).name, "driver_kernel");
  // Everything else passes through untouched.
  void* other = nullptr;
  cuGetProcAddress_v2("cuMemAlloc", &other, 13000, 0, &st);
  EXPECT_EQ(other, reinterpret_cast<void*>(&FakeOtherDriverFn));
}

TEST_F(LayersTest, DriverLaunchInsideTracedCallIsNotCounted) {
  fk::SetKernelSampleEvery(1);
  {
    ReentrancyGuard outer;  // as if inside a traced cuBLAS/NCCL call
    cuLaunchKernel(reinterpret_cast<CUfunction>(0xf00), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr,
                   nullptr);
  }
  EXPECT_TRUE(fk::Begins().empty());
  EXPECT_EQ(t_launch_tally.untraced, 0u);
}

// ---- cuBLAS / cuBLASLt -----------------------------------------------------------

TEST_F(LayersTest, GemmExSignatureAndNestedLaunch) {
  fk::SetKernelSampleEvery(1);  // even so, the nested launch is not traced
  const int before = g_kernel_launches;
  g_gemm_status = CUBLAS_STATUS_EXECUTION_FAILED;
  EXPECT_EQ(cublasGemmEx(nullptr, CUBLAS_OP_T, CUBLAS_OP_N, 128, 256, 64, nullptr, nullptr,
                         CUDA_R_16BF, 64, nullptr, CUDA_R_16BF, 64, nullptr, nullptr, CUDA_R_32F,
                         128, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_EXECUTION_FAILED);
  EXPECT_EQ(g_kernel_launches - before, 1);  // the nested launch went through
  const auto begins = fk::Begins();
  ASSERT_EQ(begins.size(), 1u);  // ... but only the GEMM is traced
  EXPECT_EQ(begins[0].stream, kBlasStream);
  const fk::InternedSig sig = fk::Sig(begins[0].sig_id);
  EXPECT_EQ(sig.name, "cublasGemmEx");
  EXPECT_EQ(sig.sig.kind, XPU_OP_GEMM);
  EXPECT_EQ(sig.sig.m, 128u);
  EXPECT_EQ(sig.sig.n, 256u);
  EXPECT_EQ(sig.sig.k, 64u);
  EXPECT_EQ(sig.sig.batch, 1u);
  EXPECT_EQ(sig.sig.gemm_flags, XPU_GEMM_TRANSA);
  EXPECT_EQ(sig.sig.dtype, XPU_DT_BF16);
  EXPECT_EQ(sig.sig.out_dtype, XPU_DT_F32);
  EXPECT_EQ(sig.sig.compute_type, XPU_DT_F32);
  ASSERT_EQ(fk::Ends().size(), 1u);
  EXPECT_EQ(fk::Ends()[0].status, static_cast<int>(CUBLAS_STATUS_EXECUTION_FAILED));
  EXPECT_EQ(t_launch_tally.untraced, 0u);
}

TEST_F(LayersTest, StridedBatchedGemmRecordsBatch) {
  cublasSgemmStridedBatched(nullptr, CUBLAS_OP_N, CUBLAS_OP_C, 8, 16, 32, nullptr, nullptr, 8, 0,
                            nullptr, 32, 0, nullptr, nullptr, 8, 0, 7);
  ASSERT_EQ(fk::Begins().size(), 1u);
  const fk::InternedSig sig = fk::Sig(fk::Begins()[0].sig_id);
  EXPECT_EQ(sig.name, "cublasSgemmStridedBatched");
  EXPECT_EQ(sig.sig.batch, 7u);
  EXPECT_EQ(sig.sig.gemm_flags, XPU_GEMM_TRANSB);
  EXPECT_EQ(sig.sig.dtype, XPU_DT_F32);
}

TEST_F(LayersTest, LtMatmulShapeFromDescriptors) {
  FakeLtDesc desc{CUBLAS_OP_T, CUBLAS_OP_N, CUBLAS_COMPUTE_32F};
  FakeLtLayout a{CUDA_R_8F_E4M3, 16, 64, 1};  // transposed: k = rows = 16
  FakeLtLayout d{CUDA_R_16BF, 64, 32, 3};
  auto* h_desc = reinterpret_cast<cublasLtMatmulDesc_t>(&desc);
  auto* h_a = reinterpret_cast<cublasLtMatrixLayout_t>(&a);
  auto* h_d = reinterpret_cast<cublasLtMatrixLayout_t>(&d);
  EXPECT_EQ(cublasLtMatmul(nullptr, h_desc, nullptr, nullptr, h_a, nullptr, h_a, nullptr, nullptr,
                           h_d, nullptr, h_d, nullptr, nullptr, 0, kStream),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(fk::Begins().size(), 1u);
  EXPECT_EQ(fk::Begins()[0].stream, kStream);
  const fk::InternedSig sig = fk::Sig(fk::Begins()[0].sig_id);
  EXPECT_EQ(sig.name, "cublasLtMatmul");
  EXPECT_EQ(sig.sig.m, 64u);
  EXPECT_EQ(sig.sig.n, 32u);
  EXPECT_EQ(sig.sig.k, 16u);
  EXPECT_EQ(sig.sig.batch, 3u);
  EXPECT_EQ(sig.sig.gemm_flags, XPU_GEMM_TRANSA);
  EXPECT_EQ(sig.sig.dtype, XPU_DT_F8_E4M3);
  EXPECT_EQ(sig.sig.out_dtype, XPU_DT_BF16);
  EXPECT_EQ(sig.sig.compute_type, XPU_DT_F32);
}

// ---- NCCL ----------------------------------------------------------------------

ncclUniqueId MakeUniqueId(char seed) {
  ncclUniqueId id;
  std::memset(&id, seed, sizeof(id));
  return id;
}

TEST_F(LayersTest, MembersOfOneCommAgreeOnIdAndSeq) {
  // Two ranks simulated in one process: same unique id, distinct handles.
  ncclComm_t c0 = nullptr, c1 = nullptr;
  ASSERT_EQ(ncclCommInitRank(&c0, 2, MakeUniqueId(7), 0), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&c1, 2, MakeUniqueId(7), 1), ncclSuccess);
  ASSERT_NE(CommId(c0), 0u);
  EXPECT_EQ(CommId(c0), CommId(c1));
  ncclComm_t other = nullptr;
  ncclCommInitRank(&other, 2, MakeUniqueId(8), 0);
  EXPECT_NE(CommId(other), CommId(c0));

  const auto hosts = fk::Hosts();
  ASSERT_EQ(hosts.size(), 3u);
  const fk::InternedSig init = fk::Sig(hosts[1].sig_id);
  EXPECT_EQ(init.sig.kind, XPU_OP_COMM_INIT);
  EXPECT_EQ(init.sig.comm_id, CommId(c1));
  EXPECT_EQ(init.sig.comm_rank, 1);
  EXPECT_EQ(init.sig.comm_nranks, 2);
  EXPECT_EQ(init.sig.device, 2);

  fk::Reset();
  for (ncclComm_t c : {c0, c1}) {
    ncclAllReduce(nullptr, nullptr, 1024, ncclBfloat16, ncclSum, c, kStream);
    ncclAllReduce(nullptr, nullptr, 1024, ncclBfloat16, ncclSum, c, kStream);
  }
  const auto begins = fk::Begins();
  ASSERT_EQ(begins.size(), 4u);
  EXPECT_EQ(begins[0].seq, 1u);
  EXPECT_EQ(begins[1].seq, 2u);
  EXPECT_EQ(begins[2].seq, 1u);
  EXPECT_EQ(begins[3].seq, 2u);
  EXPECT_EQ(CommLastSeq(c0), 2u);
  const fk::InternedSig ar = fk::Sig(begins[0].sig_id);
  EXPECT_EQ(ar.name, "ncclAllReduce");
  EXPECT_EQ(ar.sig.kind, XPU_OP_ALLREDUCE);
  EXPECT_EQ(ar.sig.dtype, XPU_DT_BF16);
  EXPECT_EQ(ar.sig.count, 1024u);
  EXPECT_EQ(ar.sig.comm_id, CommId(c0));
  EXPECT_EQ(ar.sig.comm_nranks, 2);
  EXPECT_EQ(ar.sig.peer, -1);

  // Seqs keep counting while tracing is off, so ranks stay in step.
  fk::SetActive(false);
  ncclAllReduce(nullptr, nullptr, 1, ncclFloat32, ncclSum, c0, kStream);
  fk::SetActive(true);
  EXPECT_EQ(CommLastSeq(c0), 3u);

  ncclCommDestroy(c0);
  ncclCommDestroy(c1);
  ncclCommDestroy(other);
  EXPECT_EQ(CommId(c1), 0u);
}

TEST_F(LayersTest, SendRecvSeqsArePerPeer) {
  ncclComm_t c = nullptr;
  ncclCommInitRank(&c, 4, MakeUniqueId(9), 0);
  fk::Reset();
  ncclSend(nullptr, 10, ncclInt8, 1, c, kStream);
  ncclSend(nullptr, 10, ncclInt8, 2, c, kStream);
  ncclSend(nullptr, 10, ncclInt8, 1, c, kStream);
  ncclRecv(nullptr, 10, ncclInt8, 1, c, kStream);
  const auto begins = fk::Begins();
  ASSERT_EQ(begins.size(), 4u);
  EXPECT_EQ(begins[0].seq, 1u);
  EXPECT_EQ(begins[1].seq, 1u);
  EXPECT_EQ(begins[2].seq, 2u);
  EXPECT_EQ(begins[3].seq, 1u);
  EXPECT_EQ(fk::Sig(begins[0].sig_id).sig.peer, 1);
  EXPECT_EQ(fk::Sig(begins[3].sig_id).sig.kind, XPU_OP_RECV);
  EXPECT_EQ(CommLastSeq(c), 0u);  // p2p does not move the collective seq
  ncclCommDestroy(c);
}

TEST_F(LayersTest, GroupOpsAreTimedAroundTheOutermostGroupEnd) {
  ncclComm_t c = nullptr;
  ncclCommInitRank(&c, 2, MakeUniqueId(10), 0);
  fk::Reset();
  const cudaStream_t s2 = reinterpret_cast<cudaStream_t>(0x8000);
  ncclGroupStart();
  ncclAllReduce(nullptr, nullptr, 1, ncclFloat32, ncclSum, c, kStream);
  ncclGroupStart();
  ncclAllReduce(nullptr, nullptr, 2, ncclFloat32, ncclSum, c, s2);
  ncclGroupEnd();  // inner: nothing launches yet
  EXPECT_TRUE(fk::Begins().empty());
  ncclGroupEnd();
  const std::vector<std::string> expected = {"allreduce", "allreduce", "group_end", "begin",
                                             "begin",     "group_end", "end",       "end"};
  // Begins precede the outermost real ncclGroupEnd, ends follow it.
  EXPECT_EQ(fk::Events(), expected);
  const auto begins = fk::Begins();
  ASSERT_EQ(begins.size(), 2u);
  EXPECT_EQ(begins[0].seq, 1u);
  EXPECT_EQ(begins[1].seq, 2u);
  EXPECT_EQ(begins[0].stream, kStream);
  EXPECT_EQ(begins[1].stream, s2);
  const auto ends = fk::Ends();
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[1].stream, s2);
  // A later op outside any group is timed immediately again.
  fk::Reset();
  ncclAllReduce(nullptr, nullptr, 1, ncclFloat32, ncclSum, c, kStream);
  EXPECT_EQ(fk::Events(), (std::vector<std::string>{"begin", "allreduce", "end"}));
  ncclCommDestroy(c);
}

// ---- Python call sites (py_callsite.h) -----------------------------------------

TEST_F(LayersTest, PickedGemmsAndCollectivesLinkTheirCallsiteAfterTheRealCall) {
  constexpr uint32_t kStack = 77;
  fk::SetPicked(true);
  fk::SetPyCallsite(kStack);
  ncclComm_t c = nullptr;
  ncclCommInitRank(&c, 2, MakeUniqueId(11), 0);
  fk::Reset();
  FakeLtDesc desc{CUBLAS_OP_N, CUBLAS_OP_N, CUBLAS_COMPUTE_32F};
  FakeLtLayout a{CUDA_R_16BF, 16, 16, 1};
  auto* h_desc = reinterpret_cast<cublasLtMatmulDesc_t>(&desc);
  auto* h_a = reinterpret_cast<cublasLtMatrixLayout_t>(&a);
  cublasGemmEx(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, nullptr, nullptr, CUDA_R_16BF, 8,
               nullptr, CUDA_R_16BF, 8, nullptr, nullptr, CUDA_R_16BF, 8, CUBLAS_COMPUTE_32F,
               CUBLAS_GEMM_DEFAULT);
  cublasLtMatmul(nullptr, h_desc, nullptr, nullptr, h_a, nullptr, h_a, nullptr, nullptr, h_a,
                 nullptr, h_a, nullptr, nullptr, 0, kStream);
  ncclAllReduce(nullptr, nullptr, 4, ncclFloat32, ncclSum, c, kStream);
  ncclSend(nullptr, 4, ncclFloat32, 1, c, kStream);
  const auto begins = fk::Begins();
  const auto links = fk::Links();
  ASSERT_EQ(begins.size(), 4u);
  ASSERT_EQ(links.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(links[i].slot, i + 1);  // the fake's slot = begin index + 1
    EXPECT_EQ(links[i].launch_sig, begins[i].sig_id);
    EXPECT_EQ(links[i].seq, begins[i].seq);
    EXPECT_EQ(links[i].stack_sig, kStack);
  }
  // The stack is walked after the op's end event, never between its events.
  const std::vector<std::string> ev = fk::Events();
  const auto at = std::find(ev.begin(), ev.end(), "allreduce");
  ASSERT_TRUE(at != ev.end() && at != ev.begin() && ev.end() - at >= 4);
  EXPECT_EQ(std::vector<std::string>(at - 1, at + 4),
            (std::vector<std::string>{"begin", "allreduce", "end", "capture", "link"}));
  ncclCommDestroy(c);
}

TEST_F(LayersTest, UnpickedLaunchesAndPlainKernelsNeverWalkPython) {
  fk::SetPyCallsite(77);
  cublasSgemmStridedBatched(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, nullptr, nullptr, 8, 0,
                            nullptr, 8, 0, nullptr, nullptr, 8, 0, 2);
  EXPECT_EQ(fk::Begins().size(), 1u);
  EXPECT_EQ(fk::PyCallsiteCaptures(), 0u);  // not picked: not even a GIL check
  fk::SetPicked(true);
  fk::SetKernelSampleEvery(1);
  cudaLaunchKernel(kKernelA, dim3(1), dim3(1), nullptr, 0, kStream);
  EXPECT_EQ(fk::Begins().size(), 2u);       // traced ...
  EXPECT_EQ(fk::PyCallsiteCaptures(), 0u);  // ... but kernels carry no call site
  EXPECT_TRUE(fk::Links().empty());
}

TEST_F(LayersTest, PickedOpsOfAGroupShareOneWalkAtTheOutermostGroupEnd) {
  fk::SetPicked(true);
  fk::SetPyCallsite(5);
  ncclComm_t c = nullptr;
  ncclCommInitRank(&c, 2, MakeUniqueId(12), 0);
  fk::Reset();
  ncclGroupStart();
  ncclAllReduce(nullptr, nullptr, 1, ncclFloat32, ncclSum, c, kStream);
  ncclAllReduce(nullptr, nullptr, 2, ncclFloat32, ncclSum, c, kStream);
  ncclGroupEnd();
  EXPECT_EQ(fk::Events(),
            (std::vector<std::string>{"allreduce", "allreduce", "begin", "begin", "group_end",
                                      "end", "end", "capture", "link", "link"}));
  const auto links = fk::Links();
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[0].seq, 1u);
  EXPECT_EQ(links[1].seq, 2u);
  EXPECT_NE(links[0].launch_sig, links[1].launch_sig);  // different counts
  // No stack (GIL not held): walked once, nothing linked.
  fk::Reset();
  fk::SetPyCallsite(0);
  ncclGroupStart();
  ncclAllReduce(nullptr, nullptr, 1, ncclFloat32, ncclSum, c, kStream);
  ncclGroupEnd();
  EXPECT_EQ(fk::PyCallsiteCaptures(), 1u);
  EXPECT_TRUE(fk::Links().empty());
  ncclCommDestroy(c);
}

TEST_F(LayersTest, SplitIdsAgreeWithinColorAndDifferAcross) {
  // Three ranks of one parent, each splitting once.
  ncclComm_t p[3];
  for (int r = 0; r < 3; ++r) ncclCommInitRank(&p[r], 3, MakeUniqueId(11), r);
  ncclComm_t s[3];
  ncclCommSplit(p[0], 0, 0, &s[0], nullptr);
  ncclCommSplit(p[1], 0, 1, &s[1], nullptr);
  ncclCommSplit(p[2], 1, 0, &s[2], nullptr);
  EXPECT_EQ(CommId(s[0]), CommId(s[1]));
  EXPECT_NE(CommId(s[0]), CommId(s[2]));
  EXPECT_NE(CommId(s[0]), CommId(p[0]));
  // A second split round on the same parents gets new ids.
  ncclComm_t t0, t1, none;
  ncclCommSplit(p[0], 0, 0, &t0, nullptr);
  ncclCommSplit(p[1], 0, 1, &t1, nullptr);
  ncclCommSplit(p[2], NCCL_SPLIT_NOCOLOR, 0, &none, nullptr);
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(CommId(t0), CommId(t1));
  EXPECT_NE(CommId(t0), CommId(s[0]));
  // Rank and size of the child come from the child.
  const CommInfo* info = CommRegistry::Get().Find(s[1]);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->rank.load(), 1);
  EXPECT_EQ(info->nranks.load(), 2);
  for (ncclComm_t c : {p[0], p[1], p[2], s[0], s[1], s[2], t0, t1}) ncclCommDestroy(c);
}

TEST_F(LayersTest, DestroyEmitsLifecycleRecordWithLastSeq) {
  ncclComm_t c = nullptr;
  ncclCommInitRank(&c, 2, MakeUniqueId(12), 0);
  ncclAllReduce(nullptr, nullptr, 1, ncclFloat32, ncclSum, c, kStream);
  const uint64_t id = CommId(c);
  fk::Reset();
  EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  const auto hosts = fk::Hosts();
  ASSERT_EQ(hosts.size(), 1u);
  const fk::InternedSig sig = fk::Sig(hosts[0].sig_id);
  EXPECT_EQ(sig.sig.kind, XPU_OP_COMM_DESTROY);
  EXPECT_EQ(sig.name, "ncclCommDestroy");
  EXPECT_EQ(sig.sig.comm_id, id);
  EXPECT_EQ(hosts[0].value, 1u);
}

}  // namespace
}  // namespace xpu::hook
