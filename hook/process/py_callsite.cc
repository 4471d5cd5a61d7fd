// hook/process/py_callsite.cc — see py_callsite.h. CapturePyCallsite and
// EmitCallsiteLink run on the launch path of sampled GEMMs and collectives:
// fixed-size buffers only, the cache is a preallocated lock-free table, and
// the only calls out are the CPython functions of PyApi (GIL held) and
// InternSignature / WriteRecord (core_api.h rules).
#include "hook/process/py_callsite.h"

#include <dlfcn.h>
#include <sys/prctl.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "hook/core_api.h"
#include "hook/process/py_frames.h"
#include "hook/process/runtime.h"
#include "xpu/record.h"

namespace xpu::hook {
namespace {

constexpr uint64_t kRetryNs = 10ull * 1000 * 1000 * 1000;  // dlsym retry while Python is absent
constexpr uint32_t kCacheSlots = 4096;                     // stacks cached (power of two)
constexpr uint32_t kMaxProbe = 32;
constexpr uint32_t kFailedSig = UINT32_MAX;  // cached: this stack cannot be interned

// g_resolved is written once, by the thread that wins g_resolving, before
// g_api publishes it (release); readers acquire-load g_api.
PyApi g_resolved;
std::atomic<const PyApi*> g_api{nullptr};
std::atomic<uint32_t> g_depth{0};
std::atomic<uint64_t> g_next_try_ns{0};
std::atomic<bool> g_resolving{false};
// co_qualname exists (CPython >= 3.11): -1 not known yet, 0 no, 1 yes.
std::atomic<int> g_has_qualname{-1};
// The validated layout of the GIL-free walk (py_frames.h), or null: off.
PyLayout g_layout_storage;
std::atomic<const PyLayout*> g_layout{nullptr};
// The stack given to backward kernels of autograd threads (0: not interned).
std::atomic<uint32_t> g_backward_sig{0};
constexpr char kBackwardStack[] = "backward, forward call site unknown@<autograd>:0";
// Per thread: 0 = not looked at, 1 = a PyTorch autograd thread, 2 = another.
__attribute__((tls_model("initial-exec"))) thread_local uint8_t t_thread_kind = 0;

// Stack hash -> sig_id. A slot is claimed with a CAS on `hash` and its sig
// published afterwards (0 = being named by the claimer). Never removed.
struct CacheSlot {
  std::atomic<uint64_t> hash{0};
  std::atomic<uint32_t> sig{0};
};
CacheSlot g_cache[kCacheSlots];

struct Frame {
  void* code;
  int line;
};

template <typename T>
void Sym(T* out, const char* name) {
  *out = reinterpret_cast<T>(dlsym(RTLD_DEFAULT, name));
}

bool ResolveNow(PyApi* a) {
  Sym(&a->is_initialized, "Py_IsInitialized");
  Sym(&a->gil_check, "PyGILState_Check");
  Sym(&a->gilstate_this_thread, "PyGILState_GetThisThreadState");
  Sym(&a->thread_state_unchecked, "PyThreadState_GetUnchecked");  // 3.13+
  if (a->thread_state_unchecked == nullptr) {
    Sym(&a->thread_state_unchecked, "_PyThreadState_UncheckedGet");
  }
  Sym(&a->eval_get_frame, "PyEval_GetFrame");
  Sym(&a->thread_state_get_frame, "PyThreadState_GetFrame");
  Sym(&a->frame_get_code, "PyFrame_GetCode");
  Sym(&a->frame_get_back, "PyFrame_GetBack");
  Sym(&a->frame_get_line, "PyFrame_GetLineNumber");
  Sym(&a->inc_ref, "Py_IncRef");
  Sym(&a->dec_ref, "Py_DecRef");
  Sym(&a->get_attr, "PyObject_GetAttrString");
  Sym(&a->utf8, "PyUnicode_AsUTF8AndSize");
  Sym(&a->err_occurred, "PyErr_Occurred");
  Sym(&a->err_clear, "PyErr_Clear");
  Sym(&a->get_version, "Py_GetVersion");
  Sym(&a->is_finalizing, "Py_IsFinalizing");  // 3.13+
  if (a->is_finalizing == nullptr) Sym(&a->is_finalizing, "_Py_IsFinalizing");
  a->code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
  a->str_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
  a->bytes_type = dlsym(RTLD_DEFAULT, "PyBytes_Type");
  a->py_runtime = dlsym(RTLD_DEFAULT, "_PyRuntime");
  return a->Complete();
}

inline uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

uint64_t HashFrames(const Frame* f, uint32_t n) {
  uint64_t h = Mix(0x9e3779b97f4a7c15ull ^ n);
  for (uint32_t i = 0; i < n; ++i) {
    h = Mix(h ^ reinterpret_cast<uintptr_t>(f[i].code));
    h = Mix(h ^ static_cast<uint32_t>(f[i].line));
  }
  return h != 0 ? h : 1;
}

uint64_t HashRawFrames(const RawFrame* f, uint32_t n) {
  uint64_t h = Mix(0x2545f4914f6cdd1dull ^ n);
  for (uint32_t i = 0; i < n; ++i) {
    h = Mix(h ^ reinterpret_cast<uintptr_t>(f[i].code));
    h = Mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(f[i].lasti)) << 32 |
                 static_cast<uint32_t>(f[i].firstlineno)));
    h = Mix(h ^ reinterpret_cast<uintptr_t>(f[i].qualname));
    h = Mix(h ^ reinterpret_cast<uintptr_t>(f[i].filename));
  }
  return h != 0 ? h : 1;
}

