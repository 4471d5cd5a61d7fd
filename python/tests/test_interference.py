"""Our wrappers coexist with profilers, tracers and debuggers: we never
install sys.setprofile/settrace, and a profiler installed by the program
still sees the traced functions' own frames."""

MOD = r'''
def work(x):
    return helper(x) + 1
def helper(x):
    return x * 2
'''

CHILD = r'''
import cProfile, json, pstats, sys, io
import tracedmod
out = {"profile_before": sys.getprofile() is None, "trace_before": sys.gettrace() is None}
calls = []
def prof(frame, event, arg):
    if event == "call":
        calls.append(frame.f_code.co_name)
sys.setprofile(prof)
tracedmod.work(1)
sys.setprofile(None)
out["profiled"] = calls
lines = []
def tracer(frame, event, arg):
    if event == "call":
        lines.append(frame.f_code.co_name)
    return tracer
sys.settrace(tracer)
r = tracedmod.work(2)
sys.settrace(None)
out["traced"] = lines
out["result"] = r
pr = cProfile.Profile()
pr.enable(); tracedmod.work(3); pr.disable()
s = io.StringIO(); pstats.Stats(pr, stream=s).print_stats()
out["cprofile_has_work"] = "(work)" in s.getvalue() and "(helper)" in s.getvalue()
out["wrapped"] = getattr(tracedmod.work, "__xpu_wrapped__", False)
out["unwrapped_name"] = tracedmod.work.__wrapped__.__name__
print(json.dumps(out))
'''


def test_profilers_and_tracers_still_see_calls(run_traced, tmp_path):
    (tmp_path / "tracedmod.py").write_text(MOD)
    run = run_traced(CHILD, env={"XPU_TRACED_PYTHON_API": "tracedmod@work"})
    out = run.json()
    assert out["profile_before"] and out["trace_before"]  # we installed neither
    assert out["wrapped"] and out["unwrapped_name"] == "work"
    # The wrapper is one extra ordinary frame; the real frames are all there.
    assert "work" in out["profiled"] and "helper" in out["profiled"]
    assert out["profiled"].index("helper") > out["profiled"].index("work")
    assert "work" in out["traced"] and "helper" in out["traced"]
    assert out["cprofile_has_work"]
    assert out["result"] == 5
    # and our events are still written while the program profiles itself
    assert len(run.events("api", "tracedmod@work")) == 3


def test_pdb_breakpoint_inside_traced_function(run_traced, tmp_path):
    (tmp_path / "tracedmod.py").write_text(MOD)
    code = r'''
import pdb, io, sys, json
import tracedmod
cmds = io.StringIO("b tracedmod.helper\nc\np x\nc\n")
out = io.StringIO()
dbg = pdb.Pdb(stdin=cmds, stdout=out)
dbg.use_rawinput = False
r = dbg.runcall(tracedmod.work, 21)
print(json.dumps({"r": r, "hit": ")helper()" in out.getvalue() and "(Pdb) 21" in out.getvalue()}))
'''
    run = run_traced(code, env={"XPU_TRACED_PYTHON_API": "tracedmod@work"})
    assert run.json() == {"r": 43, "hit": True}
