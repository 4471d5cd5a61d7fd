// hook/hook_api.cc — the exported C API of include/xpu/hook_api.h, for the
// Python package, the NCCL profiler plugin and custom operators. Each
// function is safe before initialisation, after shutdown and in a forked
// child (it then does nothing and returns 0 / -1). Thread-safety: any thread.
#include <cstring>

#include "hook/core_api.h"
#include "hook/process/py_callsite.h"
#include "hook/process/runtime.h"
#include "xpu/hook_api.h"

#define XPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace xpu::hook {
// Defined by the NCCL layer (comm_registry.cc). Weak so that the core
// library links without the layers (unit tests); absent means "unknown".
uint32_t CommLastSeq(const void* comm) __attribute__((weak));
uint64_t CommId(const void* comm) __attribute__((weak));
}  // namespace xpu::hook

namespace {

using namespace xpu::hook;  // NOLINT: this file is only the C shim

bool IsHostKind(uint32_t kind) {
  return (kind >= XPU_OP_PY_GC && kind < 96) ||
         (kind >= XPU_OP_SYNC_STREAM && kind <= XPU_OP_SYNC_EVENT);
}

}  // namespace

// The Python package calls these two first (at import, then once per
// signature): a process that loaded libpython after the hook initialised gets
// its call-site symbols resolved here (py_callsite.h), off the launch path.
XPU_EXPORT int xpu_hook_api_version(void) {
  MaybeResolvePyApi(NowNs());
  return XPU_HOOK_API_VERSION;
}

// Called by the Python package with the GIL held (ctypes.PyDLL), at import:
// validates and turns on the GIL-free Python call-site walk (py_callsite.h).
XPU_EXPORT int xpu_py_frames_selftest(void) { return PyFramesSelfTest(); }

XPU_EXPORT int xpu_is_enabled(void) { return HostActive() ? 1 : 0; }

XPU_EXPORT int xpu_set_enabled(int enabled) {
  if (GetRuntime() == nullptr) return 0;
  return SetEnabled(enabled != 0) ? 1 : 0;
}

XPU_EXPORT uint64_t xpu_now_ns(void) { return NowNs(); }

XPU_EXPORT uint32_t xpu_intern_host_signature(uint32_t kind, const char* name, uint32_t len,
                                              int32_t aux) {
  if (!HostActive() || !IsHostKind(kind)) return 0;
  MaybeResolvePyApi(NowNs());
  xpu_signature_v1 sig;
  memset(&sig, 0, sizeof(sig));
  sig.kind = static_cast<uint16_t>(kind);
  sig.comm_rank = -1;
  sig.peer = aux;  // e.g. the GC generation (hook_api.h)
  sig.device = -1;
  return InternSignature(sig, name, name != nullptr ? len : 0);
}

XPU_EXPORT uint32_t xpu_intern_signature(const xpu_signature_v1* sig, const char* name,
                                         uint32_t len) {
  if (!HostActive() || sig == nullptr) return 0;
  return InternSignature(*sig, name, name != nullptr ? len : 0);
}

XPU_EXPORT int xpu_emit_host_event(uint32_t sig_id, uint64_t start_ns, uint64_t end_ns,
                                   uint32_t value, uint32_t flags) {
  if (!HostActive() || sig_id == 0) return -1;
  Count(XPU_CNT_PY_EVENTS);
  return EmitHostRecord(sig_id, start_ns, end_ns, value, static_cast<uint16_t>(flags)) ? 0 : -1;
}

XPU_EXPORT int xpu_emit_record(const xpu_record_v1* rec) {
  if (!HostActive() || rec == nullptr) return -1;
  Count(XPU_CNT_PLUGIN_EVENTS);
  // The NCCL profiler plugin writes a collective's timing record once NCCL
  // reported its kernel finished: that also completes the interposer's
  // record of the op and every earlier op of its thread on its stream
  // (completion_tracker.h).
  if ((rec->flags & XPU_REC_PLUGIN) != 0) {
    if (Runtime* rt = GetRuntime()) {
      PluginNotice n;
      n.ns = NowNs();
      n.sig_id = rec->sig_id;
      n.seq = rec->seq;
      n.stream = rec->stream;
      rt->tracker.PushNotice(n);  // full: the next marker completes it
    }
  }
  return WriteRecord(*rec) ? 0 : -1;
}

XPU_EXPORT int xpu_mark_step(uint64_t step, uint64_t start_ns, uint64_t end_ns) {
  if (!HostActive()) return -1;
  // One signature for all steps; the step id travels in record.seq.
  static std::atomic<uint32_t> step_sig{0};
  uint32_t sig = step_sig.load(std::memory_order_acquire);
  if (sig == 0) {
    static const char kName[] = "step";
    sig = xpu_intern_host_signature(XPU_OP_STEP, kName, sizeof(kName) - 1, -1);
    if (sig == 0) return -1;
    step_sig.store(sig, std::memory_order_release);
  }
  return xpu_emit_host_event(sig, start_ns, end_ns, static_cast<uint32_t>(step), 0);
}

XPU_EXPORT uint32_t xpu_comm_last_seq(const void* comm) {
  return (&CommLastSeq != nullptr && comm != nullptr) ? CommLastSeq(comm) : 0;
}

XPU_EXPORT uint64_t xpu_comm_id(const void* comm) {
  return (&CommId != nullptr && comm != nullptr) ? CommId(comm) : 0;
}
