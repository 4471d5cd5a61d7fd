// tests/fake_runtime/fake_nccl_profiler_test_plugin.cc — a recording NCCL
// profiler plugin (API v5) for fake_nccl_profiler_unittest.cc: it logs every
// call the fake libnccl makes, with the calling thread, and hands out
// distinct handles. XPU_TEST_PLUGIN_FAIL_INIT=1 makes init fail. The test
// reads the log through xpu_test_plugin_log (dlopen of the same file returns
// the same instance). Test-only.
// Thread-safety: the log is guarded by a mutex (NCCL calls from the issuing
// thread and from stream workers).
#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "fake_nccl_profiler_test_plugin.h"
#include "nccl_profiler_api.h"

namespace {

std::mutex g_mu;
std::vector<TestPluginEvent>* g_log = new std::vector<TestPluginEvent>;  // guarded by g_mu
std::atomic<uintptr_t> g_next_handle{0x1000};

void Append(TestPluginEvent e) {
  e.thread = static_cast<uint64_t>(pthread_self());
  std::lock_guard<std::mutex> l(g_mu);
  g_log->push_back(e);
}

void Copy(char* dst, const char* src) {
  if (src != nullptr) strncpy(dst, src, sizeof(TestPluginEvent::func) - 1);
}

ncclResult_t Init(void** ctx, uint64_t comm_id, int* mask, const char*, int, int nranks, int rank,
                  xpu_nccl_logger_t) {
  TestPluginEvent e{};
  e.call = TestPluginEvent::kInit;
  e.comm_id = comm_id;
  e.rank = rank;
  e.nranks = nranks;
  Append(e);
  const char* fail = getenv("XPU_TEST_PLUGIN_FAIL_INIT");
  if (fail != nullptr && strcmp(fail, "1") == 0) return ncclInternalError;
  *ctx = reinterpret_cast<void*>(g_next_handle.fetch_add(16));
  *mask = kNcclProfileGroup | kNcclProfileColl | kNcclProfileP2p | kNcclProfileKernelCh |
          kNcclProfileProxyOp | kNcclProfileProxyStep;
  return ncclSuccess;
}

ncclResult_t Start(void* ctx, void** handle, xpu_nccl_event_descr_v5_t* d) {
  TestPluginEvent e{};
  e.call = TestPluginEvent::kStart;
  e.context = ctx;
  e.type = d->type;
  e.parent = d->parentObj;
  e.rank = d->rank;
  switch (d->type) {
    case kNcclProfileColl:
      Copy(e.func, d->coll.func);
      Copy(e.dtype, d->coll.datatype);
      e.count = d->coll.count;
      e.nchannels = d->coll.nChannels;
      e.root = d->coll.root;
      break;
    case kNcclProfileP2p:
      Copy(e.func, d->p2p.func);
      Copy(e.dtype, d->p2p.datatype);
      e.count = d->p2p.count;
      e.nchannels = d->p2p.nChannels;
      e.root = d->p2p.peer;
      break;
    case kNcclProfileKernelCh:
      e.channel = d->kernelCh.channelId;
      e.ptimer = d->kernelCh.pTimer;
      break;
    case kNcclProfileProxyOp:
      e.channel = d->proxyOp.channelId;
      e.count = static_cast<size_t>(d->proxyOp.nSteps);
      e.root = d->proxyOp.peer;
      e.pid = d->proxyOp.pid;
      break;
    default:
      break;
  }
  e.handle = reinterpret_cast<void*>(g_next_handle.fetch_add(16));
  *handle = e.handle;
  Append(e);
  return ncclSuccess;
}

ncclResult_t Stop(void* handle) {
  TestPluginEvent e{};
  e.call = TestPluginEvent::kStop;
  e.handle = handle;
  Append(e);
  return ncclSuccess;
}

ncclResult_t State(void* handle, xpu_nccl_profiler_state_t state, xpu_nccl_state_args_v5_t* a) {
  TestPluginEvent e{};
  e.call = TestPluginEvent::kState;
  e.handle = handle;
  e.state = state;
  if (a != nullptr) {
    e.ptimer = a->kernelCh.pTimer;  // same bytes as proxyStep.transSize
  }
  Append(e);
  return ncclSuccess;
}

ncclResult_t Finalize(void* ctx) {
  TestPluginEvent e{};
  e.call = TestPluginEvent::kFinalize;
  e.context = ctx;
  Append(e);
  return ncclSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default")))
const xpu_nccl_profiler_v5_t ncclProfiler_v5 = {"xpu-test", Init, Start, Stop, State, Finalize};

extern "C" __attribute__((visibility("default"))) size_t xpu_test_plugin_log(TestPluginEvent* out,
                                                                             size_t max) {
  std::lock_guard<std::mutex> l(g_mu);
  const size_t n = g_log->size() < max ? g_log->size() : max;
  for (size_t i = 0; i < n; ++i) out[i] = (*g_log)[i];
  return g_log->size();
}
