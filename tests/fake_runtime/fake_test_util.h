// tests/fake_runtime/fake_test_util.h — helpers shared by the unit tests of
// the fake runtime.
//
// Timing assertions are one-sided where the machine can only make things
// slower: a measured duration must be >= the modelled one (the model sleeps
// at least that long) and below modelled + kSlackMs, a slack large enough for
// a loaded 2-core CI machine yet far smaller than the differences tested.
// Each test runs in its own process (gtest_discover_tests), so environment
// changes made with SetEnv do not leak between tests.
// Thread-safety: SetEnv only while no other thread uses the runtime.
#ifndef XPU_TESTS_FAKE_RUNTIME_FAKE_TEST_UTIL_H_
#define XPU_TESTS_FAKE_RUNTIME_FAKE_TEST_UTIL_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "fake_core.h"
#include "xpu_fake.h"

namespace xpu::fake::testing {

constexpr double kSlackMs = 1000.0;

inline void LaunchFake(uint64_t ns, cudaStream_t s) {
  void* args[] = {&ns};
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&xpu_fake_kernel), dim3(1), dim3(1),
                             args, 0, s),
            cudaSuccess);
}

inline float Elapsed(cudaEvent_t a, cudaEvent_t b) {
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  return ms;
}

// Sets the environment of the model and re-reads it.
inline void SetEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
  for (auto& [k, v] : vars) {
    if (v == nullptr) {
      unsetenv(k);
    } else {
      setenv(k, v, 1);
    }
  }
  xpu::fake::ReloadConfigForTesting();
}

}  // namespace xpu::fake::testing

#endif  // XPU_TESTS_FAKE_RUNTIME_FAKE_TEST_UTIL_H_