// Innermost first. The current frame is borrowed (PyEval_GetFrame) or a new
// reference (PyThreadState_GetFrame); every PyFrame_GetBack result is a new
// reference. Code pointers stay valid after their references are dropped:
// each frame being walked is executing, and an executing frame holds its
// code object.
uint32_t WalkFrames(const PyApi& api, void* tstate, uint32_t depth, Frame* out) {
  bool owned = api.eval_get_frame == nullptr;
  void* frame = owned ? api.thread_state_get_frame(tstate) : api.eval_get_frame();
  uint32_t n = 0;
  while (frame != nullptr && n < depth) {
    void* code = api.frame_get_code(frame);
    if (code != nullptr) {
      out[n].code = code;
      out[n].line = api.frame_get_line(frame);
      api.dec_ref(code);
      ++n;
    }
    void* back = n < depth ? api.frame_get_back(frame) : nullptr;
    if (owned) api.dec_ref(frame);
    frame = back;
    owned = true;
  }
  if (frame != nullptr && owned) api.dec_ref(frame);
  return n;
}

// Bounded append-only text.
class NameBuf {
 public:
  NameBuf(char* p, size_t cap) : p_(p), cap_(cap) {}
  void Append(const char* s, size_t n) {
    if (n > cap_ - len_) {
      overflow_ = true;
      return;
    }
    std::memcpy(p_ + len_, s, n);
    len_ += n;
  }
  void Append(char c) { Append(&c, 1); }
  void AppendInt(int v) {
    char tmp[16];
    size_t i = sizeof(tmp);
    const bool neg = v < 0;
    uint32_t u = neg ? 0u - static_cast<uint32_t>(v) : static_cast<uint32_t>(v);
    do {
      tmp[--i] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (neg) tmp[--i] = '-';
    Append(tmp + i, sizeof(tmp) - i);
  }
  size_t len() const { return len_; }
  bool overflow() const { return overflow_; }
  void Truncate(size_t len) {
    len_ = len;
    overflow_ = false;
  }
  const char* data() const { return p_; }

 private:
  char* p_;
  size_t cap_;
  size_t len_ = 0;
  bool overflow_ = false;
};

enum class Attr { kOk, kMissing, kNotText };

// Appends str(getattr(obj, name)) when it is a str. Any Python exception
// raised on the way is cleared: none may leak into the interpreter.
Attr AppendAttr(const PyApi& api, void* obj, const char* name, NameBuf* b) {
  void* s = api.get_attr(obj, name);
  if (s == nullptr) {
    api.err_clear();
    return Attr::kMissing;
  }
  ssize_t n = 0;
  const char* p = api.utf8(s, &n);
  Attr r = Attr::kOk;
  if (p == nullptr || n < 0) {
    api.err_clear();
    r = Attr::kNotText;
  } else {
    b->Append(p, static_cast<size_t>(n));  // copied before `s` is released
  }
  api.dec_ref(s);
  return r;
}

// "qualname@filename": what callsite.py's _code_name() builds.
void AppendCodeName(const PyApi& api, void* code, NameBuf* b) {
  const int has_qualname = g_has_qualname.load(std::memory_order_relaxed);
  Attr a = Attr::kMissing;
  if (has_qualname != 0) {
    a = AppendAttr(api, code, "co_qualname", b);
    if (has_qualname < 0 && a != Attr::kNotText) {
      g_has_qualname.store(a == Attr::kOk ? 1 : 0, std::memory_order_relaxed);
    }
  }
  if (a != Attr::kOk && AppendAttr(api, code, "co_name", b) != Attr::kOk) b->Append('?');
  b->Append('@');
  if (AppendAttr(api, code, "co_filename", b) != Attr::kOk) b->Append('?');
}

// Names the stack (frames that do not fit are dropped, outermost first) and
// interns it like xpu_intern_host_signature(XPU_OP_PY_CALLSITE, name, len,
// aux = 0), the call xputimer.callsite_sig() makes. Returns 0 on failure.
uint32_t NameAndIntern(const PyApi& api, const Frame* f, uint32_t n) {
  char buf[kMaxPyStackName];
  NameBuf b(buf, sizeof(buf));
  for (uint32_t i = 0; i < n; ++i) {
    const size_t before = b.len();
    if (i > 0) b.Append(';');
    AppendCodeName(api, f[i].code, &b);
    b.Append(':');
    b.AppendInt(f[i].line);
    if (b.overflow()) {
      b.Truncate(before);
      break;
    }
  }
  if (b.len() == 0) return 0;
  xpu_signature_v1 sig;
  std::memset(&sig, 0, sizeof(sig));
  sig.kind = XPU_OP_PY_CALLSITE;
  sig.comm_rank = -1;
  sig.peer = 0;
  sig.device = -1;
  return InternSignature(sig, b.data(), b.len());
}

// Bounded appends into a fixed buffer; false when it does not fit.
bool Put(char* buf, size_t cap, size_t* len, const char* s, size_t n) {
  if (n > cap - *len) return false;
  std::memcpy(buf + *len, s, n);
  *len += n;
  return true;
}

bool PutStrOrQuestion(const PyLayout& l, const void* str, char* buf, size_t cap, size_t* len) {
  const int r = AppendPyStr(l, str, buf, cap, len);
  return r > 0 || (r == 0 && Put(buf, cap, len, "?", 1));
}

// NameAndIntern for frames read without the GIL: the same name, from the
// objects' memory (py_frames.h).
uint32_t NameAndInternRaw(const PyLayout& l, const RawFrame* f, uint32_t n) {
  char buf[kMaxPyStackName];
  const size_t cap = sizeof(buf);
  size_t len = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const size_t before = len;
    char line[16];
    NameBuf lb(line, sizeof(line));
    lb.AppendInt(RawFrameLine(l, f[i]));
    const bool ok = (i == 0 || Put(buf, cap, &len, ";", 1)) &&
                    PutStrOrQuestion(l, f[i].qualname, buf, cap, &len) &&
                    Put(buf, cap, &len, "@", 1) &&
                    PutStrOrQuestion(l, f[i].filename, buf, cap, &len) &&
                    Put(buf, cap, &len, ":", 1) && Put(buf, cap, &len, line, lb.len());
    if (!ok) {
      len = before;  // frames that do not fit are dropped, outermost first
      break;
    }
  }
  if (len == 0) return 0;
  xpu_signature_v1 sig;
  std::memset(&sig, 0, sizeof(sig));
  sig.kind = XPU_OP_PY_CALLSITE;
  sig.comm_rank = -1;
  sig.peer = 0;
  sig.device = -1;
  return InternSignature(sig, buf, len);
}

