// hook/interposers/missing_library_unittest.cc — every interposer called in a
// process where none of the real libraries can be found (ResolveReal of the
// recording core double returns nullptr for everything): each must return its
// library's error code, record nothing and not crash. This is the situation of
// a hook preloaded into a process that never loads, say, NCCL, but calls an
// interposed name through some other path. Thread-safety: single-threaded test.
#undef CUDA_API_PER_THREAD_DEFAULT_STREAM
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include "hook/interposers/fake_core_for_test.h"

#undef cuGetProcAddress
extern "C" {
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaLaunchKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t);
cudaError_t cudaMemcpy_ptds(void*, const void*, size_t, cudaMemcpyKind);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
CUresult cuGetProcAddress(const char*, void**, int, cuuint64_t);
}

namespace xpu::hook {
namespace {

namespace fk = ::xpu::hook::fake;

class MissingRealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fk::Reset();
    fk::SetActive(true);
    fk::SetKernelSampleEvery(1);
  }
  void TearDown() override {
    EXPECT_TRUE(fk::Begins().empty());
    EXPECT_TRUE(fk::Hosts().empty());
    EXPECT_GT(fk::Counter(XPU_CNT_SYMBOL_MISSING), 0u);
  }
};

TEST_F(MissingRealTest, Runtime) {
  const void* f = reinterpret_cast<const void*>(0x100);
  char buf[8] = {};
  EXPECT_EQ(cudaLaunchKernel(f, dim3(1), dim3(1), nullptr, 0, nullptr), cudaErrorSymbolNotFound);
  EXPECT_EQ(cudaLaunchKernel_ptsz(f, dim3(1), dim3(1), nullptr, 0, nullptr),
            cudaErrorSymbolNotFound);
  EXPECT_EQ(__cudaLaunchKernel(nullptr, dim3(1), dim3(1), nullptr, 0, nullptr),
            cudaErrorSymbolNotFound);
  cudaLaunchConfig_t cfg = {};
  EXPECT_EQ(cudaLaunchKernelExC(&cfg, f, nullptr), cudaErrorSymbolNotFound);
  EXPECT_EQ(cudaLaunchCooperativeKernel(f, dim3(1), dim3(1), nullptr, 0, nullptr),
            cudaErrorSymbolNotFound);
  EXPECT_EQ(cudaGraphLaunch(nullptr, nullptr), cudaErrorSymbolNotFound);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaErrorSymbolNotFound);
  EXPECT_EQ(cudaStreamSynchronize_ptsz(nullptr), cudaErrorSymbolNotFound);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorSymbolNotFound);
  EXPECT_EQ(cudaEventSynchronize(nullptr), cudaErrorSymbolNotFound);
  EXPECT_EQ(cudaMemcpy(buf, buf, 8, cudaMemcpyHostToHost), cudaErrorSymbolNotFound);
  EXPECT_EQ(cudaMemcpy_ptds(buf, buf, 8, cudaMemcpyHostToHost), cudaErrorSymbolNotFound);
  EXPECT_EQ(cudaMemcpy2D(buf, 8, buf, 8, 8, 1, cudaMemcpyHostToHost), cudaErrorSymbolNotFound);
  EXPECT_EQ(cudaMemcpyToSymbol(f, buf, 8, 0, cudaMemcpyHostToDevice), cudaErrorSymbolNotFound);
  EXPECT_EQ(cudaMemcpyFromSymbol(buf, f, 8, 0, cudaMemcpyDeviceToHost), cudaErrorSymbolNotFound);
  void* fn = nullptr;
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 13000, 0, nullptr),
            cudaErrorSymbolNotFound);
  EXPECT_EQ(fn, nullptr);
}

TEST_F(MissingRealTest, Driver) {
  EXPECT_EQ(cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuLaunchKernel_ptsz(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_NOT_FOUND);
  CUlaunchConfig cfg = {};
  EXPECT_EQ(cuLaunchKernelEx(&cfg, nullptr, nullptr, nullptr), CUDA_ERROR_NOT_FOUND);
  void* fn = nullptr;
  EXPECT_EQ(cuGetProcAddress_v2("cuLaunchKernel", &fn, 13000, 0, nullptr), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuGetProcAddress("cuLaunchKernel", &fn, 13000, 0), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(fn, nullptr);
}

TEST_F(MissingRealTest, Blas) {
  EXPECT_EQ(cublasSgemm_v2(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr, 1, nullptr,
                           1, nullptr, nullptr, 1),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasGemmEx(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr, CUDA_R_16F,
                         1, nullptr, CUDA_R_16F, 1, nullptr, nullptr, CUDA_R_16F, 1,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(
      cublasGemmStridedBatchedEx(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr,
                                 CUDA_R_16F, 1, 0, nullptr, CUDA_R_16F, 1, 0, nullptr, nullptr,
                                 CUDA_R_16F, 1, 0, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasLtMatmul(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                           nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST_F(MissingRealTest, Nccl) {
  ncclComm_t comm = nullptr;
  ncclUniqueId id = {};
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 0), ncclSystemError);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 1, ncclFloat32, ncclSum, nullptr, nullptr),
            ncclSystemError);
  EXPECT_EQ(ncclSend(nullptr, 1, ncclFloat32, 0, nullptr, nullptr), ncclSystemError);
  EXPECT_EQ(ncclGroupStart(), ncclSystemError);
  EXPECT_EQ(ncclGroupEnd(), ncclSystemError);
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSystemError);
  EXPECT_EQ(ncclCommSplit(nullptr, 0, 0, &comm, nullptr), ncclSystemError);
}

}  // namespace
}  // namespace xpu::hook
