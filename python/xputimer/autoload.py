"""Installs the Python instrumentation; imported by _autoload/sitecustomize.py
at interpreter start-up when libxpu_hook.so is preloaded.

Importing this module is cheap (no torch import) and never raises. When the
hook's C API is absent, or XPU_PYTHON=off, it installs nothing at all.

Environment:
  XPU_PYTHON=off             disable the Python side
  XPU_PYTHON_GC=0            do not trace garbage collection
  XPU_PYTHON_TORCH=0         do not patch torch APIs
  XPU_TRACED_PYTHON_API=...  extra APIs (see user_api.py)
  XPU_STEP_REPEATS=3         identical iterations needed to lock a pattern
  XPU_PYTHON_DEBUG=1         print instrumentation errors to stderr
  XPU_PYSTACKS=0             no faulthandler stacks for hang diagnosis (pystacks.py)
"""

import os
import sys

from . import _hook

state = {"installed": False, "detector": None, "errors": []}


def _flag(name, default=True):
    v = os.environ.get(name)
    if v is None:
        return default
    return v.strip().lower() not in ("0", "off", "false", "no")


def _debug(msg):
    if os.environ.get("XPU_PYTHON_DEBUG"):
        sys.stderr.write("xputimer: %s\n" % msg)


def install():
    """Idempotent. Returns True when instrumentation is active."""
    if state["installed"]:
        return True
    if not _hook.python_events_wanted() or not _hook.available():
        return False
    from . import gc_trace, steps, torch_patches, tracing, user_api

    try:
        repeats = int(os.environ.get("XPU_STEP_REPEATS", "3"))
    except ValueError:
        repeats = 3
    detector = steps.StepDetector(repeats=max(2, repeats), on_step=steps.mark_in_ring)

    def feed(kind, t0, t1, value):
        detector.on_event(steps.D if kind == _hook.OP_PY_DATALOADER else steps.O, t0, t1, value)

    tracing.add_listener(_hook.OP_PY_DATALOADER, feed)
    tracing.add_listener(_hook.OP_PY_OPTIMIZER, feed)
    state["detector"] = detector

    if _flag("XPU_PYTHON_GC"):
        gc_trace.install()
    specs, errors = user_api.from_env()
    for bad in errors:
        _debug("ignored XPU_TRACED_PYTHON_API entry %r (want module@qualname[:kind])" % bad)
    state["errors"] = errors
    # User entries first: an API named both by the user and by default keeps
    # the user's kind; the default patch then sees it wrapped and skips it.
    user_api.install(specs)
    if _flag("XPU_PYTHON_TORCH"):
        torch_patches.install()
    # Stacks on demand for hang diagnosis (faulthandler, see pystacks.py).
    from . import pystacks
    pystacks.install()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_child)
    state["installed"] = True
    return True


def _after_fork_child():
    # DataLoader workers: their events are not the trainer's iterations.
    det = state.get("detector")
    if det is not None:
        det.__init__(repeats=det.repeats, max_period=det.max_period, on_step=None)


try:
    install()
except Exception as exc:  # instrumentation must never break the program
    _debug("install failed: %r" % (exc,))