// Claims a cache slot for `h`, names and interns the stack, pins its code
// objects. Returns the sig_id (0 when it could not be interned).
uint32_t Lookup(const PyApi& api, uint64_t h, const Frame* f, uint32_t n) {
  uint32_t i = static_cast<uint32_t>(h) & (kCacheSlots - 1);
  for (uint32_t probe = 0; probe < kMaxProbe; ++probe, i = (i + 1) & (kCacheSlots - 1)) {
    CacheSlot& s = g_cache[i];
    uint64_t k = s.hash.load(std::memory_order_acquire);
    if (k == 0) {
      // A miss. Naming calls into Python, which must not run with an
      // exception pending: leave such a launch without a stack, uncached.
      if (api.err_occurred() != nullptr) return 0;
      if (s.hash.compare_exchange_strong(k, h, std::memory_order_acq_rel)) {
        const uint32_t sig = NameAndIntern(api, f, n);
        if (sig != 0) {
          for (uint32_t j = 0; j < n; ++j) api.inc_ref(f[j].code);
        }
        s.sig.store(sig != 0 ? sig : kFailedSig, std::memory_order_release);
        return sig;
      }
      // Lost the race for this slot: `k` now holds the winner's hash.
    }
    if (k == h) {
      const uint32_t sig = s.sig.load(std::memory_order_acquire);
      if (sig == kFailedSig) return 0;
      if (sig != 0) return sig;
      // Being named by another thread right now: name it ourselves (the
      // signature table deduplicates), without caching.
      return api.err_occurred() == nullptr ? NameAndIntern(api, f, n) : 0;
    }
  }
  // Cache full around this hash: name it every time (sampled launches only).
  return api.err_occurred() == nullptr ? NameAndIntern(api, f, n) : 0;
}

