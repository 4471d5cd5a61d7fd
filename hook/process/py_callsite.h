// hook/process/py_callsite.h — Python call stacks on sampled GEMM and
// collective launches (record.h, XPU_OP_PY_CALLSITE).
//
// When the sampler picks a cuBLAS/cuBLASLt GEMM or an NCCL collective / p2p
// launch, the layer asks for the launching thread's Python stack: at most
// XPU_PY_STACK_DEPTH frames, hashed and looked up in a process-wide lock-free
// cache (hash -> sig_id). On a miss the stack is named "qualname@file:line;..."
// (innermost first, exactly as xputimer.callsite_sig() names it) in a
// fixed-size stack buffer and interned as an XPU_OP_PY_CALLSITE signature.
// The layer then writes a zero-length link record that carries the launch's
// (sig_id, seq, stream).
//
// Two walks:
//  * Without the GIL (PyTorch releases it before launching): the thread's
//    own frames read by memory layout (py_frames.h), on once
//    PyFramesSelfTest() validated the layout of the running interpreter. No
//    CPython call, no reference count touched, nothing allocated; the cache
//    key includes each frame's code object, instruction, qualified name,
//    file name and first line, so that a code object freed and replaced at
//    the same address cannot be given a stale name (nothing is pinned).
//  * With the GIL held and the GIL-free walk off: through the C API, as
//    below.
// A thread without Python frames gets no stack, except PyTorch's autograd
// threads (thread name "pt_autograd_*"), whose backward kernels get the
// one-frame stack "backward, forward call site unknown@<autograd>:0":
// PyTorch does not expose a cheap link from a backward kernel to the
// forward op's Python line.
//
// Launch-path rules (core_api.h) and the one accepted exception: the C-API
// walk calls CPython, only with the GIL held by this thread, and only for
// sampled launches. With the GIL held those calls are what any C
// extension may do; they can allocate (frame objects are created lazily by
// CPython 3.11+) and, on a cache miss, look up co_qualname / co_filename.
// The hook's own code allocates nothing, takes no lock, makes no system call
// and never logs. Like any allocation by an extension, CPython's may run the
// garbage collector (synchronously up to 3.11), hence Python finalizers, on
// this thread: any CUDA call they make passes through the layer's
// reentrancy guard untraced, and an exception raised by the walk is cleared.
// Without the GIL and without the GIL-free walk, a thread costs
// Py_IsInitialized plus PyGILState_Check (a TLS read) and gets no stack: the
// hook never takes the GIL and never reads another thread's frames.
//
// Symbols: resolved with dlsym(RTLD_DEFAULT) outside the launch path — at
// hook initialisation (a python binary links libpython statically or as a
// DT_NEEDED library, so its symbols are visible then) and again, at most
// once per kRetryNs while unresolved, when the Python package calls the C API
// (xpu_hook_api_version at import, xpu_intern_host_signature). If any
// required symbol is missing the feature stays off.
//
// Cache invariant: a cached stack pins its code objects (Py_IncRef, never
// released), so a code object's address in a cached key can never be reused
// by another code object; the cache is bounded (kCacheSlots stacks). Two
// different stacks with the same 64-bit hash would share a name (as for
// signatures, signatures.h): accepted.
//
// Thread-safety: everything is callable from any thread; the walk itself is
// serialised by the GIL.
#ifndef XPU_HOOK_PROCESS_PY_CALLSITE_H_
#define XPU_HOOK_PROCESS_PY_CALLSITE_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace xpu::hook {

// The CPython functions the walker uses (opaque PyObject* as void*). All
// are part of the C API of CPython 3.9+ (PyFrame_GetBack, PyFrame_GetCode
// since 3.9); `thread_state_unchecked` is _PyThreadState_UncheckedGet (3.5+)
// or PyThreadState_GetUnchecked (3.13+).
struct PyApi {
  int (*is_initialized)() = nullptr;                 // Py_IsInitialized
  int (*gil_check)() = nullptr;                      // PyGILState_Check
  void* (*gilstate_this_thread)() = nullptr;         // PyGILState_GetThisThreadState
  void* (*thread_state_unchecked)() = nullptr;       // see above
  void* (*eval_get_frame)() = nullptr;               // PyEval_GetFrame: borrowed (optional)
  void* (*thread_state_get_frame)(void*) = nullptr;  // PyThreadState_GetFrame: new ref
  void* (*frame_get_code)(void*) = nullptr;          // new ref
  void* (*frame_get_back)(void*) = nullptr;          // new ref or nullptr
  int (*frame_get_line)(void*) = nullptr;            // PyFrame_GetLineNumber
  void (*inc_ref)(void*) = nullptr;                  // Py_IncRef
  void (*dec_ref)(void*) = nullptr;                  // Py_DecRef
  void* (*get_attr)(void*, const char*) = nullptr;   // PyObject_GetAttrString: new ref
  const char* (*utf8)(void*, ssize_t*) = nullptr;    // PyUnicode_AsUTF8AndSize
  void* (*err_occurred)() = nullptr;                 // PyErr_Occurred
  void (*err_clear)() = nullptr;                     // PyErr_Clear
  // For the walk without the GIL (py_frames.h); optional.
  const char* (*get_version)() = nullptr;  // Py_GetVersion
  int (*is_finalizing)() = nullptr;        // Py_IsFinalizing (3.13) / _Py_IsFinalizing
  const void* code_type = nullptr;         // &PyCode_Type
  const void* str_type = nullptr;          // &PyUnicode_Type
  const void* bytes_type = nullptr;        // &PyBytes_Type
  const void* py_runtime = nullptr;        // &_PyRuntime (3.13: _Py_DebugOffsets first)

  // Every required pointer is set (eval_get_frame may stand in for
  // thread_state_get_frame and vice versa).
  bool Complete() const;
};

// Frames walked at most (XPU_PY_STACK_DEPTH is clamped to it).
inline constexpr uint32_t kMaxPyStackDepth = 64;
// Longest stack name; frames that do not fit are dropped, outermost first.
inline constexpr size_t kMaxPyStackName = 4096;

// XPU_PY_STACK_DEPTH (0 disables). Called by InitRuntime, before any launch.
void ConfigurePyCallsites(uint32_t depth);

// Looks the C API up once it is loaded; cheap (one acquire load) once
// resolved or disabled. At most one dlsym attempt per kRetryNs while the
// symbols are missing. Never on the launch path.
void MaybeResolvePyApi(uint64_t now_ns);

// True once the symbols are resolved and depth > 0.
bool PyCallsitesOn();

// With the GIL held (the Python package calls it through ctypes.PyDLL at
// import): checks the GIL-free frame walk of this interpreter version
// (py_frames.h) against the C API on the current stack and, when every frame
// agrees, turns it on for all threads. Returns 1 when on, 0 when off
// (unknown version, layout mismatch, or call sites off).
int PyFramesSelfTest();
// True when launches read their thread's frames without the GIL.
bool PyFramesGilFree();

// CapturePyCallsite() and EmitCallsiteLink() are declared in core_api.h (the
// layers' interface); they are defined in py_callsite.cc.

namespace testing {
// Installs `api` (nullptr: off) and resets the cache and the GIL-free walk.
// The api object must outlive its use. Not thread-safe against concurrent
// captures.
void SetPyApiForTest(const PyApi* api, uint32_t depth);
// Entries currently in the stack cache.
uint32_t PyCallsiteCacheSize();
}  // namespace testing

}  // namespace xpu::hook

#endif  // XPU_HOOK_PROCESS_PY_CALLSITE_H_
