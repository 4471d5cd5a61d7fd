// tests/fake_runtime/fake_cublas_unittest.cc — unit tests of the fake
// libcublas and libcublasLt: GEMM time follows 2*m*n*k*batch / TFLOPS, the
// slow-rank factor, cuBLASLt descriptors and shapes. Timing conventions:
// fake_test_util.h. Thread-safety: single-threaded tests.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "fake_test_util.h"

namespace {

using xpu::fake::testing::Elapsed;
using xpu::fake::testing::kSlackMs;
using xpu::fake::testing::SetEnv;

double GemmMs(double m, double n, double k, double batch, double tflops, double factor) {
  return 2.0 * m * n * k * batch / (tflops * 1e12) * 1e3 * factor;
}

float TimeGemm(cublasHandle_t h, cudaStream_t s, int m, int n, int k, int batch) {
  cudaEvent_t a, b;
  EXPECT_EQ(cudaEventCreate(&a), cudaSuccess);
  EXPECT_EQ(cudaEventCreate(&b), cudaSuccess);
  float alpha = 1, beta = 0;
  EXPECT_EQ(cudaEventRecord(a, s), cudaSuccess);
  if (batch == 1) {
    EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, nullptr, CUDA_R_16BF, m,
                           nullptr, CUDA_R_16BF, k, &beta, nullptr, CUDA_R_16BF, m,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
  } else {
    EXPECT_EQ(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, nullptr, m, 0,
                                        nullptr, k, 0, &beta, nullptr, m, 0, batch),
              CUBLAS_STATUS_SUCCESS);
  }
  EXPECT_EQ(cudaEventRecord(b, s), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(b), cudaSuccess);
  return Elapsed(a, b);
}

TEST(FakeCublas, GemmTimeScalesWithFlops) {
  SetEnv({{"XPU_FAKE_TFLOPS", "0.1"}, {"RANK", "2"}, {"XPU_FAKE_SLOW_RANKS", "1,3"}});
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
  cudaStream_t got;
  ASSERT_EQ(cublasGetStream(h, &got), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got, s);
  const double small = GemmMs(512, 512, 512, 1, 0.1, 1);     // 2.7 ms
  const double large = GemmMs(1024, 1024, 1024, 1, 0.1, 1);  // 21.5 ms
  const double batched = GemmMs(512, 512, 512, 16, 0.1, 1);  // 43 ms
  float t_small = TimeGemm(h, s, 512, 512, 512, 1);
  float t_large = TimeGemm(h, s, 1024, 1024, 1024, 1);
  float t_batched = TimeGemm(h, s, 512, 512, 512, 16);
  EXPECT_GE(t_small, small);
  EXPECT_LT(t_small, small + kSlackMs);
  EXPECT_GE(t_large, large);
  EXPECT_LT(t_large, large + kSlackMs);
  EXPECT_GE(t_batched, batched);
  EXPECT_LT(t_batched, batched + kSlackMs);
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, 1, 1, nullptr, nullptr, CUDA_R_16BF, 1,
                         nullptr, CUDA_R_16BF, 1, nullptr, nullptr, CUDA_R_16BF, 1,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

TEST(FakeCublas, SlowRankFactorAppliesOnlyToListedRanks) {
  SetEnv({{"XPU_FAKE_TFLOPS", "0.1"},
          {"RANK", "3"},
          {"XPU_FAKE_SLOW_RANKS", "1,3"},
          {"XPU_FAKE_SLOW_GEMM_FACTOR", "4"}});
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const double base = GemmMs(1024, 1024, 1024, 1, 0.1, 1);  // 21.5 ms
  float slow = TimeGemm(h, nullptr, 1024, 1024, 1024, 1);
  EXPECT_GE(slow, 4 * base);
  EXPECT_LT(slow, 4 * base + kSlackMs);
  SetEnv({{"RANK", "2"}});
  float fast = TimeGemm(h, nullptr, 1024, 1024, 1024, 1);
  EXPECT_GE(fast, base);
  EXPECT_LT(fast, base + kSlackMs);
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

TEST(FakeCublas, MisalignedShapeRunsFactorTimesSlower) {
  SetEnv({{"XPU_FAKE_TFLOPS", "0.1"},
          {"RANK", nullptr},
          {"XPU_FAKE_SLOW_RANKS", nullptr},
          {"XPU_FAKE_MISALIGNED_FACTOR", "3"}});
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  // 1024 x 1024 x 1024 is aligned; 1024 x 1000 x 1024 has n = 1000, not a
  // multiple of 64.
  const double aligned = GemmMs(1024, 1024, 1024, 1, 0.1, 1);   // 21.5 ms
  const double misaligned = GemmMs(1024, 1000, 1024, 1, 0.1, 3);  // 63 ms
  float t_aligned = TimeGemm(h, nullptr, 1024, 1024, 1024, 1);
  float t_misaligned = TimeGemm(h, nullptr, 1024, 1000, 1024, 1);
  EXPECT_GE(t_aligned, aligned);
  EXPECT_LT(t_aligned, aligned + kSlackMs);
  EXPECT_GE(t_misaligned, misaligned);
  EXPECT_LT(t_misaligned, misaligned + kSlackMs);
  SetEnv({{"XPU_FAKE_MISALIGNED_FACTOR", nullptr}});
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

TEST(FakeCublasLt, MatmulShapeFromLayoutsAndTranspose) {
  SetEnv({{"XPU_FAKE_TFLOPS", "0.1"}, {"RANK", nullptr}});
  cublasLtHandle_t lt;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t desc;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  cublasOperation_t t = CUBLAS_OP_T;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)),
            CUBLAS_STATUS_SUCCESS);
  int32_t got = -1;
  size_t written = 0;
  ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &got, sizeof(got),
                                           &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got, CUBLAS_OP_T);
  EXPECT_EQ(written, sizeof(got));
  // D[1024 x 512] = op(A)[1024 x 2048] * B[2048 x 512], A stored 2048 x 1024.
  cublasLtMatrixLayout_t a, b, d;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, 2048, 1024, 2048), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, 2048, 512, 2048), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, 1024, 512, 1024), CUBLAS_STATUS_SUCCESS);
  int32_t batch = 2;
  ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(d, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                             sizeof(batch)),
            CUBLAS_STATUS_SUCCESS);
  uint64_t rows = 0;
  ASSERT_EQ(cublasLtMatrixLayoutGetAttribute(a, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows),
                                             &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(rows, 2048u);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  float alpha = 1, beta = 0;
  ASSERT_EQ(cudaEventRecord(e0, s), cudaSuccess);
  ASSERT_EQ(cublasLtMatmul(lt, desc, &alpha, nullptr, a, nullptr, b, &beta, nullptr, d, nullptr, d,
                           nullptr, nullptr, 0, s),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaEventRecord(e1, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const double modelled = GemmMs(1024, 512, 2048, 2, 0.1, 1);  // 43 ms
  EXPECT_GE(Elapsed(e0, e1), modelled);
  EXPECT_LT(Elapsed(e0, e1), modelled + kSlackMs);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(a), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(b), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(d), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