void ClearCache() {
  for (CacheSlot& s : g_cache) {
    s.hash.store(0, std::memory_order_relaxed);
    s.sig.store(0, std::memory_order_relaxed);
  }
  g_has_qualname.store(-1, std::memory_order_relaxed);
  g_layout.store(nullptr, std::memory_order_release);
  g_backward_sig.store(0, std::memory_order_relaxed);
}

// Lookup for frames read without the GIL: no CPython call at all (the GIL
// may not be held), nothing pinned (the key names each frame's identity).
uint32_t LookupRaw(const PyLayout& l, uint64_t h, const RawFrame* f, uint32_t n) {
  uint32_t i = static_cast<uint32_t>(h) & (kCacheSlots - 1);
  for (uint32_t probe = 0; probe < kMaxProbe; ++probe, i = (i + 1) & (kCacheSlots - 1)) {
    CacheSlot& s = g_cache[i];
    uint64_t k = s.hash.load(std::memory_order_acquire);
    if (k == 0 && s.hash.compare_exchange_strong(k, h, std::memory_order_acq_rel)) {
      const uint32_t sig = NameAndInternRaw(l, f, n);
      s.sig.store(sig != 0 ? sig : kFailedSig, std::memory_order_release);
      return sig;
    }
    if (k == h) {
      const uint32_t sig = s.sig.load(std::memory_order_acquire);
      if (sig == kFailedSig) return 0;
      return sig != 0 ? sig : NameAndInternRaw(l, f, n);  // being named right now
    }
  }
  return NameAndInternRaw(l, f, n);  // cache full around this hash
}

// The stack of a thread without Python frames: PyTorch's autograd threads
// run backward kernels, labelled as such; other threads get none. The thread
// name is read once per thread (one prctl), only on a sampled launch.
uint32_t BackwardStack() {
  uint8_t kind = t_thread_kind;
  if (kind == 0) {
    char name[17] = {0};
    kind = prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && std::strncmp(name, "pt_autograd", 11) == 0
               ? 1
               : 2;
    t_thread_kind = kind;
  }
  if (kind != 1) return 0;
  uint32_t sig = g_backward_sig.load(std::memory_order_relaxed);
  if (sig == 0) {
    xpu_signature_v1 s;
    std::memset(&s, 0, sizeof(s));
    s.kind = XPU_OP_PY_CALLSITE;
    s.comm_rank = -1;
    s.peer = 0;
    s.device = -1;
    sig = InternSignature(s, kBackwardStack, sizeof(kBackwardStack) - 1);
    g_backward_sig.store(sig, std::memory_order_relaxed);
  }
  return sig;
}

