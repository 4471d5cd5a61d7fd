// hook/process/fake_python_for_test.h — a test double of the few CPython C API
// functions that py_callsite.cc calls (PyApi): frames, code objects and
// strings with reference counts, a GIL held by one thread, an error
// indicator, and counters of what was called. Lets the hook's unit tests
// check the stack walk (names, depth, GIL rules, reference balance, caching)
// without an interpreter. The fake functions allocate nothing.
// Test-only. Thread-safety: the GIL owner is atomic; everything else is
// meant to be touched by the thread that "holds the GIL".
#ifndef XPU_HOOK_PROCESS_FAKE_PYTHON_FOR_TEST_H_
#define XPU_HOOK_PROCESS_FAKE_PYTHON_FOR_TEST_H_

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstring>
#include <string>

#include "hook/process/py_callsite.h"

namespace xpu::hook::testing {

struct FakePyObject {
  int refs = 1;  // the "interpreter's" own reference
};
struct FakePyStr : FakePyObject {
  std::string text;
  bool valid_utf8 = true;
};
struct FakePyCode : FakePyObject {
  FakePyStr qualname, name, filename;
};
struct FakePyFrame : FakePyObject {
  FakePyCode* code = nullptr;
  int line = 0;
  FakePyFrame* back = nullptr;
};

struct FakePython {
  bool initialized = true;
  std::atomic<pthread_t> gil_owner{};
  std::atomic<bool> gil_held{false};
  bool has_qualname = true;        // co_qualname exists (3.11+)
  bool error_set = false;          // the error indicator
  bool back_fails = false;         // PyFrame_GetBack raises MemoryError
  FakePyFrame* current = nullptr;  // this thread's innermost frame
  int tstate_token = 0;            // its address is the thread state
  // What was called.
  int frame_walks = 0;  // eval_get_frame / thread_state_get_frame
  int get_attrs = 0;
  int err_clears = 0;
  int incs = 0;

  void AcquireGil() {
    gil_owner.store(pthread_self());
    gil_held.store(true);
  }
  void ReleaseGil() { gil_held.store(false); }
  bool ThisThreadHoldsGil() const {
    return gil_held.load() && pthread_equal(gil_owner.load(), pthread_self());
  }
};

inline FakePython& Py() {
  static FakePython* p = new FakePython();
  return *p;
}

inline void InitCode(FakePyCode* c, const std::string& qualname, const std::string& name,
                     const std::string& file) {
  c->qualname.text = qualname;
  c->name.text = name;
  c->filename.text = file;
}

// Links frames[0] (innermost) -> frames[n-1] (outermost).
inline void LinkFrames(FakePyFrame* frames, int n) {
  for (int i = 0; i + 1 < n; ++i) frames[i].back = &frames[i + 1];
  if (n > 0) frames[n - 1].back = nullptr;
}

namespace fake_py {

inline FakePyObject* Obj(void* p) { return static_cast<FakePyObject*>(p); }
inline int IsInitialized() { return Py().initialized ? 1 : 0; }
// Like CPython's: 1 for the thread holding the GIL.
inline int GilCheck() { return Py().ThisThreadHoldsGil() ? 1 : 0; }
inline void* ThisThreadState() {
  // Every thread that ever held the GIL has this one thread state in the
  // fake; what matters is that it is non-null only for Python threads.
  return Py().ThisThreadHoldsGil() ? static_cast<void*>(&Py().tstate_token) : nullptr;
}
inline void* UncheckedThreadState() {
  return Py().ThisThreadHoldsGil() ? static_cast<void*>(&Py().tstate_token) : nullptr;
}
inline void* EvalGetFrame() {  // borrowed
  ++Py().frame_walks;
  return Py().current;
}
inline void* ThreadStateGetFrame(void*) {  // new reference
  ++Py().frame_walks;
  if (Py().current != nullptr) ++Py().current->refs;
  return Py().current;
}
inline void* FrameGetCode(void* f) {
  FakePyCode* c = static_cast<FakePyFrame*>(f)->code;
  ++c->refs;
  return c;
}
inline void* FrameGetBack(void* f) {
  if (Py().back_fails) {
    Py().error_set = true;
    return nullptr;
  }
  FakePyFrame* b = static_cast<FakePyFrame*>(f)->back;
  if (b != nullptr) ++b->refs;
  return b;
}
inline int FrameGetLine(void* f) { return static_cast<FakePyFrame*>(f)->line; }
inline void IncRef(void* o) {
  ++Py().incs;
  ++Obj(o)->refs;
}
inline void DecRef(void* o) { --Obj(o)->refs; }
inline void* GetAttr(void* o, const char* name) {
  ++Py().get_attrs;
  auto* c = static_cast<FakePyCode*>(o);
  FakePyStr* s = nullptr;
  if (std::strcmp(name, "co_qualname") == 0 && Py().has_qualname) s = &c->qualname;
  if (std::strcmp(name, "co_name") == 0) s = &c->name;
  if (std::strcmp(name, "co_filename") == 0) s = &c->filename;
  if (s == nullptr) {
    Py().error_set = true;  // AttributeError
    return nullptr;
  }
  ++s->refs;
  return s;
}
inline const char* Utf8(void* o, ssize_t* n) {
  auto* s = static_cast<FakePyStr*>(o);
  if (!s->valid_utf8) {
    Py().error_set = true;  // UnicodeEncodeError
    return nullptr;
  }
  *n = static_cast<ssize_t>(s->text.size());
  return s->text.data();
}
inline void* ErrOccurred() { return Py().error_set ? static_cast<void*>(&Py()) : nullptr; }
inline void ErrClear() {
  ++Py().err_clears;
  Py().error_set = false;
}

}  // namespace fake_py

// The fake as a PyApi; `borrowed_frame` picks PyEval_GetFrame (3.9-3.12)
// over PyThreadState_GetFrame (new reference).
inline PyApi FakePyApi(bool borrowed_frame = true) {
  PyApi a;
  a.is_initialized = &fake_py::IsInitialized;
  a.gil_check = &fake_py::GilCheck;
  a.gilstate_this_thread = &fake_py::ThisThreadState;
  a.thread_state_unchecked = &fake_py::UncheckedThreadState;
  a.eval_get_frame = borrowed_frame ? &fake_py::EvalGetFrame : nullptr;
  a.thread_state_get_frame = &fake_py::ThreadStateGetFrame;
  a.frame_get_code = &fake_py::FrameGetCode;
  a.frame_get_back = &fake_py::FrameGetBack;
  a.frame_get_line = &fake_py::FrameGetLine;
  a.inc_ref = &fake_py::IncRef;
  a.dec_ref = &fake_py::DecRef;
  a.get_attr = &fake_py::GetAttr;
  a.utf8 = &fake_py::Utf8;
  a.err_occurred = &fake_py::ErrOccurred;
  a.err_clear = &fake_py::ErrClear;
  return a;
}

}  // namespace xpu::hook::testing

#endif  // XPU_HOOK_PROCESS_FAKE_PYTHON_FOR_TEST_H_
