"""Python call sites: the current stack as interned "function@file:line" frames.

callsite(depth) walks at most `depth` frames from the caller outwards
(innermost first). The "function@file" part is cached per code object, so a
frame costs one dict lookup and one string join; a whole stack is then
interned once as a host signature of kind XPU_OP_PY_CALLSITE whose name is
the frames joined by ';' (callsite_sig), cached per (code, line) tuple.

The hook builds exactly the same name, with the same signature fields, for
the stacks it records on sampled GEMM and collective launches (hook/process/
py_callsite.cc, include/xpu/record.h XPU_OP_PY_CALLSITE): a stack interns to
one sig_id whichever side saw it first, as long as both walk the same depth.
DEFAULT_DEPTH is therefore the hook's XPU_PY_STACK_DEPTH (8 unless set).

PyTorch releases the GIL before it launches GPU work, so the hook reads the
launching thread's frames without it (hook/process/py_frames.h). Importing
this module asks the hook to check that walk against the C API on the
current stack, with the GIL held, and to turn it on (GIL_FREE says whether it
did). XPU_PY_STACK_GIL_FREE=0 leaves it off: only launches made with the GIL
held then get a stack.
The hook's own link records tie a stack to a launch; read them back with
xputimer.ring.callsites(). emit_callsite() writes a free-standing stack event
(not tied to a launch) for code the hook cannot see, e.g. a custom kernel.

Thread-safety: the caches are dicts mutated under the GIL; a race can only
compute the same entry twice.
"""

import os
import sys
import time

from . import _hook


def _default_depth():
    try:
        d = int(os.environ.get("XPU_PY_STACK_DEPTH", "8"))
    except ValueError:
        return 8
    return min(d, 64) if d > 0 else 8


DEFAULT_DEPTH = _default_depth()
_MAX_CACHE = 65536


def _enable_gil_free_walk():
    """Asks the hook to validate and turn on its GIL-free frame walk."""
    if os.environ.get("XPU_PY_STACK_GIL_FREE", "1").strip().lower() in ("0", "off", "false", "no"):
        return False
    try:
        import ctypes
        fn = ctypes.PyDLL(None).xpu_py_frames_selftest  # PyDLL: the GIL stays held
    except (OSError, AttributeError):
        return False  # no hook in this process
    fn.restype = ctypes.c_int
    fn.argtypes = []
    try:
        return fn() == 1
    except Exception:  # never let instrumentation break the program
        return False


GIL_FREE = _enable_gil_free_walk()

_code_names = {}   # code object -> "function@file"
_stack_sigs = {}   # tuple((code, lineno), ...) -> sig_id


def _code_name(code):
    name = _code_names.get(code)
    if name is None:
        func = getattr(code, "co_qualname", code.co_name)
        name = "%s@%s" % (func, code.co_filename)
        if len(_code_names) < _MAX_CACHE:
            _code_names[code] = name
    return name


def _frames(depth, skip):
    frame = sys._getframe(skip + 1)
    out = []
    while frame is not None and len(out) < depth:
        out.append((frame.f_code, frame.f_lineno))
        frame = frame.f_back
    return out


def callsite(depth=DEFAULT_DEPTH, skip=0):
    """The caller's stack, innermost first, as ("func@file:line", ...)."""
    depth = max(1, min(int(depth), 256))
    return tuple("%s:%d" % (_code_name(c), line) for c, line in _frames(depth, skip + 1))


def callsite_sig(depth=DEFAULT_DEPTH, skip=0):
    """sig_id of the caller's stack (XPU_OP_PY_CALLSITE, frames joined by
    ';'), interned once per distinct stack; 0 when the hook is absent."""
    depth = max(1, min(int(depth), 256))
    key = tuple(_frames(depth, skip + 1))
    sig = _stack_sigs.get(key)
    if sig is None:
        name = ";".join("%s:%d" % (_code_name(c), line) for c, line in key)
        # aux 0: the fields the hook uses too (record.h XPU_OP_PY_CALLSITE).
        sig = _hook.intern(_hook.OP_PY_CALLSITE, name, 0)
        if sig and len(_stack_sigs) < _MAX_CACHE:
            _stack_sigs[key] = sig
    return sig


def emit_callsite(value=0, depth=DEFAULT_DEPTH):
    """Emits a zero-length XPU_OP_PY_CALLSITE event carrying the caller's
    stack (value in seq; not linked to a launch)."""
    sig = callsite_sig(depth, skip=1)
    t = time.time_ns()
    return _hook.emit(sig, t, t, value, 0)


def short(frame_text):
    """'func@/long/path/file.py:12' -> 'func@file.py:12' (for display)."""
    func, _, rest = frame_text.partition("@")
    path, _, line = rest.rpartition(":")
    return "%s@%s:%s" % (func, os.path.basename(path), line)
