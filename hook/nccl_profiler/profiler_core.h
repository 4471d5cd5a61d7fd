// hook/nccl_profiler/profiler_core.h — the logic of libnccl-profiler-xpu.so,
// independent of how the hook's C API was found (tests inject a fake one).
//
// What it does with NCCL's events (profiler API v5, see nccl_profiler_api.h):
//  * ncclProfileColl / ncclProfileP2p start (issuing thread, during enqueue):
//    takes an op slot from a preallocated pool and joins it to the NCCL
//    interposer's record of the same call through
//    xpu_nccl_claim_issued_op (sig_id, per-communicator seq, stream, CPU
//    launch time; include/xpu/hook_nccl_api.h).
//  * ncclProfileKernelCh (proxy thread): per channel, the GPU globaltimer at
//    start (descriptor) and stop (state kNcclKernelChStop). The op's GPU
//    interval is [min start, max stop] over its channels.
//  * ncclProfileProxyOp / ncclProfileProxyStep (proxy thread): network steps
//    and their states; summed per op (steps, bytes, first/last host time).
//    They time an op only when no kernel-channel event arrived for it.
//  * The op is complete once its own stopEvent ("enqueued") and the stop of
//    all nChannels kernel-channel events were seen, in whatever order and on
//    whatever threads; the last of them writes one record with
//    XPU_REC_PLUGIN | XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID through
//    xpu_emit_record and frees the slot.
//  * GPU -> host clock: each kernel-channel start/stop that NCCL reports is
//    observed on the host no earlier than it happened, so
//    host_now - ptimer >= true offset; the offset used is the minimum of that
//    difference over the current and the previous 10 s window (a lower
//    envelope that follows slow drift). Durations use GPU timestamps only.
//
// No allocation, lock or syscall on the event path: slots come from fixed
// pools with lock-free claiming; what cannot be handled is counted in Stats.
// Handles given to NCCL are slot addresses; a handle that is not inside one
// of our pools is ignored, never dereferenced.
//
// Limits (documented in docs/timing-policy.md): a kernel-channel or proxy
// event that arrives after its op was written is counted as late; an op that
// never receives all its channel stops (e.g. a graph-captured launch) is
// reclaimed without a record once it has been stopped for kStaleNs and its
// slot is needed.
//
// Thread-safety: every member function may be called from any thread
// concurrently (NCCL calls from application threads and proxy threads).
#ifndef XPU_HOOK_NCCL_PROFILER_PROFILER_CORE_H_
#define XPU_HOOK_NCCL_PROFILER_PROFILER_CORE_H_

#include <sys/types.h>
#include <atomic>
#include <cstdint>
#include <memory>

#include "nccl_profiler_api.h"
#include "xpu/hook_nccl_api.h"
#include "xpu/record.h"

namespace xpu::nccl_profiler {

// The hook functions the plugin uses (resolved with dlsym(RTLD_DEFAULT) in
// production).
struct HookApi {
  int (*attach)(uint32_t plugin_api_version) = nullptr;
  int (*claim)(const xpu_nccl_issue_query_v1* query, xpu_nccl_issued_op_v1* out) = nullptr;
  int (*emit)(const xpu_record_v1* rec) = nullptr;
  uint64_t (*now_ns)() = nullptr;
  bool complete() const { return attach && claim && emit && now_ns; }
};

struct Stats {
  std::atomic<uint64_t> ops_started{0};    // coll/p2p events given a slot
  std::atomic<uint64_t> ops_joined{0};     // ... and joined to an interposer record
  std::atomic<uint64_t> ops_unjoined{0};   // no matching issue entry (no record)
  std::atomic<uint64_t> ops_ambiguous{0};  // joined, but more than one entry matched
  std::atomic<uint64_t> ops_untimed{0};    // complete without any timestamp (no record)
  std::atomic<uint64_t> ops_stale{0};      // reclaimed without a record
  std::atomic<uint64_t> records_written{0};
  std::atomic<uint64_t> records_dropped{0};    // xpu_emit_record failed
  std::atomic<uint64_t> pool_exhausted{0};     // no free op / child slot
  std::atomic<uint64_t> children_orphaned{0};  // child of an unknown / foreign parent
  std::atomic<uint64_t> children_late{0};      // child event after its op completed
  std::atomic<uint64_t> kernel_channels{0};    // kernel-channel events completed
  std::atomic<uint64_t> proxy_steps{0};        // proxy steps completed
  std::atomic<uint64_t> net_bytes{0};          // sum of proxy-step transfer sizes
  std::atomic<uint64_t> foreign_handles{0};    // handle not from our pools
};

// Lower-envelope estimate of host_ns - gpu_ns (see the file comment).
class ClockOffset {
 public:
  static constexpr uint64_t kWindowNs = 10ull * 1000 * 1000 * 1000;
  void Observe(uint64_t gpu_ns, uint64_t host_ns);
  // False until the first observation.
  bool Get(int64_t* offset) const;

