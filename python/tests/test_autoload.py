"""The autoload directory: instrumentation installs itself at start-up, the
shadowed sitecustomize still runs, and nothing happens without the hook."""


def test_chained_sitecustomize_runs(run_traced, tmp_path):
    other = tmp_path / "site_other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITE = 'ran'\n")
    code = r'''
import builtins, json, sys, xputimer
from xputimer import autoload
print(json.dumps({"other": getattr(builtins, "OTHER_SITE", None),
                  "installed": autoload.state["installed"],
                  "mod": sys.modules["sitecustomize"].__file__}))
'''
    run = run_traced(code, extra_path=[str(other)])
    out = run.json()
    assert out["other"] == "ran"
    assert out["installed"] is True
    assert out["mod"].startswith(str(other))


def test_broken_chained_sitecustomize_does_not_break_program(run_traced, tmp_path):
    other = tmp_path / "site_bad"
    other.mkdir()
    (other / "sitecustomize.py").write_text("raise RuntimeError('boom')\n")
    run = run_traced("import gc; gc.collect(); print('alive')\n", extra_path=[str(other)])
    assert "alive" in run.stdout
    assert "boom" in run.stderr
    assert run.events("gc")


def test_without_hook_everything_is_a_no_op(run_traced):
    code = r'''
import json, sys, gc, xputimer
from xputimer import autoload, importhook
with xputimer.annotate("x"):
    pass
print(json.dumps({"available": xputimer.available(), "installed": autoload.state["installed"],
                  "finder": any(type(f).__name__ == "_PostImportFinder" for f in sys.meta_path),
                  "gc_callbacks": len(gc.callbacks), "mark": xputimer.mark_step(1, 2, 3)}))
'''
    run = run_traced(code, preload=False)
    assert run.json() == {"available": False, "installed": False, "finder": False,
                          "gc_callbacks": 0, "mark": False}


def test_python_off_switch(run_traced):
    code = r'''
import json, xputimer
from xputimer import autoload
print(json.dumps({"available": xputimer.available(), "installed": autoload.state["installed"]}))
'''
    run = run_traced(code, env={"XPU_PYTHON": "off"})
    assert run.json() == {"available": True, "installed": False}
    assert run.events("gc") == []


def test_hook_disabled_at_run_time(run_traced):
    code = r'''
import gc, time, xputimer
gc.disable()  # only the explicit collections below: automatic ones would interleave
t0 = time.time_ns()
gc.collect()
prev = xputimer.set_enabled(False)
for _ in range(5):
    gc.collect()
xputimer.set_enabled(True)
gc.collect(1)
print("PID=%d" % __import__("os").getpid())
print(t0)
'''
    run = run_traced(code)
    t0 = run.json()
    # Collections before t0 (start-up, before gc.disable()) are automatic ones.
    gens = [e["sig"]["peer"] for e in run.events("gc") if e["start_ns"] >= t0]
    assert gens[:2] == [2, 1]  # the five gen-2 collections while disabled are absent
