// hook/hook_overhead_bench.cc — ns per call of the hot paths the layers use,
// printed from one run so that the figures are comparable with each other.
// Prints only; asserts nothing. Single-threaded.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "hook/core_api.h"
#include "hook/process/config.h"
#include "hook/process/fake_python_for_test.h"
#include "hook/process/py_callsite.h"
#include "hook/process/runtime.h"

using namespace xpu::hook;  // NOLINT: benchmark main

namespace {

template <typename F>
double NsPerCall(int iters, F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) f(i);
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / iters;
}

}  // namespace

int main() {
  Config c =
      LoadConfig([](const char*) -> const char* { return nullptr; }, getpid(), getuid(), "bench");
  c.daemon = false;
  c.daemon_socket = "/nonexistent/xpu-bench.sock";
  c.ring_capacity = 1u << 20;
  std::string err;
  if (!InitRuntime(c, getpid(), &err)) {
    fprintf(stderr, "init failed: %s\n", err.c_str());
    return 1;
  }
  Runtime* rt = GetRuntime();
  xpu_signature_v1 sig;
  memset(&sig, 0, sizeof(sig));
  sig.kind = XPU_OP_GEMM;
  sig.m = sig.n = sig.k = 4096;
  const char kName[] = "cublasGemmEx";
  uint32_t id = InternSignature(sig, kName, sizeof(kName) - 1);
  const int kIters = 500000;
  volatile uint32_t sink = 0;
  double intern =
      NsPerCall(kIters, [&](int) { sink = InternSignature(sig, kName, sizeof(kName) - 1); });
  // Keep the ring from filling: the bench plays the consumer between batches.
  auto drain = [&] {
    __atomic_store_n(&rt->ring.header()->read_index,
                     __atomic_load_n(&rt->ring.header()->write_index, __ATOMIC_ACQUIRE),
                     __ATOMIC_RELEASE);
  };
  drain();
  double emit = NsPerCall(kIters, [&](int i) {
    EmitHostInterval(id, 1000, 2000, static_cast<uint32_t>(i), 0);
    if ((i & 0xffff) == 0xffff) drain();
  });
  double now = NsPerCall(kIters, [&](int) { sink = static_cast<uint32_t>(NowNs()); });
  double inactive_begin = NsPerCall(kIters, [&](int) {
    OpHandle h = BeginGpuOp(id, nullptr, 0, 0);
    EndGpuOp(h, nullptr, 0);
  });
  // Python call site of a sampled launch, hook side only: the CPython
  // functions are the allocation-free double of fake_python_for_test.h, so
  // this is the walk, hash, cache lookup and link record without CPython's
  // own cost (measured from Python by bench/hook_launch/callsite_bench.py).
  testing::FakePyCode code;
  testing::InitCode(&code, "Block.forward", "forward", "/src/model.py");
  testing::FakePyFrame frames[8];
  for (int i = 0; i < 8; ++i) {
    frames[i].code = &code;
    frames[i].line = 10 + i;
  }
  testing::LinkFrames(frames, 8);
  testing::Py().current = &frames[0];
  testing::Py().AcquireGil();
  PyApi api = testing::FakePyApi();
  testing::SetPyApiForTest(&api, 8);
  OpHandle picked = BeginGpuOp(id, nullptr, 0, 0);
  EndGpuOp(picked, nullptr, 0);
  picked.picked = 1;
  drain();
  const double stack_hit = NsPerCall(kIters, [&](int) { sink = CapturePyCallsite(); });
  const double link = NsPerCall(kIters, [&](int i) {
    EmitCallsiteLink(picked, sink);
    if ((i & 0xffff) == 0xffff) drain();
  });
  testing::Py().ReleaseGil();
  const double no_gil = NsPerCall(kIters, [&](int) { sink = CapturePyCallsite(); });
  testing::SetPyApiForTest(nullptr, 0);

  printf("hook_overhead_bench (%d iterations each)\n", kIters);
  printf("  NowNs                       %8.1f ns/call\n", now);
  printf("  InternSignature (hit)       %8.1f ns/call\n", intern);
  printf("  EmitHostInterval            %8.1f ns/call\n", emit);
  printf("  BeginGpuOp+EndGpuOp (no CUDA runtime: untracked) %8.1f ns/call\n", inactive_begin);
  printf("  CapturePyCallsite, 8 frames, cache hit (CPython double) %8.1f ns/call\n", stack_hit);
  printf("  CapturePyCallsite, GIL not held (CPython double)         %8.1f ns/call\n", no_gil);
  printf("  EmitCallsiteLink            %8.1f ns/call\n", link);
  printf("  ratio Emit/Intern           %8.2f\n", emit / intern);
  printf("  dropped=%llu written=%llu\n",
         static_cast<unsigned long long>(rt->ring.Counter(XPU_CNT_DROPPED_FULL)),
         static_cast<unsigned long long>(rt->ring.Counter(XPU_CNT_RECORDS_WRITTEN)));
  (void)sink;
  return 0;
}
