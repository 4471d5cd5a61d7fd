"""callsite(): bounded, cached stacks; interning one signature per stack."""

import sys

from xputimer.callsite import _code_names, callsite, callsite_sig, short


def outer():
    return inner()


def inner():
    return callsite(depth=3)


def test_frames_innermost_first_with_lines():
    frames = outer()
    assert len(frames) == 3
    names = [f.split("@")[0] for f in frames]
    assert names[:2] == ["inner", "outer"]
    assert frames[0].rsplit(":", 1)[1] == str(inner.__code__.co_firstlineno + 1)
    assert frames[0].split("@")[1].rsplit(":", 1)[0] == __file__
    assert short(frames[0]).startswith("inner@test_callsite.py:")


def test_depth_is_bounded_and_cache_per_code():
    def rec(n):
        return rec(n - 1) if n else callsite(depth=5)
    frames = rec(50)
    assert len(frames) == 5
    assert rec.__code__ in _code_names
    assert callsite(depth=10 ** 9) and len(callsite(depth=10 ** 9)) <= 256


def test_qualname_for_methods():
    class K:
        def m(self):
            return callsite(depth=1)[0]
    expect = "K.m" if sys.version_info >= (3, 11) else "m"
    assert K().m().split("@")[0].endswith(expect)


def test_without_hook_sig_is_zero():
    assert callsite_sig() == 0


def test_stacks_interned_once_in_ring(run_traced):
    code = r'''
from xputimer.callsite import emit_callsite
def launch():
    emit_callsite(value=1)
def a():
    launch()
def b():
    launch()
for _ in range(3):
    a()
b()
'''
    run = run_traced(code)
    evs = run.events("callsite")
    assert len(evs) == 4
    names = [e["sig"]["name"] for e in evs]
    assert len(set(names)) == 2             # two distinct stacks, interned once each
    assert len({e["sig_id"] for e in evs}) == 2
    first = names[0].split(";")
    assert first[0].startswith("launch@") and first[1].startswith("a@")
    assert names[3].split(";")[1].startswith("b@")
