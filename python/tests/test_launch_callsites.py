"""Python call sites on sampled GEMM and collective launches, end to end.

A real Python process runs under the real libxpu_hook.so on the GPU-less
runtime (tests/fake_runtime): the fake libcudart / libcublas / libnccl are
loaded RTLD_GLOBAL and their functions are called through the process's
global symbol scope, where the preloaded hook's interposers come first, as
they do for a CUDA extension module. ctypes.PyDLL keeps the GIL during the
foreign call; ctypes.CDLL releases it, which is how a launch from a thread
that does not hold the GIL is made here.

Each launch line also asks xputimer.callsite() / callsite_sig() for its own
stack on the same source line, so the child knows exactly which frames, lines
and signature the hook must have recorded. Every occurrence is sampled
(XPU_SAMPLE_FIRST=0, XPU_SAMPLE_EVERY=1).

Needs the real hook (XPU_TEST_HOOK_LIB) and the fake runtime's libraries
(XPU_TEST_FAKE_LIB_DIR, or <build>/fake_runtime/lib next to the hook's
<build>/hook); skipped otherwise (the suite also runs against the C API test
double, which has no interposers).
"""

import glob
import os

import pytest

from xputimer import ring

GEMM, ALLREDUCE = 2, 16

CHILD = r'''
import ctypes, json, os, sys, threading, time
from ctypes import byref, c_int, c_size_t, c_void_p
from xputimer.callsite import callsite, callsite_sig

LIB = os.environ["FAKE_LIB_DIR"]
for name in ("libcudart.so.13", "libcublas.so.13", "libnccl.so.2"):
    ctypes.CDLL(os.path.join(LIB, name), mode=os.RTLD_GLOBAL)
HOLD = ctypes.PyDLL(None)  # global scope: the hook's interposers; GIL kept
FREE = ctypes.CDLL(None)   # same functions; the GIL is released during the call

class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]

GEMM_ARGS = [c_void_p, c_int, c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_int, c_void_p,
             c_int, c_void_p, c_void_p, c_int]
AR_ARGS = [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]
for lib in (HOLD, FREE):
    lib.cublasSgemm_v2.argtypes = GEMM_ARGS
    lib.ncclAllReduce.argtypes = AR_ARGS
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(c_void_p), c_int, UniqueId, c_int]
    lib.ncclCommDestroy.argtypes = [c_void_p]

H = c_void_p()
assert HOLD.cublasCreate_v2(byref(H)) == 0
uid = UniqueId()
assert HOLD.ncclGetUniqueId(byref(uid)) == 0
COMM = c_void_p()
assert HOLD.ncclCommInitRank(byref(COMM), 1, uid, 0) == 0
calls = []

def note(kind, n, gil, frames, sig):
    calls.append({"kind": kind, "n": n, "gil": gil, "frames": list(frames), "sig": sig})

def matmul(lib, n):
    rc = lib.cublasSgemm_v2(H, 0, 0, n, n, n, None, None, n, None, n, None, None, n); frames = callsite(); sig = callsite_sig()
    assert rc == 0
    note("gemm", n, lib is HOLD, frames, sig)

def allreduce(lib, count):
    rc = lib.ncclAllReduce(None, None, count, 7, 0, COMM, None); frames = callsite(); sig = callsite_sig()
    assert rc == 0
    note("allreduce", count, lib is HOLD, frames, sig)

def grouped(count_a, count_b):
    HOLD.ncclGroupStart()
    assert HOLD.ncclAllReduce(None, None, count_a, 7, 0, COMM, None) == 0
    assert HOLD.ncclAllReduce(None, None, count_b, 7, 0, COMM, None) == 0
    rc = HOLD.ncclGroupEnd(); frames = callsite(); sig = callsite_sig()
    assert rc == 0
    note("allreduce", count_a, True, frames, sig)
    note("allreduce", count_b, True, frames, sig)

def layer(lib, n):
    matmul(lib, n)

def train_step(step):
    layer(HOLD, 64)
    layer(FREE, 32)         # GIL released: a stack only from the GIL-free walk
    allreduce(HOLD, 1024)
    allreduce(FREE, 512)    # GIL released: a stack only from the GIL-free walk
    if step == 0:
        grouped(2048, 4096)

# The first traced call starts the hook's background thread, which resolves
# the CUDA runtime and creates the event pool: warm up (8x8x8 GEMMs, GIL
# released, so no call sites) until a GPU-timed record shows that launches
# are completion-tracked, i.e. written after their call-site links.
from xputimer import ring as xring
RING = os.path.join(os.environ["XPU_RING_DIR"], "xpu-ring-%d.bin" % os.getpid())
deadline = time.time() + 20
while True:
    FREE.cublasSgemm_v2(H, 0, 0, 8, 8, 8, None, None, 8, None, 8, None, None, 8)
    FREE.cudaDeviceSynchronize()
    time.sleep(0.05)
    if any(r["flags"] & 1 for r in xring.read_ring(RING)["records"]):
        break
    assert time.time() < deadline, "launches never became completion-tracked"
for step in range(3):
    train_step(step)
t = threading.Thread(target=matmul, args=(HOLD, 16))  # another Python thread, GIL held
t.start()
t.join()
HOLD.cudaDeviceSynchronize()
assert HOLD.ncclCommDestroy(COMM) == 0
time.sleep(0.3)  # let the completion thread write the last records
GIL_FREE = sys.modules["xputimer.callsite"].GIL_FREE  # the module, not the function
print("PID=%d" % os.getpid())
print("GIL_FREE=%d" % GIL_FREE)
print(json.dumps(calls))
'''