 private:
  static constexpr int64_t kNone = INT64_MAX;
  std::atomic<int64_t> cur_{kNone};
  std::atomic<int64_t> prev_{kNone};
  std::atomic<uint64_t> window_start_{0};
};

class Profiler {
 public:
  static constexpr uint32_t kDefaultOps = 4096;
  static constexpr uint32_t kDefaultChildren = 16384;
  static constexpr uint32_t kMaxContexts = 1024;
  static constexpr uint64_t kStaleNs = 30ull * 1000 * 1000 * 1000;
  // The events this plugin asks NCCL for.
  static constexpr int kActivationMask = kNcclProfileColl | kNcclProfileP2p | kNcclProfileKernelCh |
                                         kNcclProfileProxyOp | kNcclProfileProxyStep;

  // Pools are allocated here, once (not on the event path).
  Profiler(const HookApi& api, uint32_t max_ops = kDefaultOps,
           uint32_t max_children = kDefaultChildren);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // ncclProfiler_v5 entry points. Init fails (non-success, *context = null)
  // when the hook API is incomplete or the hook declines (xpu_nccl_plugin_attach
  // returned 0): NCCL then disables the plugin for that communicator.
  ncclResult_t Init(void** context, uint64_t nccl_comm_id, int* activation_mask, int nranks,
                    int rank);
  ncclResult_t StartEvent(void* context, void** handle, const xpu_nccl_event_descr_v5_t* d);
  ncclResult_t StopEvent(void* handle);
  ncclResult_t RecordEventState(void* handle, int state, const xpu_nccl_state_args_v5_t* args);
  ncclResult_t Finalize(void* context);

  const Stats& stats() const { return stats_; }
  const ClockOffset& clock() const { return clock_; }
  // Op slots currently live (tests).
  uint32_t LiveOps() const;

  // Mapping of NCCL's descriptor strings (exposed for tests). 0 = unknown.
  static uint32_t KindFromFunc(const char* func);
  static uint32_t DtypeSizeFromName(const char* datatype);
  static uint32_t DtypeSizeSlow(const char* datatype);

 private:
  struct Context;
  struct OpSlot;
  struct ChildSlot;

  OpSlot* AcquireOp(uint64_t now);
  ChildSlot* AcquireChild();
  OpSlot* AsOp(void* p) const;
  ChildSlot* AsChild(void* p) const;
  Context* AsContext(void* p) const;

  ncclResult_t StartOp(Context* ctx, void** handle, const xpu_nccl_event_descr_v5_t* d);
  ncclResult_t StartChild(void** handle, const xpu_nccl_event_descr_v5_t* d);
  // Drops one reference of `op` (generation `gen`); the last one writes.
  void Unref(OpSlot* op, uint32_t gen);
  void Complete(OpSlot* op);

  HookApi api_;
  Stats stats_;
  ClockOffset clock_;
  uint32_t max_ops_;
  uint32_t max_children_;
  int32_t pid_;  // this process: a proxy op of another (PXN) is not ours
  std::unique_ptr<OpSlot[]> ops_;
  std::unique_ptr<ChildSlot[]> children_;
  std::unique_ptr<Context[]> contexts_;
  std::atomic<uint32_t> op_cursor_{0};
  std::atomic<uint32_t> child_cursor_{0};
};

}  // namespace xpu::nccl_profiler

#endif  // XPU_HOOK_NCCL_PROFILER_PROFILER_CORE_H_
