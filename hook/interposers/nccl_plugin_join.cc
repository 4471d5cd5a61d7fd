// hook/interposers/nccl_plugin_join.cc — the NCCL interposer's half of the NCCL
// profiler plugin: the thread-local issue list (nccl_plugin_join.h), the
// plugin-facing C API (include/xpu/hook_nccl_api.h), and pointing NCCL at the
// plugin (NCCL_PROFILER_PLUGIN) when the library loads. It belongs to the NCCL
// interposition layer: built into libxpu_hook.so and into the layers' unit
// tests with the other interposers (hook/interposers/CMakeLists.txt).
//
// Thread-safety: see nccl_plugin_join.h. The constructor runs single-threaded
// in the loader.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "hook/core_api.h"
#include "hook/interposers/nccl_plugin_join.h"
#include "hook/process/runtime.h"
#include "xpu/hook_nccl_api.h"
#include "xpu/record.h"

#define XPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace xpu::hook {

// Weak: the layers' unit tests link this file without the core; no runtime
// then means "no plugin".
Runtime* GetRuntime() __attribute__((weak));

namespace {

std::atomic<bool> g_attached{false};

// Trivially constructible: zero-initialised per thread, no TLS init guard.
struct IssueList {
  uint32_t n;
  NcclIssuedOp ops[kMaxIssuedOps];
};
__attribute__((tls_model("initial-exec"))) thread_local IssueList t_issue;

bool IsRooted(uint32_t kind) {
  return kind == XPU_OP_BROADCAST || kind == XPU_OP_REDUCE || kind == XPU_OP_GATHER ||
         kind == XPU_OP_SCATTER;
}

// The file name NCCL looks for: NCCL_PROFILER_PLUGIN may name a path.
constexpr char kPluginFile[] = "libnccl-profiler-xpu.so";

// Points NCCL at the plugin installed next to libxpu_hook.so, unless the
// user chose a plugin (or "none") already. NCCL reads the variable at its
// first communicator init, long after this runs.
__attribute__((constructor)) void SetProfilerPluginEnv() {
  if (getenv("NCCL_PROFILER_PLUGIN") != nullptr) return;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&SetProfilerPluginEnv), &info) == 0 ||
      info.dli_fname == nullptr) {
    return;
  }
  std::string dir = info.dli_fname;
  const size_t slash = dir.rfind('/');
  dir = slash == std::string::npos ? std::string(".") : dir.substr(0, slash);
  const std::string path = dir + "/" + kPluginFile;
  if (access(path.c_str(), R_OK) == 0) setenv("NCCL_PROFILER_PLUGIN", path.c_str(), 0);
}

}  // namespace

bool NcclPluginAttached() { return g_attached.load(std::memory_order_relaxed); }

bool NcclPluginTimes(uint32_t kind) {
  // The kinds NCCL runs as its own coll/p2p tasks with kernel-channel events.
  // AlltoAll/Gather/Scatter are built from grouped p2p inside NCCL 2.28 and
  // keep the interposer's event timing.
  switch (kind) {
    case XPU_OP_ALLREDUCE:
    case XPU_OP_ALLGATHER:
    case XPU_OP_REDUCESCATTER:
    case XPU_OP_BROADCAST:
    case XPU_OP_REDUCE:
    case XPU_OP_SEND:
    case XPU_OP_RECV:
      return NcclPluginAttached();
    default:
      return false;
  }
}

bool NcclIssuePush(const NcclIssuedOp& op) {
  IssueList& l = t_issue;
  if (l.n >= kMaxIssuedOps) return false;
  l.ops[l.n] = op;
  l.ops[l.n].claimed = false;
  ++l.n;
  return true;
}

void NcclIssueSetLaunch(uint64_t launch_ns) {
  IssueList& l = t_issue;
  for (uint32_t i = 0; i < l.n; ++i) {
    if (l.ops[i].launch_ns == 0) l.ops[i].launch_ns = launch_ns;
  }
}

void NcclIssueClear() { t_issue.n = 0; }

bool NcclIssueClaimed(uint32_t i) { return i < t_issue.n && t_issue.ops[i].claimed; }

void NcclPluginSetAttachedForTest(bool attached) {
  g_attached.store(attached, std::memory_order_relaxed);
}

}  // namespace xpu::hook

XPU_EXPORT int xpu_nccl_plugin_attach(uint32_t plugin_api_version) {
  using namespace xpu::hook;  // NOLINT: C shim
  if (plugin_api_version != XPU_NCCL_PLUGIN_API_VERSION) return 0;
  Runtime* rt = (&GetRuntime != nullptr) ? GetRuntime() : nullptr;
  if (rt == nullptr || !Active() || rt->config.timing != TimingPolicy::kSampled) return 0;
  g_attached.store(true, std::memory_order_relaxed);
  return 1;
}

XPU_EXPORT int xpu_nccl_plugin_times_kind(uint32_t kind) {
  return xpu::hook::NcclPluginTimes(kind) ? 1 : 0;
}

XPU_EXPORT int xpu_nccl_claim_issued_op(const xpu_nccl_issue_query_v1* q,
                                        xpu_nccl_issued_op_v1* out) {
  using xpu::hook::IsRooted;
  if (q == nullptr || out == nullptr) return 0;
  xpu::hook::IssueList& l = xpu::hook::t_issue;
  int matches = 0;
  xpu::hook::NcclIssuedOp* first = nullptr;
  const bool p2p = q->kind == XPU_OP_SEND || q->kind == XPU_OP_RECV;
  for (uint32_t i = 0; i < l.n; ++i) {
    xpu::hook::NcclIssuedOp& e = l.ops[i];
    if (e.claimed || e.kind != q->kind) continue;
    if (q->bytes != 0 && e.bytes != 0 && q->bytes != e.bytes) continue;
    if ((p2p || IsRooted(q->kind)) && q->peer >= 0 && e.peer >= 0 && q->peer != e.peer) continue;
    if (q->rank >= 0 && e.rank >= 0 && q->rank != e.rank) continue;
    if (q->nranks > 0 && e.nranks > 0 && q->nranks != e.nranks) continue;
    if (q->comm_id != 0 && e.comm_id != 0 && q->comm_id != e.comm_id) continue;
    if (first == nullptr) first = &e;
    ++matches;
  }
  if (first == nullptr) return 0;
  first->claimed = true;
  out->sig_id = first->sig_id;
  out->seq = first->seq;
  out->comm_id = first->comm_id;
  out->launch_ns = first->launch_ns;
  out->stream = first->stream;
  out->reserved0 = 0;
  out->reserved1 = 0;
  return matches;
}
