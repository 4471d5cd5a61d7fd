"""xputimer: the Python side of XPUTimer.

Pure Python + ctypes into the C API of libxpu_hook.so; every call is a no-op
when the hook is not loaded. See README.md for the zero-code-change set-up.

    import xputimer
    xputimer.enabled()                 # hook loaded and tracing
    with xputimer.annotate("eval"):    # a user region in the trace
        ...
    xputimer.mark_step(step, t0, t1)
    xputimer.callsite()                # ("func@file:line", ...)
    xputimer.read_ring(path)           # records, signatures, stats
    xputimer.callsites(path)           # Python stacks of sampled launches
"""

import time

from . import _hook
from .callsite import callsite, callsite_sig, emit_callsite
from .steps import StepDetector, batch_size

__version__ = "0.1.0"

__all__ = [
    "annotate", "available", "batch_size", "callsite", "callsite_sig", "callsites", "emit_callsite",
    "enabled", "mark_step", "read_ring", "ring_stats", "set_enabled", "StepDetector",
    "step_detector", "trace",
]


def available():
    """The hook's C API is present in this process."""
    return _hook.available()


def enabled():
    return _hook.is_enabled()


def set_enabled(on):
    """Turns tracing on/off at run time; returns the previous state."""
    return _hook.set_enabled(on)


def mark_step(step, start_ns, end_ns):
    return _hook.mark_step(step, start_ns, end_ns)


class annotate:
    """Context manager (and decorator) emitting one XPU_OP_ANNOTATION event
    named `name` spanning the block."""

    __slots__ = ("_sig", "_t0", "_value")

    def __init__(self, name, value=0):
        self._sig = _hook.intern(_hook.OP_ANNOTATION, str(name))
        self._value = value
        self._t0 = 0

    def __enter__(self):
        self._t0 = time.time_ns()
        return self

    def __exit__(self, exc_type, exc, tb):
        flags = _hook.REC_CALL_FAILED if exc_type is not None else 0
        _hook.emit(self._sig, self._t0, time.time_ns(), self._value, flags)
        return False

    def __call__(self, fn):
        import functools
        sig, value = self._sig, self._value

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t0 = time.time_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                _hook.emit(sig, t0, time.time_ns(), value, 0)
        return wrapper


def trace(kind="api", name=None):
    """Decorator tracing a function like an XPU_TRACED_PYTHON_API entry."""
    from . import tracing

    def deco(fn):
        label = name or "%s@%s" % (fn.__module__, fn.__qualname__)
        wrapped = tracing.make_wrapper(fn, tracing.KIND_BY_NAME[kind], label)
        return wrapped if wrapped is not None else fn
    return deco


def step_detector():
    """The process-wide StepDetector fed by the autoload, or None."""
    from . import autoload
    return autoload.state.get("detector")


def native():
    """The compiled helper module (raises ImportError when not built): inside
    the package when pip-installed, or top-level from a CMake build dir."""
    try:
        from . import _xputimer_native
    except ImportError:
        import _xputimer_native
    return _xputimer_native


def read_ring(path, prefer_native=True):
    """Reads a ring file (XPU_RING_DIR/xpu-ring-<pid>.bin); see ring.py."""
    if prefer_native:
        try:
            return native().read_ring(str(path))
        except ImportError:
            pass
    from . import ring
    return ring.read_ring(path)


def ring_stats(data, prefer_native=True):
    """Per-signature stats (count, median, TFLOPS, busbw) of a ring file path
    or of read_ring() output; see ring.stats."""
    if prefer_native and not isinstance(data, dict):
        try:
            return native().ring_stats(str(data))
        except ImportError:
            pass
    from . import ring
    return ring.stats(data)


def callsites(data, prefer_native=True):
    """Python call stacks recorded by the hook on sampled GEMM / collective
    launches, each joined to its launch record; `data` is a ring file path
    or read_ring() output. See ring.callsites."""
    from . import ring
    if not isinstance(data, dict):
        data = read_ring(data, prefer_native)
    return ring.callsites(data)
