#!/usr/bin/env python3
"""End to end: the kernel call-site flame graph of `xpu timeline dump` joins
Python stacks to their launches exactly.

A Python process runs "model code" on the GPU-less runtime under
libxpu_hook.so, reporting to a real xpu-daemon and xpu-engine: GEMMs and
AllReduces issued from known functions with the GIL held (ctypes.PyDLL), and
GEMMs of another shape issued with the GIL released (ctypes.CDLL) while the
hook's GIL-free frame walk is off (XPU_PY_STACK_GIL_FREE=0), every
occurrence sampled. The child computes, on each launch line, its own stack in
the documented format (an oracle independent of the hook and of xputimer).
`xpu timeline dump` must then report every call-site sample linked exactly
(none placed by time, none unlinked), its folded stacks must be exactly the
child's stacks with the right leaf per launch, the GIL-released GEMMs must not
appear, the SVG must colour GEMMs and collectives, and the Perfetto trace must
carry each launch's stack as its "callsite" argument.

usage: test_callsite_flamegraph.py PATHS_JSON
"""
import collections
import json
import os
import subprocess
import sys

from pipeline_harness import check, engine_ranks, log, run_test, wait_for

STEPS = 5

CHILD = r'''
import ctypes, json, os, sys, time
from ctypes import byref, c_int, c_size_t, c_void_p

for name in ("libcudart.so.13", "libcublas.so.13", "libnccl.so.2"):
    ctypes.CDLL(os.path.join(os.environ["FAKE_LIB_DIR"], name), mode=os.RTLD_GLOBAL)
HOLD = ctypes.PyDLL(None)  # the hook's interposers, GIL kept during the call
FREE = ctypes.CDLL(None)   # the same, GIL released
GEMM_ARGS = [c_void_p, c_int, c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_int, c_void_p,
             c_int, c_void_p, c_void_p, c_int]

class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]

for lib in (HOLD, FREE):
    lib.cublasSgemm_v2.argtypes = GEMM_ARGS
    lib.ncclAllReduce.argtypes = [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]
HOLD.ncclCommInitRank.argtypes = [ctypes.POINTER(c_void_p), c_int, UniqueId, c_int]
HOLD.ncclCommDestroy.argtypes = [c_void_p]
H = c_void_p()
assert HOLD.cublasCreate_v2(byref(H)) == 0
uid = UniqueId()
assert HOLD.ncclGetUniqueId(byref(uid)) == 0
COMM = c_void_p()
assert HOLD.ncclCommInitRank(byref(COMM), 1, uid, 0) == 0
launches = []

def stack():
    """The caller's frames, innermost first, "qualname@file:line" (record.h)."""
    f, out = sys._getframe(1), []
    while f is not None and len(out) < 8:
        code = f.f_code
        out.append("%s@%s:%d" % (getattr(code, "co_qualname", code.co_name), code.co_filename, f.f_lineno))
        f = f.f_back
    return out

def matmul(lib, n):
    assert lib.cublasSgemm_v2(H, 0, 0, n, n, n, None, None, n, None, n, None, None, n) == 0; s = stack()
    if lib is HOLD:
        launches.append(["gemm", n, s])

def allreduce_grads(count):
    assert HOLD.ncclAllReduce(None, None, count, 7, 0, COMM, None) == 0; s = stack()
    launches.append(["allreduce", count, s])

class Block:
    def forward(self):
        matmul(HOLD, 64)
        matmul(FREE, 32)

def train_step(block):
    block.forward()
    allreduce_grads(1 << 20)

block = Block()
for step in range(int(sys.argv[1])):
    train_step(block)
    time.sleep(0.02)
HOLD.cudaDeviceSynchronize()
assert HOLD.ncclCommDestroy(COMM) == 0
with open(sys.argv[2] + ".tmp", "w") as f:
    json.dump(launches, f)
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
time.sleep(600)  # stays alive: the dump asks its daemon
'''


