// hook/core_api.h — the hook core as the interposers see it: the one interface
// between the interposition layers (hook/interposers/: cudart.cc, driver.cc,
// cublas.cc, cublaslt.cc, nccl.cc) and the core (hook/ring/, hook/tracing/,
// hook/process/). The layers use nothing else of the core (except
// nccl_plugin_join.cc, which reads the timing policy through a weak reference
// to GetRuntime), which is why their unit tests can link them against a
// recording double of this header instead (interposers/fake_core_for_test.h).
//
// Where each declaration is implemented:
//   ResolveReal (XPU_REAL_FN caches it)  hook/process/real_symbols.cc
//   ReentrancyGuard, Active, Count, InternSignature, StreamIndex,
//   EmitHostInterval, KernelSampleEvery,
//   EnsureStarted                        hook/process/runtime.cc
//   NowNs                                hook/tracing/gpu_clock.cc
//   OpHandle, BeginGpuOp, EndGpuOp       hook/tracing/gpu_op.cc
//   CapturePyCallsite, EmitCallsiteLink  hook/process/py_callsite.cc
//
// Rules for every function here (they run on the application's launch path):
// no heap allocation, no lock, no syscall (the vDSO clock read excepted), no
// dlsym, no logging, never throws, never blocks. A failure is counted in the
// ring header (xpu_counter) and the caller passes the call through unchanged.
// Thread-safety: every function is safe to call from any thread.
#ifndef XPU_HOOK_CORE_API_H_
#define XPU_HOOK_CORE_API_H_

#include <cstddef>
#include <cstdint>

#include "xpu/record.h"
#include "xpu/ring.h"