uint32_t CaptureWithoutGil(const PyApi& api, const PyLayout& l, uint32_t depth) {
  // Both are plain reads of runtime flags; a finalizing interpreter frees
  // thread states that other threads may still point to.
  if (api.is_initialized() == 0) return 0;
  if (api.is_finalizing != nullptr && api.is_finalizing() != 0) return 0;
  // This thread's own state (a TLS read, valid without the GIL).
  const void* tstate = api.gilstate_this_thread();
  RawFrame frames[kMaxPyStackDepth];
  const uint32_t n = tstate != nullptr ? WalkRawFrames(l, tstate, depth, frames) : 0;
  if (n == 0) return BackwardStack();
  return LookupRaw(l, HashRawFrames(frames, n), frames, n);
}

}  // namespace

bool PyApi::Complete() const {
  return is_initialized != nullptr && gil_check != nullptr && gilstate_this_thread != nullptr &&
         thread_state_unchecked != nullptr &&
         (eval_get_frame != nullptr || thread_state_get_frame != nullptr) &&
         frame_get_code != nullptr && frame_get_back != nullptr && frame_get_line != nullptr &&
         inc_ref != nullptr && dec_ref != nullptr && get_attr != nullptr && utf8 != nullptr &&
         err_occurred != nullptr && err_clear != nullptr;
}

void ConfigurePyCallsites(uint32_t depth) {
  g_depth.store(depth < kMaxPyStackDepth ? depth : kMaxPyStackDepth, std::memory_order_relaxed);
}

void MaybeResolvePyApi(uint64_t now_ns) {
  if (g_api.load(std::memory_order_acquire) != nullptr) return;
  if (g_depth.load(std::memory_order_relaxed) == 0) return;
  if (now_ns < g_next_try_ns.load(std::memory_order_relaxed)) return;
  if (g_resolving.exchange(true, std::memory_order_acq_rel)) return;
  g_next_try_ns.store(now_ns + kRetryNs, std::memory_order_relaxed);
  PyApi a;
  if (g_api.load(std::memory_order_acquire) == nullptr && ResolveNow(&a)) {
    g_resolved = a;
    g_api.store(&g_resolved, std::memory_order_release);
  }
  g_resolving.store(false, std::memory_order_release);
}

bool PyCallsitesOn() {
  return g_api.load(std::memory_order_acquire) != nullptr &&
         g_depth.load(std::memory_order_relaxed) != 0;
}

uint32_t CapturePyCallsite() {
  const PyApi* api = g_api.load(std::memory_order_acquire);
  const uint32_t depth = g_depth.load(std::memory_order_relaxed);
  if (api == nullptr || depth == 0) return 0;
  if (const PyLayout* l = g_layout.load(std::memory_order_acquire)) {
    return CaptureWithoutGil(*api, *l, depth);
  }
  // Without the GIL nothing else may be called. PyGILState_Check answers 1
  // unconditionally in some states (before the GIL state is set up, with
  // sub-interpreters before 3.12), so the thread state current on this
  // thread must also be this thread's own.
  if (api->is_initialized() == 0) return 0;
  if (api->gil_check() != 1) return BackwardStack();
  void* tstate = api->thread_state_unchecked();
  if (tstate == nullptr || tstate != api->gilstate_this_thread()) return 0;
  // CPython 3.11+ creates frame objects while we walk; should that fail it
  // sets MemoryError, which must not leak into the interpreter (the caller's
  // Python code would see an exception out of nowhere). One that was already
  // pending is not ours to touch.
  const bool error_before = api->err_occurred() != nullptr;
  Frame frames[kMaxPyStackDepth];
  const uint32_t n = WalkFrames(*api, tstate, depth, frames);
  if (!error_before && api->err_occurred() != nullptr) {
    api->err_clear();
    return 0;
  }
  if (n == 0) return 0;
  return Lookup(*api, HashFrames(frames, n), frames, n);
}