@pytest.fixture
def fake_lib_dir(hook_lib):
    if not os.environ.get("XPU_TEST_HOOK_LIB"):
        pytest.skip("needs the real libxpu_hook.so (XPU_TEST_HOOK_LIB)")
    d = os.environ.get("XPU_TEST_FAKE_LIB_DIR") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(hook_lib))), "fake_runtime", "lib")
    if not os.path.isfile(os.path.join(d, "libcublas.so.13")):
        pytest.skip("no GPU-less runtime at %s" % d)
    return d


def run_child(run_traced, fake_lib_dir, depth=None, gil_free=True, python=None):
    env = {"FAKE_LIB_DIR": fake_lib_dir, "XPU_DAEMON": "off", "XPU_SAMPLE_FIRST": "0",
           "XPU_SAMPLE_EVERY": "1", "XPU_PYTHON_GC": "0", "XPU_PYTHON_TORCH": "0",
           "XPU_PY_STACK_GIL_FREE": "1" if gil_free else "0"}
    if depth is not None:
        env["XPU_PY_STACK_DEPTH"] = str(depth)
    run = run_traced(CHILD, env=env, timeout=60, python=python)
    on = [l for l in run.stdout.splitlines() if l.startswith("GIL_FREE=")]
    assert on == ["GIL_FREE=%d" % int(gil_free)], run.stdout[-500:] + run.stderr[-2000:]
    return run, run.json(), run.ring


def launch_key(sig):
    return ("gemm", sig["m"]) if sig["kind"] == GEMM else ("allreduce", sig["count"])


@pytest.mark.parametrize("depth,gil_free", [(None, True), (2, True), (None, False)])
def test_sampled_launches_link_the_exact_python_stack(run_traced, fake_lib_dir, depth, gil_free):
    run, calls, data = run_child(run_traced, fake_lib_dir, depth, gil_free)
    check_links(calls, data, depth, gil_free)