namespace xpu::hook {

// Libraries whose real symbols the layers forward to.
enum class Library { kCudart, kCuda, kCublas, kCublasLt, kNccl };

// Resolves the real `name` once (dlsym(RTLD_NEXT), then the already-loaded
// library by soname with RTLD_NOLOAD, for libraries dlopen'ed RTLD_LOCAL, as
// Python extension modules are). Returns nullptr and counts
// XPU_CNT_SYMBOL_MISSING if absent. May call dlsym: call it through the
// REAL_FN cache below so that it runs once per symbol, not per call.
void* ResolveReal(Library lib, const char* name);

// Caches the real function pointer in a function-local static.
#define XPU_REAL_FN(lib, fn)                                                                       \
  ([]() -> decltype(&fn) {                                                                         \
    static decltype(&fn) real_ =                                                                   \
        reinterpret_cast<decltype(&fn)>(::xpu::hook::ResolveReal(::xpu::hook::Library::lib, #fn)); \
    return real_;                                                                                  \
  }())

// Thread-local reentrancy guard: the hook's own CUDA calls (event record,
// query, capture check) and nested library calls (cuBLAS launching kernels)
// pass straight through. `entered()` is true for the outermost scope only.
class ReentrancyGuard {
 public:
  ReentrancyGuard();
  ~ReentrancyGuard();
  ReentrancyGuard(const ReentrancyGuard&) = delete;
  ReentrancyGuard& operator=(const ReentrancyGuard&) = delete;
  bool entered() const { return entered_; }

 private:
  bool entered_;
};

// True when the interposers trace: hook initialised, XPU_ENABLE != 0, not a
// forked child, timing policy not "off". Under "off" nothing the interposers
// see is recorded (sync and memcpy host records included); host events from
// the C API (Python side, step markers) still flow. One relaxed atomic load.
bool Active();

// Host clock used in records (CLOCK_REALTIME ns, vDSO).
uint64_t NowNs();

// Interns a signature (all fields but `commit`, name given separately).
// Lock-free lookup on the fast path; the first occurrence publishes it into
// the ring file's signature table. Returns sig_id >= 1, or 0 when the table
// is full (counted).
uint32_t InternSignature(const xpu_signature_v1& sig, const char* name, size_t name_len);

// Interned index of a CUDA stream (cudaStream_t passed as void*), 0 for the
// legacy default stream; saturates at 65535.
uint16_t StreamIndex(const void* stream);

// A traced asynchronous GPU op, between the two calls below.
struct OpHandle {
  // Nonzero when the op goes to the completion thread (an opaque id);
  // 0 = not tracked.
  uint32_t slot = 0;
  uint32_t sig_id = 0;
  uint64_t launch_ns = 0;  // CPU launch time
  // For ops that could not be tracked (runtime not ready, no lane):
  // EndGpuOp still writes a CPU-side record with XPU_REC_UNTRACKED so counts
  // and sequence numbers stay complete.
  uint32_t seq = 0;
  uint16_t stream = 0;
  uint8_t untracked = 0;
  // The per-signature sampler picked this occurrence (XPU_SAMPLE_FIRST /
  // XPU_SAMPLE_EVERY), whatever the timing policy and whether or not the
  // core times it: such launches get a Python call site (EmitCallsiteLink).
  uint8_t picked = 0;
  // The caller may set this before EndGpuOp: the op needs its own completion
  // marker (a collective that the NCCL profiler plugin was expected to time
  // but did not claim).
  uint8_t want_marker = 0;
  // Core-private from here on.
  int8_t device = -1;
  uint16_t flags = 0;       // XPU_REC_* decided at launch
  uint32_t ev_start = 0;    // timing events (EventPool handles), 0 = untimed
  uint32_t ev_end = 0;
  uint32_t hold = 0;        // stream hold (stream_hold.h), 0 = none
  uint16_t calib_gen = 0;
};

// Before the real call: decides (per signature sampler, per policy) whether
// to time this occurrence; a timed one takes two events from the pool, holds
// the stream (stream_hold.h) and records the start event on `stream`. An
// untimed op makes no CUDA call here. `seq` is the record's seq field
// (per-communicator sequence for collectives; 0 lets the core use the
// per-stream launch count). Never fails visibly: on any shortage the op is
// recorded without GPU observation and the shortage is counted.
OpHandle BeginGpuOp(uint32_t sig_id, const void* stream, uint32_t seq, uint16_t extra_flags);

// After the real call returned `status` (0 = success): a timed op records
// its end event and releases its hold; an untimed op records a completion
// marker when one is due on this stream for this thread (one per
// XPU_MARKER_US, docs/timing-policy.md); then the op is handed to the
// completion thread, which writes its record once the GPU is known to have
// finished it. On failure a record with XPU_REC_CALL_FAILED is written.
void EndGpuOp(const OpHandle& op, const void* stream, int status);

// A host synchronization returned successfully on this thread: every op this
// thread launched earlier on `stream` (all streams of the current device
// when `all_streams`) is complete. Cheap; called by the sync interposers.
void NoteHostSync(const void* stream, bool all_streams);

// Stream capture began (+1) or ended (-1) through an interposed entry point.
// While any capture is active every traced launch checks its stream's
// capture status (XPU_REC_GRAPH_CAPTURE); otherwise only launches that
// record an event do.
void NoteCapture(int delta);

// sig_id (XPU_OP_PY_CALLSITE, record.h) of the calling thread's Python
// stack, or 0: feature off (XPU_PY_STACK_DEPTH=0, no Python in the process),
// this thread does not hold the GIL, no Python frame, or not internable.
// Call it only for launches the sampler picked (OpHandle::picked): it walks
// Python frames through the CPython C API (py_callsite.h says what that may
// cost and why it is allowed here).
uint32_t CapturePyCallsite();

// Writes the zero-length link record that ties `stack_sig` to the launch
// `op` (its sig_id, seq and stream; record.h, XPU_OP_PY_CALLSITE). Does
// nothing when stack_sig or op.sig_id is 0 or op is not picked.
void EmitCallsiteLink(const OpHandle& op, uint32_t stack_sig);

// Host-side interval (sync APIs, Python events): written directly.
void EmitHostInterval(uint32_t sig_id, uint64_t start_ns, uint64_t end_ns, uint32_t value,
                      uint16_t flags);

// Bumps a ring header counter (relaxed).
void Count(xpu_counter counter, uint64_t n = 1);

// XPU_KERNEL_SAMPLE_EVERY: trace every Nth plain kernel launch per thread
// (0 = count plain launches only, never trace them). One relaxed load.
uint32_t KernelSampleEvery();

// Runs the once-only lazy initialisation of the background thread (daemon
// connection, completion polling, clock calibration). Cheap after the first
// call: one acquire load.
void EnsureStarted();

}  // namespace xpu::hook

#endif  // XPU_HOOK_CORE_API_H_
