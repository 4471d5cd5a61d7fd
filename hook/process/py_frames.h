// hook/process/py_frames.h — reading the calling thread's own Python frames
// without the GIL, by memory layout, for the call sites of sampled launches
// (py_callsite.h).
//
// Why this is safe: PyTorch (like most extensions) releases the GIL before it
// launches GPU work. A thread inside such a C call still owns its frame
// chain, and nobody else mutates it until the thread returns to Python: the
// frames are executing, so they keep their code objects alive, and code
// objects, their name strings and line tables are immutable. The walk reads
// only those; it never touches a reference count, calls no CPython function
// and allocates nothing, so it is also safe with the GIL held.
//
// What must match: the layouts of the thread state, the frame, the code
// object, str and bytes, which change between minor versions. The table
// below holds them for CPython 3.10-3.13 (x86-64 and aarch64, LP64; generated
// with offsetof against each version's internal headers), chosen by the
// running interpreter's Py_GetVersion(); 3.13's are also checked against the
// _Py_DebugOffsets the interpreter exports in _PyRuntime. Before the walk is
// used, PyFramesSelfTest() compares it, frame by frame, with what the C API
// says about the current stack (code object, line, qualified name and file
// name); anything unknown or any mismatch leaves it off.
//
// Every frame's code object is checked to be a code object (ob_type ==
// &PyCode_Type) before anything else of it is read; a frame that fails the
// check ends the walk.
//
// Thread-safety: Walk and Name read the calling thread's frames only; the
// layout is set once (SelfTest, with the GIL held) before any reader sees it
// (release/acquire of the pointer in py_callsite.cc).
#ifndef XPU_HOOK_PROCESS_PY_FRAMES_H_
#define XPU_HOOK_PROCESS_PY_FRAMES_H_

#include <cstddef>
#include <cstdint>

namespace xpu::hook {

struct PyLayout {
  int minor = 0;  // 3.minor
  // Thread state -> current frame: 3.10 tstate->frame (PyFrameObject*);
  // 3.11/3.12 tstate->cframe->current_frame; 3.13 tstate->current_frame.
  uint32_t ts_frame = 0;
  int32_t cframe_current = -1;  // offset in _PyCFrame, -1 = no cframe
  // Frame: code object, caller, instruction (3.10: int f_lasti in code
  // units; 3.11+: pointer to the current instruction), owner (3.11+).
  uint32_t fr_code = 0;
  uint32_t fr_back = 0;
  uint32_t fr_instr = 0;
  int32_t fr_owner = -1;
  bool instr_is_pointer = false;
  // Code object.
  uint32_t co_filename = 0, co_name = 0, co_firstlineno = 0, co_linetable = 0;
  int32_t co_qualname = -1;      // -1: none (3.10)
  uint32_t co_code_adaptive = 0;  // start of the bytecode (3.11+)
  // str (PyASCIIObject / PyCompactUnicodeObject) and bytes.
  uint32_t u_length = 0, u_state = 0, u_ascii_size = 0, u_compact_size = 0;
  uint32_t u_utf8_length = 0, u_utf8 = 0;
  uint32_t b_size = 0, b_sval = 0;
  uint32_t ob_type = 8;
  const void* code_type = nullptr;  // &PyCode_Type of the running interpreter
};

// The built-in layout of CPython 3.`minor` (10..13); false for another one.
bool PyLayoutForVersion(int minor, PyLayout* out);

// 3.13+: checks `layout` against the interpreter's _Py_DebugOffsets (the
// `_PyRuntime` symbol, whose first bytes they are). True when they agree or
// the interpreter has none (before 3.13).
bool PyLayoutMatchesDebugOffsets(const PyLayout& layout, const void* py_runtime);

// One frame of the calling thread, as read without the GIL.
struct RawFrame {
  const void* code = nullptr;
  int32_t lasti = 0;  // instruction offset in code units (-1: not started)
  int32_t firstlineno = 0;
  const void* qualname = nullptr;  // str objects (identity, for the cache key)
  const void* filename = nullptr;
};

// Walks at most `depth` frames of `tstate` (the calling thread's own,
// PyGILState_GetThisThreadState), innermost first, skipping the interpreter's
// C-stack shim frames. Returns how many were read.
uint32_t WalkRawFrames(const PyLayout& l, const void* tstate, uint32_t depth, RawFrame* out);

// Before the layout is trusted: walks like WalkRawFrames but reads every
// word through process_vm_readv (a bad pointer fails the read instead of
// faulting) and checks that each frame's code object is a code object, its
// name and file name str objects, its line table a bytes object of sane size
// (`str_type`, `bytes_type`: &PyUnicode_Type, &PyBytes_Type). True when the
// chain and every object on it look right. System calls: self-test only.
bool ProbeRawFrames(const PyLayout& l, const void* tstate, uint32_t depth, const void* str_type,
                    const void* bytes_type);

// Source line of a frame (PyCode_Addr2Line on the frame's code line table).
int RawFrameLine(const PyLayout& l, const RawFrame& f);

// Appends the UTF-8 text of str object `s` to buf[*len..cap). Returns 1 when
// appended, 0 when `s` is not a compact str (nothing appended), -1 when it
// does not fit (nothing appended).
int AppendPyStr(const PyLayout& l, const void* s, char* buf, size_t cap, size_t* len);

}  // namespace xpu::hook

#endif  // XPU_HOOK_PROCESS_PY_FRAMES_H_
