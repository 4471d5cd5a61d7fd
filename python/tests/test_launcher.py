"""`python -m xputimer run -- cmd` / xpu-run: environment and exec."""

import os
import subprocess
import sys

from conftest import AUTOLOAD, PY_ROOT


def launcher(args, env_extra, **kw):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("XPU_HOOK_LIB", None)
    env["PYTHONPATH"] = PY_ROOT
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "xputimer", "run"] + args, env=env,
                          capture_output=True, text=True, timeout=50, **kw)


def test_print_env_prepends_and_dedupes(hook_lib):
    # XPU_PYTHON_DIR: a real hook preloaded into the launcher itself would
    # otherwise add its build-tree copy of the autoload directory.
    out = launcher(["--print-env"], {"XPU_HOOK_LIB": hook_lib, "XPU_PYTHON_DIR": AUTOLOAD,
                                     "LD_PRELOAD": "libother.so " + hook_lib})
    assert out.returncode == 0, out.stderr
    env = dict(line.split("=", 1) for line in out.stdout.splitlines())
    assert env["LD_PRELOAD"] == os.path.abspath(hook_lib) + ":libother.so"
    assert env["PYTHONPATH"].split(os.pathsep) == [AUTOLOAD, PY_ROOT]
    assert env["XPU_PYTHON_DIR"] == AUTOLOAD


def test_missing_hook_is_an_error(tmp_path):
    out = launcher(["--hook", str(tmp_path / "nope.so"), "--", "true"], {})
    assert out.returncode == 2 and "not found" in out.stderr


def test_run_traces_a_python_child(hook_lib, tmp_path):
    ring_dir = tmp_path / "rings"
    ring_dir.mkdir()
    script = tmp_path / "train.py"
    script.write_text("import gc, os, json\nn = gc.collect(2)\nprint('PID=%d' % os.getpid())\n")
    out = launcher(["--", sys.executable, str(script)],
                   {"XPU_HOOK_LIB": hook_lib, "XPU_RING_DIR": str(ring_dir)})
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout.strip().split("=")[1])
    from xputimer import ring
    d = ring.read_ring(str(ring_dir / ("xpu-ring-%d.bin" % pid)))
    kinds = {d["signatures"][r["sig_id"]]["kind"] for r in d["records"]}
    assert 64 in kinds  # the child's gc.collect was traced with no code change


def test_exit_status_of_command_is_kept(hook_lib):
    out = launcher(["--", sys.executable, "-c", "raise SystemExit(7)"],
                   {"XPU_HOOK_LIB": hook_lib})
    assert out.returncode == 7
