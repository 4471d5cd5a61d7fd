"""XPU_TRACED_PYTHON_API: parsing, lazy patching at import, every callable
shape (function, method, staticmethod, classmethod), failures."""


from xputimer import user_api

MOD = r'''
class Thing:
    def method(self, x):
        return x + 1
    @staticmethod
    def static(x):
        return x * 2
    @classmethod
    def klass(cls, x):
        return (cls.__name__, x)
    class Inner:
        def deep(self):
            return "deep"
def func(x):
    if x < 0:
        raise ValueError("negative")
    return -x
'''


def test_parse_accepts_and_rejects():
    specs, errors = user_api.parse(
        " torch.cuda@synchronize , mypkg.mod@Class.method:dataloader,bad, a@, @b, m@q:weird,"
        "x-y@f, m@f.1 ,")
    assert [(s.module, s.qualname, s.kind) for s in specs] == [
        ("torch.cuda", "synchronize", "api"), ("mypkg.mod", "Class.method", "dataloader")]
    assert specs[1].name == "mypkg.mod@Class.method"
    assert errors == ["bad", "a@", "@b", "m@q:weird", "x-y@f", "m@f.1"]


def test_legacy_variable_is_read():
    specs, _ = user_api.from_env({"TRACED_PYTHON_API": "a.b@c"})
    assert [s.name for s in specs] == ["a.b@c"]
    specs, _ = user_api.from_env({"TRACED_PYTHON_API": "a.b@c", "XPU_TRACED_PYTHON_API": "d@e"})
    assert [s.name for s in specs] == ["d@e"]


def test_lazy_patch_of_every_callable_shape(run_traced, tmp_path):
    (tmp_path / "usermod.py").write_text(MOD)
    code = r'''
import json, sys
assert "usermod" not in sys.modules   # we never import what we watch
import usermod
t = usermod.Thing()
out = [t.method(1), usermod.Thing.static(3), usermod.Thing.klass(4),
       usermod.Thing.Inner().deep(), usermod.func(5)]
try:
    usermod.func(-1)
except ValueError as e:
    out.append(str(e))
import importlib.machinery
out.append(type(usermod.__loader__).__name__)
out.append(type(usermod.__spec__.loader).__name__)
out.append(usermod.func.__name__)
print(json.dumps(out))
'''
    api = ("usermod@Thing.method,usermod@Thing.static,usermod@Thing.klass,"
           "usermod@Thing.Inner.deep,usermod@func,usermod@missing,never_imported_mod@f")
    run = run_traced(code, env={"XPU_TRACED_PYTHON_API": api})
    out = run.json()
    # Behaviour unchanged by the wrappers.
    assert out == [2, 6, ["Thing", 4], "deep", -5, "negative", "SourceFileLoader",
                   "SourceFileLoader", "func"]
    names = [e["sig"]["name"] for e in run.events("api")]
    assert names == ["usermod@Thing.method", "usermod@Thing.static", "usermod@Thing.klass",
                     "usermod@Thing.Inner.deep", "usermod@func", "usermod@func"]
    failed = [e["flags"] & (1 << 9) != 0 for e in run.events("api")]
    assert failed == [False] * 5 + [True]


def test_module_imported_before_install_is_patched(run_traced):
    # posixpath (os.path) is imported by the interpreter before sitecustomize
    # runs, so this exercises the "already in sys.modules" path.
    code = r'''
import json, os, sys, time
t0 = time.time_ns()
r = [os.path.isabs("/x"), os.path.isabs("y"), os.path.isabs("/z")]
t1 = time.time_ns()
print(json.dumps({"r": r, "t0": t0, "t1": t1, "early": "posixpath" in sys.modules}))
'''
    run = run_traced(code, env={"XPU_TRACED_PYTHON_API": "posixpath@isabs"})
    rep = run.json()
    assert rep["r"] == [True, False, True]
    evs = [e for e in run.events("api", "posixpath@isabs")
           if rep["t0"] <= e["start_ns"] <= rep["t1"]]
    assert len(evs) == 3


def test_not_traced_without_config(run_traced, tmp_path):
    (tmp_path / "usermod.py").write_text(MOD)
    run = run_traced("import usermod\nusermod.func(1)\n")
    assert run.events("api") == []
