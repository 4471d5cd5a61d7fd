/*
 * tests/fake_runtime/xpu_fake.h — the public extras of the GPU-less test
 * runtime (libxpu_fake_core.so), for test programs only.
 *
 * xpu_fake_kernel: a host symbol used as a kernel. Launched through
 * cudaLaunchKernel / cudaLaunchKernelExC / cudaLaunchCooperativeKernel, or
 * through cuLaunchKernel / cuLaunchKernelEx with the CUfunction returned by
 * cudaGetFuncBySymbol(&f, (const void*)xpu_fake_kernel), it runs for the
 * number of nanoseconds held by its first argument: args[0] points to a
 * uint64_t. Every other kernel runs for XPU_FAKE_KERNEL_NS (default 20000).
 *
 * Environment of the runtime (read once, at first use):
 *   XPU_FAKE_DEVICES           devices per process (default 1)
 *   XPU_FAKE_KERNEL_NS         default kernel duration (default 20000)
 *   XPU_FAKE_TFLOPS            GEMM rate; a GEMM takes 2*m*n*k*batch / (TFLOPS*1e12) s
 *   XPU_FAKE_SLOW_RANKS        comma list of RANKs whose GEMMs are slower ...
 *   XPU_FAKE_SLOW_GEMM_FACTOR  ... by this factor (default 2)
 *   XPU_FAKE_NET_GBPS          collective bus bandwidth in GB/s (default 100)
 *   XPU_FAKE_SLOW_LINK_RANKS   comma list of RANKs whose collectives are slower ...
 *   XPU_FAKE_SLOW_LINK_FACTOR  ... by this factor (default 2)
 *   XPU_FAKE_SLOW_KERNEL       kernel name (e.g. xpu_fake_gemm_kernel) that runs slower
 *                              on the XPU_FAKE_SLOW_RANKS ...
 *   XPU_FAKE_SLOW_KERNEL_FACTOR ... by this factor (default 2)
 *   XPU_FAKE_CUPTI_OTHER_CLIENT 1: the fake libcupti refuses cuptiSubscribe as
 *                              when another CUPTI client is active
 *   XPU_FAKE_CUPTI_FINALIZE_FAILS 1: cuptiFinalize fails and tears nothing down
 *   XPU_FAKE_CUPTI_STATE       PREFIX: the fake libcupti writes PREFIX.rank<RANK>
 *                              after every cuptiFinalize and at exit
 *   XPU_FAKE_CALL_COUNTS       PREFIX: at exit write PREFIX.rank<RANK> (or
 *                              PREFIX.pid<PID>) with "<api> <count>" lines
 */
#ifndef XPU_TESTS_FAKE_RUNTIME_XPU_FAKE_H_
#define XPU_TESTS_FAKE_RUNTIME_XPU_FAKE_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Never called: only its address matters. */
void xpu_fake_kernel(void);

/* Number of calls of the exported API function `api` (e.g. "cudaLaunchKernel",
 * "ncclAllReduce") made in this process so far. Thread-safe. */
unsigned long long xpu_fake_call_count(const char* api);

#ifdef __cplusplus
}
#endif

#endif /* XPU_TESTS_FAKE_RUNTIME_XPU_FAKE_H_ */
