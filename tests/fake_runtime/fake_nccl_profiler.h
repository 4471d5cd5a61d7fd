// tests/fake_runtime/fake_nccl_profiler.h — the fake NCCL's profiler plugin
// host: loads the plugin named by NCCL_PROFILER_PLUGIN and drives it around
// the modelled collectives the way NCCL 2.28 drives a profiler API v5
// plugin, so that a plugin (hook/nccl_profiler/) can be tested without a GPU.
//
// Loading, as NCCL does it, once per process at the first communicator:
// NCCL_PROFILER_PLUGIN unset -> "libnccl-profiler.so"; "none" -> no plugin;
// a value containing '/' or ending in ".so" -> that file; any other value V ->
// "libnccl-profiler-V.so". The library must export ncclProfiler_v5 (older
// versions are not modelled). init is called for every communicator; a
// communicator whose init failed gets no events (NCCL disables the plugin
// for it), the host never fails.
//
// Events, each only if the plugin's activation mask asks for its type:
//  * on the issuing thread, at the launch of a single call or of the
//    outermost ncclGroupEnd: a Group event, then per op a Coll (AllReduce,
//    AllGather, ReduceScatter, Broadcast, Reduce) or P2p (Send, Recv) event
//    with nChannels = XPU_FAKE_NCCL_CHANNELS (default 2); after the ops were
//    enqueued on the stream, the Coll/P2p events are stopped ("enqueued", as
//    NCCL does before the kernel ran) and then the Group event.
//    AlltoAll/Gather/Scatter produce no events (NCCL 2.28 builds them from
//    grouped p2p).
//  * on the stream worker (the modelled GPU and proxy thread), when the
//    modelled kernel starts: per channel c a KernelCh event whose pTimer is
//    the GPU globaltimer at start + c * 100 ns, and per channel a ProxyOp
//    with XPU_FAKE_NCCL_PROXY_STEPS (default 2; 0 = none) ProxySteps; when it
//    ends: the steps pass through their send (SendGPUWait, SendWait) or
//    receive (RecvWait, RecvFlushWait, RecvGPUWait) states with transSize =
//    bytes / (channels * steps) and stop, the proxy ops stop, and every
//    channel gets the KernelChStop state with pTimer = GPU time at the end -
//    (channels - 1 - c) * 100 ns and is stopped.
//  * GPU globaltimer = CLOCK_REALTIME + XPU_FAKE_GPU_TIMER_OFFSET_NS
//    (default -1000 s), so a plugin must map GPU time to host time.
//
// Thread-safety: every function may be called from any thread; the plugin
// table is loaded once under std::call_once.
#ifndef XPU_TESTS_FAKE_RUNTIME_FAKE_NCCL_PROFILER_H_
#define XPU_TESTS_FAKE_RUNTIME_FAKE_NCCL_PROFILER_H_

#include <cstdint>
#include <vector>

#include "fake_nccl_comm.h"

namespace xpu::fake::nccl::prof {

// Communicator lifecycle: init of the plugin context (sets comm->prof_*),
// finalize.
void CommInit(ncclComm* comm);
void CommFinalize(ncclComm* comm);

// Issuing thread. LaunchBegin starts the group and the op events (handles
// stored in ops[i].prof); LaunchEnd stops them after the ops were enqueued.
void* LaunchBegin(std::vector<PendingOp>* ops);
void LaunchEnd(const std::vector<PendingOp>& ops, void* group);

// Stream worker: the events of one op's modelled kernel.
struct KernelEvents {
  std::vector<void*> channels;
  std::vector<void*> proxy_ops;
  std::vector<std::vector<void*>> steps;  // per proxy op
};
void KernelStart(const PendingOp& op, uint64_t host_ns, KernelEvents* ev);
void KernelStop(const PendingOp& op, uint64_t host_ns, KernelEvents* ev);

}  // namespace xpu::fake::nccl::prof

#endif  // XPU_TESTS_FAKE_RUNTIME_FAKE_NCCL_PROFILER_H_