def check_links(calls, data, depth, gil_free):
    sigs = data["signatures"]
    # Warm-up launches (8x8x8, at module level) are not part of the check.
    links = [l for l in ring.callsites(data) if launch_key(sigs[l["launch_sig_id"]]) != ("gemm", 8)]
    # Without the GIL-free walk only launches made with the GIL held have a
    # stack; with it, every sampled launch has.
    held = [c for c in calls if c["gil"] or gil_free]
    assert len([c for c in calls if c["gil"]]) == 3 * 2 + 2 + 1
    assert len(held) == (3 * 4 + 2 + 1 if gil_free else 3 * 2 + 2 + 1)
    assert len(links) == len(held)
    # Each link names the stack the child saw on the launch line, and joins
    # to a launch of the right shape; no launch is claimed twice.
    expected = sorted((launch_key_of(c), c["frames"]) for c in held)
    got = sorted((launch_key(sigs[l["launch_sig_id"]]), l["frames"]) for l in links)
    assert got == expected
    claimed = [l["launch"]["pos"] for l in links]
    assert None not in claimed and len(set(claimed)) == len(claimed)
    for l in links:
        launch = l["launch"]
        assert (launch["sig_id"], launch["seq"], launch["stream"]) == \
            (l["launch_sig_id"], l["seq"], l["stream"])
        assert sigs[l["stack_sig_id"]]["kind"] == ring.OP_PY_CALLSITE
    # The hook and xputimer.callsite_sig() intern the same stack once.
    by_frames = {tuple(c["frames"]): c["sig"] for c in held}
    for l in links:
        assert l["stack_sig_id"] == by_frames[tuple(l["frames"])]
    # Exact frames: function names and the launch line.
    want_depth = depth or 8
    gemm = next(l for l in links if launch_key(sigs[l["launch_sig_id"]]) == ("gemm", 64))
    assert len(gemm["frames"]) == min(want_depth, 4)  # matmul, layer, train_step, <module>
    assert gemm["frames"][0].startswith("matmul@") and gemm["frames"][0].endswith(
        ":%d" % matmul_line())
    assert gemm["frames"][1].startswith("layer@")
    grouped = [l for l in links if launch_key(sigs[l["launch_sig_id"]]) in
               (("allreduce", 2048), ("allreduce", 4096))]
    assert len(grouped) == 2 and grouped[0]["frames"] == grouped[1]["frames"]
    assert grouped[0]["frames"][0].startswith("grouped@")
    threaded = next(l for l in links if launch_key(sigs[l["launch_sig_id"]]) == ("gemm", 16))
    assert threaded["frames"][0].startswith("matmul@")
    assert threaded["frames"][1].split("@")[0].endswith("run")  # threading.Thread.run
    # Launches made with the GIL released are traced; without the GIL-free
    # walk they carry no stack. Occurrences are the records without
    # XPU_REC_PLUGIN: the test NCCL's profiler plugin may add a timing record
    # of the same collective.
    linked_sigs = {l["launch_sig_id"] for l in links}
    free = [r for r in data["records"] if sigs[r["sig_id"]]["kind"] in (GEMM, ALLREDUCE) and
            not r["flags"] & ring.REC_PLUGIN and
            launch_key(sigs[r["sig_id"]]) in (("gemm", 32), ("allreduce", 512))]
    assert len(free) == 6
    if gil_free:
        assert {r["sig_id"] for r in free} <= linked_sigs
        free_gemm = next(l for l in links if launch_key(sigs[l["launch_sig_id"]]) == ("gemm", 32))
        assert free_gemm["frames"][0].startswith("matmul@")
        assert free_gemm["frames"][0].endswith(":%d" % matmul_line())
    else:
        assert not linked_sigs & {r["sig_id"] for r in free}
    # Completion-tracked launches are written after their links: the join
    # is by key, not by position.
    stack_sigs = {l["stack_sig_id"] for l in links}
    raw_links = [r for r in data["records"] if r["sig_id"] in stack_sigs]
    assert len(raw_links) == len(links)
    assert any(l["launch"]["pos"] > r["pos"] for r, l in zip(raw_links, links))


def other_pythons():
    """CPython 3.10-3.13 interpreters to run the child under, besides this
    one: $XPU_TEST_PYTHONS (':'-separated), else pyenv's."""
    env = os.environ.get("XPU_TEST_PYTHONS")
    if env is not None:
        found = [p for p in env.split(":") if p]
    else:
        root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
        found = []
        for minor in (10, 11, 12, 13):
            c = sorted(glob.glob(os.path.join(root, "versions", "3.%d.*" % minor, "bin",
                                              "python3.%d" % minor)))
            if c:
                found.append(c[-1])
    return [p for p in found if os.access(p, os.X_OK)]


@pytest.mark.parametrize("python", other_pythons() or [None])
def test_gil_free_walk_on_each_interpreter(run_traced, fake_lib_dir, python):
    # The layouts are per minor version: every available CPython 3.10-3.13
    # must pass the hook's self-test and then name GIL-free launches exactly.
    if python is None:
        pytest.skip("no other CPython 3.10-3.13 found (XPU_TEST_PYTHONS or pyenv)")
    run, calls, data = run_child(run_traced, fake_lib_dir, None, True, python=python)
    check_links(calls, data, None, True)


def launch_key_of(call):
    return (call["kind"], call["n"])


def matmul_line():
    for i, line in enumerate(CHILD.splitlines(), 1):
        if "lib.cublasSgemm_v2(H" in line:
            return i
    raise AssertionError("no matmul line")


def test_depth_zero_disables_call_sites(run_traced, fake_lib_dir):
    run, calls, data = run_child(run_traced, fake_lib_dir, depth=0, gil_free=False)
    sigs = data["signatures"]
    launches = [r for r in data["records"] if sigs[r["sig_id"]]["kind"] in (GEMM, ALLREDUCE) and
                not r["flags"] & ring.REC_PLUGIN and  # occurrences, not plugin timing
                launch_key(sigs[r["sig_id"]]) != ("gemm", 8)]  # not the warm-up
    assert len(launches) == len(calls) == 3 * 4 + 2 + 1
    assert ring.callsites(data) == []
    assert not [r for r in data["records"] if sigs[r["sig_id"]]["kind"] == ring.OP_PY_CALLSITE]