int PyFramesSelfTest() {
  MaybeResolvePyApi(NowNs());
  const PyApi* api = g_api.load(std::memory_order_acquire);
  if (api == nullptr || g_depth.load(std::memory_order_relaxed) == 0) return 0;
  if (g_layout.load(std::memory_order_acquire) != nullptr) return 1;
  if (api->get_version == nullptr || api->code_type == nullptr || api->is_initialized() == 0 ||
      api->gil_check() != 1) {
    return 0;
  }
  // "3.12.3 (main, ...)": the layouts are per minor version.
  const char* v = api->get_version();
  if (v == nullptr || v[0] != '3' || v[1] != '.') return 0;
  char* end = nullptr;
  const long minor = std::strtol(v + 2, &end, 10);
  PyLayout l;
  if (end == v + 2 || minor < 10 || !PyLayoutForVersion(static_cast<int>(minor), &l)) return 0;
  l.code_type = api->code_type;
  if (!PyLayoutMatchesDebugOffsets(l, api->py_runtime)) return 0;
  void* tstate = api->thread_state_unchecked();
  if (tstate == nullptr || tstate != api->gilstate_this_thread()) return 0;
  // First without trusting the layout: every pointer read through a
  // non-faulting read, every object's type checked.
  if (!ProbeRawFrames(l, tstate, kMaxPyStackDepth, api->str_type, api->bytes_type)) return 0;
  // Then both walks over the current stack must agree frame by frame: code
  // object, line, and the name each side builds.
  const bool error_before = api->err_occurred() != nullptr;
  Frame ref[kMaxPyStackDepth];
  const uint32_t n_ref = WalkFrames(*api, tstate, kMaxPyStackDepth, ref);
  RawFrame raw[kMaxPyStackDepth];
  const uint32_t n_raw = WalkRawFrames(l, tstate, kMaxPyStackDepth, raw);
  bool same = n_ref >= 2 && n_ref == n_raw;
  for (uint32_t i = 0; same && i < n_ref; ++i) {
    char a[512], b[512];
    NameBuf nb(a, sizeof(a));
    AppendCodeName(*api, ref[i].code, &nb);
    nb.Append(':');
    nb.AppendInt(ref[i].line);
    size_t len = 0;
    char line[16];
    NameBuf lb(line, sizeof(line));
    lb.AppendInt(RawFrameLine(l, raw[i]));
    same = raw[i].code == ref[i].code && !nb.overflow() &&
           PutStrOrQuestion(l, raw[i].qualname, b, sizeof(b), &len) &&
           Put(b, sizeof(b), &len, "@", 1) &&
           PutStrOrQuestion(l, raw[i].filename, b, sizeof(b), &len) &&
           Put(b, sizeof(b), &len, ":", 1) && Put(b, sizeof(b), &len, line, lb.len()) &&
           len == nb.len() && std::memcmp(a, b, len) == 0;
  }
  if (!error_before && api->err_occurred() != nullptr) api->err_clear();
  if (!same) return 0;
  g_layout_storage = l;
  g_layout.store(&g_layout_storage, std::memory_order_release);
  return 1;
}

bool PyFramesGilFree() { return g_layout.load(std::memory_order_acquire) != nullptr; }

void EmitCallsiteLink(const OpHandle& op, uint32_t stack_sig) {
  if (op.picked == 0 || stack_sig == 0 || op.sig_id == 0) return;
  xpu_record_v1 r{};
  r.sig_id = stack_sig;
  r.start_ns = op.launch_ns;
  r.duration = 0;
  // The launch's sig_id (< sig_capacity <= 2^20, so positive), without
  // XPU_REC_ISSUE_LAT_VALID: record.h, XPU_OP_PY_CALLSITE.
  r.issue_latency_ns = static_cast<int32_t>(op.sig_id);
  r.seq = op.seq;
  r.stream = op.stream;
  r.flags = XPU_REC_HOST;
  WriteRecord(r);
}

namespace testing {

void SetPyApiForTest(const PyApi* api, uint32_t depth) {
  ClearCache();
  ConfigurePyCallsites(depth);
  g_api.store(api, std::memory_order_release);
}

uint32_t PyCallsiteCacheSize() {
  uint32_t n = 0;
  for (const CacheSlot& s : g_cache) n += s.hash.load(std::memory_order_relaxed) != 0;
  return n;
}

}  // namespace testing
}  // namespace xpu::hook
