"""Garbage-collection events through gc.callbacks.

One host event per collection: signature "gc" of kind XPU_OP_PY_GC with the
generation as `aux` (the hook stores it in the signature's `peer`), record
value = objects collected. The callback is invoked by the interpreter with
the GIL held and collections never nest, so one pending start time suffices.
"""

import gc
import time

from . import _hook

_state = {"start": 0, "sigs": None, "installed": None}


def install():
    """Registers the callback; returns False when the hook is absent."""
    if _state["installed"] is not None:
        return True
    sigs = tuple(_hook.intern(_hook.OP_PY_GC, "gc", gen) for gen in range(3))
    emit = _hook.emitter()
    if emit is None or not all(sigs):
        return False
    now = time.time_ns

    def on_gc(phase, info):
        if phase == "start":
            _state["start"] = now()
            return
        t0 = _state["start"]
        if not t0:
            return
        _state["start"] = 0
        gen = info.get("generation", 0)
        if not 0 <= gen <= 2:
            gen = 2
        collected = info.get("collected", 0)
        emit(sigs[gen], t0, now(), min(collected, 0xFFFFFFFF), 0)

    gc.callbacks.append(on_gc)
    _state["installed"] = on_gc
    _state["sigs"] = sigs
    return True


def uninstall():
    cb = _state["installed"]
    if cb is not None:
        try:
            gc.callbacks.remove(cb)
        except ValueError:
            pass
        _state["installed"] = None
