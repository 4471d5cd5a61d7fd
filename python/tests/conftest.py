"""Shared fixtures: the C API library to preload, and a runner that starts a
real Python subprocess under it and returns the ring file it wrote.

The library is $XPU_TEST_HOOK_LIB when set (e.g. the real libxpu_hook.so),
else $XPU_TEST_FAKE_HOOK_LIB (set by CTest to the built test double), else
the test double compiled here from fake_hook_api.c.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PY_ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(PY_ROOT)
AUTOLOAD = os.path.join(PY_ROOT, "xputimer", "_autoload")

sys.path.insert(0, PY_ROOT)

OP = {"gc": 64, "dataloader": 65, "sync": 66, "optimizer": 67, "checkpoint": 68,
      "api": 69, "step": 70, "annotation": 71, "callsite": 72}


@pytest.fixture(scope="session")
def hook_lib(tmp_path_factory):
    for var in ("XPU_TEST_HOOK_LIB", "XPU_TEST_FAKE_HOOK_LIB"):
        path = os.environ.get(var)
        if path:
            assert os.path.isfile(path), "%s=%s does not exist" % (var, path)
            return path
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the hook C API test double")
    out = str(tmp_path_factory.mktemp("fakehook") / "libxpu_fake_hook_api.so")
    subprocess.run([cc, "-O1", "-shared", "-fPIC", "-I", os.path.join(REPO, "include"),
                    os.path.join(HERE, "fake_hook_api.c"), "-o", out, "-lpthread"], check=True)
    return out


class Run:
    def __init__(self, proc, ring_path, stdout, stderr):
        self.proc, self.ring_path, self.stdout, self.stderr = proc, ring_path, stdout, stderr
        self._ring = None

    @property
    def ring(self):
        if self._ring is None:
            from xputimer import ring
            if os.path.isfile(self.ring_path):
                self._ring = ring.read_ring(self.ring_path)
            else:  # a hook may create its ring lazily, at the first event
                self._ring = {"header": {}, "signatures": {}, "records": [], "errors": {}}
        return self._ring

    def events(self, kind, name=None):
        """Records of a signature kind (and name), each with its signature."""
        sigs = self.ring["signatures"]
        out = []
        for r in self.ring["records"]:
            s = sigs[r["sig_id"]]
            if s["kind"] == OP[kind] and (name is None or s["name"] == name):
                out.append(dict(r, sig=s))
        return out

    def json(self):
        """The last stdout line, parsed as JSON (what the child reported)."""
        return json.loads(self.stdout.strip().splitlines()[-1])


@pytest.fixture
def run_traced(hook_lib, tmp_path):
    counter = [0]

    def run(code, env=None, preload=True, autoload=True, args=(), cwd=None, timeout=50,
            extra_path=(), python=None):
        counter[0] += 1
        ring_dir = tmp_path / ("rings%d" % counter[0])
        ring_dir.mkdir()
        script = tmp_path / ("child%d.py" % counter[0])
        script.write_text(code)
        e = dict(os.environ)
        for k in ("XPU_TRACED_PYTHON_API", "TRACED_PYTHON_API", "XPU_PYTHON", "LD_PRELOAD"):
            e.pop(k, None)
        e["XPU_RING_DIR"] = str(ring_dir)
        paths = [AUTOLOAD] if autoload else []
        paths.append(str(tmp_path))  # test modules written by the test
        paths.extend(extra_path)
        e["PYTHONPATH"] = os.pathsep.join(paths)
        # The real hook would otherwise prepend its own copy of the autoload
        # directory (build tree) in front of the source tree's.
        e["XPU_PYTHON_DIR"] = AUTOLOAD
        if preload:
            e["LD_PRELOAD"] = hook_lib
        e.update(env or {})
        proc = subprocess.run([python or sys.executable, str(script)] + list(args), env=e,
                              capture_output=True, text=True, timeout=timeout,
                              cwd=cwd or str(tmp_path))
        assert proc.returncode == 0, "child failed:\n%s\n%s" % (proc.stdout, proc.stderr)
        ring_path = os.path.join(str(ring_dir), "xpu-ring-%d.bin" % proc_pid(proc, ring_dir))
        return Run(proc, ring_path, proc.stdout, proc.stderr)

    return run


def proc_pid(proc, ring_dir):
    # subprocess.run does not expose the pid; the child is the only process
    # started in a fresh ring dir unless the test forks, so pick the file of
    # the process that reported PID= on stdout, else the single file.
    for line in proc.stdout.splitlines():
        if line.startswith("PID="):
            return int(line[4:])
    files = sorted(os.listdir(str(ring_dir)))
    if len(files) == 1:
        return int(files[0][len("xpu-ring-"):-len(".bin")])
    return -1
