"""Function wrappers that time a call and emit one host event into the ring.

Cost per traced call: two time.time_ns() reads and one ctypes call into
xpu_emit_host_event (see bench_tracing.py for the measured figure). The
wrapper is a plain function (functools.wraps), so profilers, debuggers and
torch.profiler see an ordinary extra Python frame; nothing here installs
sys.setprofile or sys.settrace.

time.time_ns() is CLOCK_REALTIME, the clock of the records (xpu_now_ns).

A wrapped callable carries `__xpu_wrapped__ = True` and `__wrapped__` (the
original); `wrap_attribute` refuses to wrap twice and `unwrap_attribute`
restores the original.
"""

import functools
import inspect
import time

from . import _hook

KIND_BY_NAME = {
    "api": _hook.OP_PY_API,
    "dataloader": _hook.OP_PY_DATALOADER,
    "sync": _hook.OP_PY_SYNC,
    "optimizer": _hook.OP_PY_OPTIMIZER,
    "checkpoint": _hook.OP_PY_CHECKPOINT,
    "annotation": _hook.OP_ANNOTATION,
}

_listeners = {}  # kind -> list of callables(kind, start_ns, end_ns, value)
# Kinds whose wrappers call listeners (step detection); others take the hot path.
_NOTIFIED_KINDS = (_hook.OP_PY_DATALOADER, _hook.OP_PY_OPTIMIZER)


def add_listener(kind, fn):
    """fn(kind, start_ns, end_ns, value) after each traced call of `kind`."""
    _listeners.setdefault(kind, []).append(fn)


def remove_listeners():
    _listeners.clear()


def make_wrapper(fn, kind, name, value_of=None, ignore=(StopIteration,)):
    """Returns a wrapper of fn emitting (kind, name) per call.

    value_of(result) -> int goes into record.seq (e.g. batch size).
    Exceptions in `ignore` (end of an iterator) emit nothing; any other
    exception emits the event with XPU_REC_CALL_FAILED and is re-raised.
    """
    sig = _hook.intern(kind, name)
    emit = _hook.emitter()
    if not sig or emit is None:
        return None
    now = time.time_ns
    failed = _hook.REC_CALL_FAILED

    if kind not in _NOTIFIED_KINDS and value_of is None:
        # Hot path: no per-call Python work besides the two clock reads.
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t0 = now()
            try:
                result = fn(*args, **kwargs)
            except ignore:
                raise
            except BaseException:
                emit(sig, t0, now(), 0, failed)
                raise
            emit(sig, t0, now(), 0, 0)
            return result
    else:
        listeners = _listeners.setdefault(kind, [])

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t0 = now()
            try:
                result = fn(*args, **kwargs)
            except ignore:
                raise
            except BaseException:
                emit(sig, t0, now(), 0, failed)
                raise
            t1 = now()
            value = 0
            if value_of is not None:
                try:
                    value = value_of(result)
                except Exception:
                    value = 0
                if value > 0xFFFFFFFF:
                    value = 0xFFFFFFFF
            emit(sig, t0, t1, value, 0)
            for listener in listeners:
                try:
                    listener(kind, t0, t1, value)
                except Exception:
                    pass
            return result

    wrapper.__xpu_wrapped__ = True
    wrapper.__xpu_sig__ = sig
    return wrapper


def is_wrapped(obj):
    return getattr(obj, "__xpu_wrapped__", False) is True


def wrap_attribute(owner, attr, kind, name, value_of=None):
    """Replaces owner.attr (module function, or method of a class) with a wrapper.

    Handles plain functions, staticmethod and classmethod. Returns True when
    wrapped; False when missing, already wrapped, or not settable.
    """
    raw = None
    own = True
    if inspect.isclass(owner):
        own = attr in vars(owner)
        for klass in owner.__mro__:
            if attr in vars(klass):
                raw = vars(klass)[attr]
                break
    else:
        raw = getattr(owner, attr, None)
    if raw is None:
        return False
    rewrap = None
    target = raw
    if isinstance(raw, staticmethod):
        target, rewrap = raw.__func__, staticmethod
    elif isinstance(raw, classmethod):
        target, rewrap = raw.__func__, classmethod
    if is_wrapped(target) or not callable(target):
        return False
    wrapper = make_wrapper(target, kind, name, value_of=value_of)
    if wrapper is None:
        return False
    try:
        setattr(owner, attr, rewrap(wrapper) if rewrap else wrapper)
    except (TypeError, AttributeError):  # C types, read-only attributes
        return False
    _patched.append((owner, attr, raw if own else None))
    return True


_patched = []  # (owner, attr, original raw attribute) in patch order


def unwrap_all():
    """Restores every attribute this module replaced (tests, shutdown)."""
    while _patched:
        owner, attr, raw = _patched.pop()
        try:
            if raw is None:
                delattr(owner, attr)
            else:
                setattr(owner, attr, raw)
        except (TypeError, AttributeError):
            pass