def body(pipe):
    with open(sys.argv[1]) as f:
        extra = json.load(f)
    engine = pipe.start_engine()
    pipe.start_daemon(engine.addr)
    job = "e2ecs-%d" % os.getpid()
    jdir = os.path.join(pipe.dir, "job")
    rings = os.path.join(jdir, "rings")
    os.makedirs(rings)
    script = os.path.join(jdir, "model.py")
    with open(script, "w") as f:
        f.write(CHILD)
    report = os.path.join(jdir, "launches.json")
    env = pipe.job_env(job, rings, os.path.join(jdir, "calls"))
    env.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
                "LD_PRELOAD": pipe.paths.hook, "FAKE_LIB_DIR": pipe.paths.fake_lib_dir,
                "XPU_SAMPLE_FIRST": "0", "XPU_SAMPLE_EVERY": "1", "PYTHONDONTWRITEBYTECODE": "1",
                # The GIL-released GEMMs are the control group: without the
                # GIL-free walk (python/tests/test_launch_callsites.py covers
                # it) they have no stack.
                "XPU_PY_STACK_GIL_FREE": "0"})
    child = pipe.spawn("model", [sys.executable, script, str(STEPS), report], env)
    def reported():
        check(child.alive() or os.path.exists(report), "child exited:\n%s" % child.log_text())
        return os.path.exists(report)
    wait_for(reported, 60, "the child's launches")
    with open(report) as f:
        launches = json.load(f)
    check(len(launches) == 2 * STEPS, "child launches: %s" % launches)

    def engine_has_all():
        r = engine_ranks(pipe, engine.addr, job)
        # 3 launches and 2 links per step, comm init/destroy, a sync.
        return r if 0 in r and r[0]["records"] >= 5 * STEPS + 3 else None
    wait_for(engine_has_all, 60, "the engine to see the child's records", 0.5)

    out = os.path.join(pipe.dir, "dump")
    r = pipe.cli(engine.addr, "timeline", "dump", "--job", job, "--out", out, "--format", "both",
                 "--deadline-s", "20")
    log(r.stdout.decode())
    with open(os.path.join(out, "dump.json")) as f:
        manifest = json.load(f)
    cs = manifest["callsites"]
    check(cs == {"samples": 2 * STEPS, "linked_exact": 2 * STEPS, "linked_nearby": 0, "unlinked": 0},
          "callsite stats: %s" % cs)
    check("linked to their launch" in r.stdout.decode(), r.stdout.decode())

    # Folded stacks: outermost first, then the leaf of the launch each sample
    # is joined to, weighted by its GPU time.
    want = collections.Counter()
    for kind, n, frames in launches:
        leaf = "[gemm] cublasSgemm_v2 %dx%dx%d" % (n, n, n) if kind == "gemm" else \
            "[allreduce] allreduce 4.0 MiB"
        want[";".join(list(reversed(frames)) + [leaf])] += 1
    got = {}
    with open(manifest["files"]["folded"]) as f:
        for line in f:
            stack, weight = line.rstrip("\n").rsplit(" ", 1)
            got[stack] = int(weight)
    check(set(got) == set(want), "folded stacks:\n%s\nwant:\n%s" % ("\n".join(got), "\n".join(want)))
    check(all(w > 0 for w in got.values()), "weights: %s" % got)
    check(not any("32x32x32" in k for k in got), "a GIL-released GEMM has a stack: %s" % list(got))
    gemm_stack = next(k for k in got if "[gemm]" in k)
    check(";Block.forward@" in gemm_stack or ";forward@" in gemm_stack, gemm_stack)
    with open(manifest["files"]["svg"]) as f:
        svg = f.read()
    check(svg.startswith("<?xml") and "#f28e2b" in svg and "#4e79a7" in svg, "svg colours")
    check("%d samples, %d linked to their launch)" % (2 * STEPS, 2 * STEPS) in svg, "svg title")

    # The traces carry each launch's stack; the links themselves are not drawn.
    for fmt, path in (("--perfetto", manifest["files"]["perfetto"]), ("--json", manifest["files"]["json"])):
        v = subprocess.run([extra["trace_validate"], fmt, path], stdout=subprocess.PIPE, timeout=60)
        pv = json.loads(v.stdout)
        check(v.returncode == 0 and pv["ok"], "%s invalid: %s" % (fmt, pv["errors"]))
        expect = collections.Counter()
        for kind, n, frames in launches:
            name = "cublasSgemm_v2 %dx%dx%d" % (n, n, n) if kind == "gemm" else "allreduce 4.0 MiB"
            expect["%s|%s" % (name, ";".join(frames))] += 1
        check(pv["callsites"] == dict(expect), "%s callsite args: %s\nwant %s" % (fmt, pv["callsites"], expect))
        check(not any(n.startswith("py_callsite ") for n in pv["names"]), "links drawn: %s" % pv["names"])

    # The same join from the ring file, with xpu-ring-dump.
    ring = [os.path.join(rings, n) for n in os.listdir(rings)]
    check(len(ring) == 1, "rings: %s" % ring)
    d = subprocess.run([pipe.paths.ring_dump, "--json", ring[0]], stdout=subprocess.PIPE, timeout=60)
    recs = [json.loads(line) for line in d.stdout.decode().splitlines()]
    links = [x for x in recs if x.get("kind") == "py_callsite" and "launch" in x]
    check(len(links) == 2 * STEPS and all(x["launch"]["position"] is not None for x in links),
          "ring links: %s" % links[:3])
    joined = [x for x in recs if "callsite" in x]
    check(len(joined) == 2 * STEPS and all(x["kind"] in ("gemm", "allreduce") for x in joined),
          "ring launches with a call site: %s" % joined[:3])


if __name__ == "__main__":
    run_test("callsites", body)
