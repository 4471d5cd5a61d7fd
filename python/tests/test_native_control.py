"""_xputimer_native hook control against the preloaded C API."""

import os

import pytest

from test_ring import native_module


def test_enable_disable_annotate_mark(run_traced):
    native_module()  # skip when not built (fails when CTest says it was)
    ndir = os.environ.get("XPU_TEST_NATIVE_DIR", "")
    code = r'''
import json, sys, time
sys.path.insert(0, %r)
try:
    from xputimer import _xputimer_native as n
except ImportError:
    import _xputimer_native as n
out = {"available": n.available(), "enabled": n.enabled()}
with n.annotate("region", 5) as a:
    time.sleep(0.001)
out["sig"] = a.sig_id
out["prev"] = n.disable()
with n.annotate("hidden"):
    pass
out["enabled_after_disable"] = n.enabled()
n.enable()
out["mark"] = n.mark_step(41, 1000, 2000)
try:
    with n.annotate("fails"):
        raise KeyError("x")
except KeyError:
    pass
out["now_ok"] = abs(n.now_ns() - time.time_ns()) < 10**9
print(json.dumps(out))
''' % ndir
    run = run_traced(code)
    out = run.json()
    assert out == {"available": True, "enabled": True, "sig": out["sig"], "prev": True,
                   "enabled_after_disable": False, "mark": True, "now_ok": True}
    ann = run.events("annotation")
    assert [e["sig"]["name"] for e in ann] == ["region", "fails"]
    assert ann[0]["seq"] == 5 and ann[0]["duration_ns"] >= 1_000_000
    assert ann[1]["flags"] & (1 << 9)
    steps = run.events("step")
    assert [(s["seq"], s["start_ns"], s["duration_ns"]) for s in steps] == [(41, 1000, 1000)]


def test_native_without_hook_is_no_op(run_traced):
    native_module()
    ndir = os.environ.get("XPU_TEST_NATIVE_DIR", "")
    code = r'''
import json, sys
sys.path.insert(0, %r)
try:
    from xputimer import _xputimer_native as n
except ImportError:
    import _xputimer_native as n
with n.annotate("x"):
    pass
print(json.dumps([n.available(), n.enabled(), n.disable(), n.mark_step(1, 2, 3)]))
''' % ndir
    run = run_traced(code, preload=False)
    assert run.json() == [False, False, False, False]


def test_instrumentation_uses_native_emit_when_installed(run_traced):
    native_module()
    ndir = os.environ.get("XPU_TEST_NATIVE_DIR")
    if not ndir:
        pytest.skip("native module location unknown (XPU_TEST_NATIVE_DIR)")
    code = r'''
import gc, json, time
gc.disable()  # only the explicit collection below: automatic ones would interleave
from xputimer import _hook
t0 = time.time_ns()
gc.collect(1)
print(json.dumps([type(_hook.emitter()).__name__, t0]))
'''
    run = run_traced(code, extra_path=[ndir])
    name, t0 = run.json()
    assert name == "builtin_function_or_method"
    assert [e["sig"]["peer"] for e in run.events("gc") if e["start_ns"] >= t0][:1] == [1]
    run = run_traced(code, extra_path=[ndir], env={"XPU_PYTHON_NATIVE": "0"})
    name, t0 = run.json()
    assert name == "_FuncPtr"
    assert [e["sig"]["peer"] for e in run.events("gc") if e["start_ns"] >= t0][:1] == [1]
