// hook/nccl_profiler/plugin_exports.cc — the only exports of
// libnccl-profiler-xpu.so: the versioned function tables ncclProfiler_v5
// (NCCL 2.26 .. 2.28) and ncclProfiler_v4 (NCCL 2.25), which NCCL looks up
// newest first. Both drive one process-wide Profiler (profiler_core.h).
//
// The hook's C API is resolved with dlsym(RTLD_DEFAULT) at the first init.
// Without libxpu_hook.so in the process (or when the hook declines: tracing
// off, XPU_TIMING=all/off) init returns an error and NCCL disables the
// plugin for that communicator; the host is never failed. Every other entry
// point is safe with a null context or handle.
//
// Thread-safety: the Profiler is built once under std::call_once (init is
// not on the launch path); everything after that is the Profiler's.
#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "nccl_profiler_api.h"
#include "profiler_core.h"
#include "xpu/hook_api.h"

#define XPU_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace xpu::nccl_profiler {
namespace {

std::once_flag g_once;
Profiler* g_profiler = nullptr;  // never freed: late events stay safe

Profiler* GetProfiler() {
  std::call_once(g_once, [] {
    HookApi api;
    api.attach =
        reinterpret_cast<decltype(api.attach)>(dlsym(RTLD_DEFAULT, "xpu_nccl_plugin_attach"));
    api.claim =
        reinterpret_cast<decltype(api.claim)>(dlsym(RTLD_DEFAULT, "xpu_nccl_claim_issued_op"));
    api.emit = reinterpret_cast<decltype(api.emit)>(dlsym(RTLD_DEFAULT, "xpu_emit_record"));
    api.now_ns = reinterpret_cast<decltype(api.now_ns)>(dlsym(RTLD_DEFAULT, "xpu_now_ns"));
    if (!api.complete()) return;  // no hook: the plugin stays disabled
    g_profiler = new (std::nothrow) Profiler(api);
  });
  return g_profiler;
}

// ---- v5 ------------------------------------------------------------------------

ncclResult_t InitV5(void** context, uint64_t comm_id, int* mask, const char* /*comm_name*/,
                    int /*n_nodes*/, int nranks, int rank, xpu_nccl_logger_t /*logfn*/) {
  if (context != nullptr) *context = nullptr;
  Profiler* p = GetProfiler();
  if (p == nullptr) return ncclSystemError;
  return p->Init(context, comm_id, mask, nranks, rank);
}

ncclResult_t StartV5(void* context, void** handle, xpu_nccl_event_descr_v5_t* d) {
  if (handle != nullptr) *handle = nullptr;
  return g_profiler != nullptr ? g_profiler->StartEvent(context, handle, d) : ncclSuccess;
}

ncclResult_t Stop(void* handle) {
  return g_profiler != nullptr ? g_profiler->StopEvent(handle) : ncclSuccess;
}

ncclResult_t StateV5(void* handle, xpu_nccl_profiler_state_t state,
                     xpu_nccl_state_args_v5_t* args) {
  return g_profiler != nullptr ? g_profiler->RecordEventState(handle, state, args) : ncclSuccess;
}

ncclResult_t Finalize(void* context) {
  return g_profiler != nullptr ? g_profiler->Finalize(context) : ncclSuccess;
}

// ---- v4: the same events, an older descriptor layout -----------------------------

ncclResult_t InitV4(void** context, int* mask, const char* comm_name, uint64_t comm_hash,
                    int n_nodes, int nranks, int rank, xpu_nccl_logger_t logfn) {
  return InitV5(context, comm_hash, mask, comm_name, n_nodes, nranks, rank, logfn);
}

ncclResult_t StartV4(void* context, void** handle, xpu_nccl_event_descr_v4_t* d4) {
  if (handle != nullptr) *handle = nullptr;
  if (d4 == nullptr || g_profiler == nullptr) return ncclSuccess;
  xpu_nccl_event_descr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = d4->type;
  d.parentObj = d4->parentObj;
  d.rank = d4->rank;
  switch (d4->type) {
    case kNcclProfileColl:
      d.coll.seqNumber = d4->coll.seqNumber;
      d.coll.func = d4->coll.func;
      d.coll.sendBuff = d4->coll.sendBuff;
      d.coll.recvBuff = d4->coll.recvBuff;
      d.coll.count = d4->coll.count;
      d.coll.root = d4->coll.root;
      d.coll.datatype = d4->coll.datatype;
      d.coll.nChannels = d4->coll.nChannels;
      d.coll.nWarps = d4->coll.nWarps;
      d.coll.algo = d4->coll.algo;
      d.coll.proto = d4->coll.proto;
      break;
    case kNcclProfileP2p:
      d.p2p.func = d4->p2p.func;
      d.p2p.buff = d4->p2p.buff;
      d.p2p.datatype = d4->p2p.datatype;
      d.p2p.count = d4->p2p.count;
      d.p2p.peer = d4->p2p.peer;
      d.p2p.nChannels = d4->p2p.nChannels;
      break;
    case kNcclProfileProxyOp:
      d.proxyOp.pid = d4->proxyOp.pid;
      d.proxyOp.channelId = d4->proxyOp.channelId;
      d.proxyOp.peer = d4->proxyOp.peer;
      d.proxyOp.nSteps = d4->proxyOp.nSteps;
      d.proxyOp.chunkSize = d4->proxyOp.chunkSize;
      d.proxyOp.isSend = d4->proxyOp.isSend;
      break;
    case kNcclProfileProxyStep:
      d.proxyStep.step = d4->proxyStep.step;
      break;
    case kNcclProfileKernelCh:
      d.kernelCh.channelId = d4->kernelCh.channelId;
      d.kernelCh.pTimer = d4->kernelCh.pTimer;
      break;
    default:
      return ncclSuccess;
  }
  return g_profiler->StartEvent(context, handle, &d);
}

ncclResult_t StateV4(void* handle, xpu_nccl_profiler_state_t state,
                     xpu_nccl_state_args_v4_t* args) {
  if (args == nullptr || g_profiler == nullptr) return ncclSuccess;
  xpu_nccl_state_args_v5_t a;
  memcpy(&a, args, sizeof(a) < sizeof(*args) ? sizeof(a) : sizeof(*args));
  return g_profiler->RecordEventState(handle, state, &a);
}

}  // namespace
}  // namespace xpu::nccl_profiler

XPU_PLUGIN_EXPORT const xpu_nccl_profiler_v5_t ncclProfiler_v5 = {"xpu",
                                                                  xpu::nccl_profiler::InitV5,
                                                                  xpu::nccl_profiler::StartV5,
                                                                  xpu::nccl_profiler::Stop,
                                                                  xpu::nccl_profiler::StateV5,
                                                                  xpu::nccl_profiler::Finalize};

XPU_PLUGIN_EXPORT const xpu_nccl_profiler_v4_t ncclProfiler_v4 = {"xpu",
                                                                  xpu::nccl_profiler::InitV4,
                                                                  xpu::nccl_profiler::StartV4,
                                                                  xpu::nccl_profiler::Stop,
                                                                  xpu::nccl_profiler::StateV4,
                                                                  xpu::nccl_profiler::Finalize};
