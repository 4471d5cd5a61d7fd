// hook/interposers/nccl_plugin_join.h — the NCCL interposer's half of the NCCL
// profiler plugin (hook/nccl_profiler/): the thread-local issue list that the
// plugin joins its events against, and whether the plugin times collectives.
// The C side for the plugin is include/xpu/hook_nccl_api.h; the protocol is
// described there and in docs/timing-policy.md.
//
// Launch-path rules of core_api.h apply: no allocation, lock, syscall or
// logging. Thread-safety: the issue list is thread-local (NCCL starts the
// plugin's coll/p2p events on the issuing thread); the "plugin attached" flag
// is a process-wide relaxed atomic, set once and never cleared.
#ifndef XPU_HOOK_INTERPOSERS_NCCL_PLUGIN_JOIN_H_
#define XPU_HOOK_INTERPOSERS_NCCL_PLUGIN_JOIN_H_

#include <cstdint>

namespace xpu::hook {

// One collective / p2p call, as the interposer numbered it.
struct NcclIssuedOp {
  uint32_t sig_id = 0;
  uint32_t seq = 0;
  uint64_t comm_id = 0;
  uint64_t launch_ns = 0;  // 0 while enqueued in a group
  uint64_t bytes = 0;      // count x element size (0 if the type is unknown)
  uint64_t count = 0;
  uint16_t kind = 0;    // xpu_op_kind
  uint16_t stream = 0;  // StreamIndex
  int32_t peer = -1;    // root / p2p peer, -1 none
  int32_t rank = -1;
  int32_t nranks = 0;
  bool claimed = false;
};

// Entries per thread; more ops in one group than this are not joinable
// (counted as XPU_CNT_PENDING_FULL by the caller) and fall back to the
// interposer's own timing.
constexpr uint32_t kMaxIssuedOps = 128;

// True once a plugin attached (xpu_nccl_plugin_attach returned 1).
bool NcclPluginAttached();
// True when an attached plugin times collectives of `kind`: the interposer
// then asks the core for a non-timing completion event only.
bool NcclPluginTimes(uint32_t kind);

// Appends `op` to the calling thread's issue list. False when full.
bool NcclIssuePush(const NcclIssuedOp& op);
// Sets launch_ns of every entry still at 0 (the outermost ncclGroupEnd).
void NcclIssueSetLaunch(uint64_t launch_ns);
// Empties the calling thread's list (the call that issued them returned).
void NcclIssueClear();
// Whether entry `i` (push order) of the calling thread's list was claimed by
// the plugin; false for an index past the end.
bool NcclIssueClaimed(uint32_t i);

// For tests of the layer: whether to pretend that a plugin attached.
void NcclPluginSetAttachedForTest(bool attached);

}  // namespace xpu::hook

#endif  // XPU_HOOK_INTERPOSERS_NCCL_PLUGIN_JOIN_H_
