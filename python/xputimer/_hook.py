"""ctypes binding to the hook's C API (include/xpu/hook_api.h).

The symbols are resolved from the global symbol scope of the process
(dlopen(NULL), the equivalent of dlsym(RTLD_DEFAULT, ...)), so they are found
when libxpu_hook.so was LD_PRELOADed and missing otherwise. When they are
missing every function here is a cheap no-op and `available()` is False;
nothing in this package ever loads the hook by itself.

Thread-safety: the C API is thread-safe; this module only caches function
pointers (resolved once, under the import lock).
"""

import ctypes
import os

# xpu_op_kind values used by the Python side (record.h).
OP_STEP = 70
OP_ANNOTATION = 71
OP_PY_CALLSITE = 72
OP_PY_GC = 64
OP_PY_DATALOADER = 65
OP_PY_SYNC = 66
OP_PY_OPTIMIZER = 67
OP_PY_CHECKPOINT = 68
OP_PY_API = 69

# xpu_record_flags used by the Python side.
REC_CALL_FAILED = 1 << 9
REC_BEGIN = 1 << 11
REC_END = 1 << 12

_U32_MAX = 0xFFFFFFFF


class _Api:
    """Resolved function pointers, or None for each missing symbol."""

    def __init__(self):
        self.version = 0
        self.is_enabled = None
        self.set_enabled = None
        self.now_ns = None
        self.intern = None
        self.emit = None
        self.mark_step = None
        try:
            lib = ctypes.CDLL(None)
        except OSError:
            return
        def sym(name, restype, argtypes):
            try:
                fn = getattr(lib, name)
            except AttributeError:
                return None
            fn.restype = restype
            fn.argtypes = argtypes
            return fn
        c = ctypes
        ver = sym("xpu_hook_api_version", c.c_int, [])
        self.intern = sym("xpu_intern_host_signature", c.c_uint32,
                          [c.c_uint32, c.c_char_p, c.c_uint32, c.c_int32])
        self.emit = sym("xpu_emit_host_event", c.c_int,
                        [c.c_uint32, c.c_uint64, c.c_uint64, c.c_uint32, c.c_uint32])
        if ver is None or self.intern is None or self.emit is None:
            self.intern = self.emit = None
            return
        self.version = int(ver())
        self.is_enabled = sym("xpu_is_enabled", c.c_int, [])
        self.set_enabled = sym("xpu_set_enabled", c.c_int, [c.c_int])
        self.now_ns = sym("xpu_now_ns", c.c_uint64, [])
        self.mark_step = sym("xpu_mark_step", c.c_int, [c.c_uint64, c.c_uint64, c.c_uint64])


_api = _Api()
_sig_cache = {}


def available():
    """True when the hook's C API is present in this process."""
    return _api.emit is not None


def api_version():
    return _api.version


def is_enabled():
    return bool(_api.is_enabled()) if _api.is_enabled is not None else False


def set_enabled(enabled):
    """Turns tracing on or off; returns the previous state (False without hook)."""
    if _api.set_enabled is None:
        return False
    return bool(_api.set_enabled(1 if enabled else 0))


def intern(kind, name, aux=0):
    """Interns a host signature once per (kind, name, aux); returns sig_id or 0."""
    key = (kind, name, aux)
    sig = _sig_cache.get(key)
    if sig is not None:
        return sig
    if _api.intern is None:
        return 0
    raw = name.encode("utf-8", "replace")
    sig = int(_api.intern(kind, raw, len(raw), aux))
    if sig:  # a failed intern (table full) is retried on the next call
        _sig_cache[key] = sig
    return sig


def emit(sig_id, start_ns, end_ns, value=0, flags=0):
    """Appends one host event; returns True when the ring accepted it."""
    if _api.emit is None or not sig_id:
        return False
    if value > _U32_MAX:
        value = _U32_MAX
    elif value < 0:
        value = 0
    return _api.emit(sig_id, start_ns, end_ns, value, flags) == 0


_fast = []  # [callable or None], resolved once


def emitter():
    """The emit function hot paths bind once, or None without the hook:
    emit(sig_id, start_ns, end_ns, value, flags).

    The compiled _xputimer_native.emit (a METH_FASTCALL builtin, ~10x cheaper
    per call than ctypes) when the optional module is installed and sees the
    same C API; the ctypes function otherwise. XPU_PYTHON_NATIVE=0 forces
    ctypes."""
    if _api.emit is None:
        return None
    if not _fast:
        fn = None
        if os.environ.get("XPU_PYTHON_NATIVE", "1") != "0":
            try:
                try:
                    from . import _xputimer_native as native
                except ImportError:
                    import _xputimer_native as native
                if native.available():
                    fn = native.emit
            except Exception:
                fn = None
        _fast.append(fn if fn is not None else _api.emit)
    return _fast[0]


def mark_step(step, start_ns, end_ns):
    if _api.mark_step is None:
        return False
    return _api.mark_step(step, start_ns, end_ns) == 0


def now_ns():
    """Host clock of the records: CLOCK_REALTIME ns (same as time.time_ns())."""
    if _api.now_ns is not None:
        return int(_api.now_ns())
    import time
    return time.time_ns()


def python_events_wanted():
    """XPU_PYTHON=off (or 0/false/no) disables the Python instrumentation."""
    v = os.environ.get("XPU_PYTHON", "on").strip().lower()
    return v not in ("off", "0", "false", "no")
