#!/usr/bin/env python3
"""CPU cost of Python call sites on sampled launches (hook/process/py_callsite.h),
measured from Python on the GPU-less runtime. Prints figures; never asserts
on them.

    callsite_bench.py --hook LIB --fake-lib-dir DIR [--iters N] [--repeats R]

The benchmark re-executes itself as children under libxpu_hook.so, one per
configuration, alternately R times (default 3); each figure is the smallest
of the R medians (batches of 256 calls, the stream synchronized between
batches outside the timed region):

    not sampled    XPU_SAMPLE_FIRST=0 XPU_SAMPLE_EVERY=0: traced, never picked
    no stack       every launch sampled, XPU_PY_STACK_DEPTH=0
    stack          every launch sampled, XPU_PY_STACK_DEPTH=8 (the default):
                   the GIL-free walk (py_frames.h), turned on by the child's
                   import of xputimer
    C-API stack    the same with XPU_PY_STACK_GIL_FREE=0: the C-API walk,
                   only for launches made with the GIL held

and, in each child, the loops

    GEMM, GIL held        cublasSgemm_v2 through ctypes.PyDLL, called 7 Python
                          frames deep (a stack of 8 frames with <module>)
    GEMM, GIL released    the same through ctypes.CDLL, as PyTorch launches
    AllReduce, GIL held   ncclAllReduce on a 1-rank communicator, PyDLL
    GEMM, new stack       1024 distinct call sites, each called once: every
                          call is a cache miss (names the stack, interns it)

"added" = stack - no stack (and C-API stack - no stack): the CPU time the
call-site walk adds to a sampled launch. The ctypes call and the runtime's own enqueue are in
every figure alike; read the added ns against the no-stack baseline.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BATCH = 256
CONFIGS = [
    ("not sampled", {"XPU_SAMPLE_FIRST": "0", "XPU_SAMPLE_EVERY": "0", "XPU_PY_STACK_DEPTH": "8"}),
    ("no stack", {"XPU_SAMPLE_FIRST": "0", "XPU_SAMPLE_EVERY": "1", "XPU_PY_STACK_DEPTH": "0"}),
    ("stack", {"XPU_SAMPLE_FIRST": "0", "XPU_SAMPLE_EVERY": "1", "XPU_PY_STACK_DEPTH": "8"}),
    ("C-API stack", {"XPU_SAMPLE_FIRST": "0", "XPU_SAMPLE_EVERY": "1", "XPU_PY_STACK_DEPTH": "8",
                     "XPU_PY_STACK_GIL_FREE": "0"}),
]
LOOPS = [("gemm_hold", "GEMM, GIL held"), ("gemm_free", "GEMM, GIL released"),
         ("ar_hold", "AllReduce, GIL held"), ("miss", "GEMM, new stack (cache miss)")]


def child(iters):
    import ctypes
    from ctypes import byref, c_int, c_size_t, c_void_p
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import xputimer.callsite  # noqa: F401  (the GIL-free walk's self-test)
    gil_free = sys.modules["xputimer.callsite"].GIL_FREE
    lib_dir = os.environ["FAKE_LIB_DIR"]
    for name in ("libcudart.so.13", "libcublas.so.13", "libnccl.so.2"):
        ctypes.CDLL(os.path.join(lib_dir, name), mode=os.RTLD_GLOBAL)
    hold, free = ctypes.PyDLL(None), ctypes.CDLL(None)

    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_char * 128)]

    gemm_args = [c_void_p, c_int, c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_int, c_void_p,
                 c_int, c_void_p, c_void_p, c_int]
    for lib in (hold, free):
        lib.cublasSgemm_v2.argtypes = gemm_args
        lib.ncclAllReduce.argtypes = [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]
    hold.ncclCommInitRank.argtypes = [ctypes.POINTER(c_void_p), c_int, UniqueId, c_int]
    hold.ncclCommDestroy.argtypes = [c_void_p]
    h = c_void_p()
    assert hold.cublasCreate_v2(byref(h)) == 0
    uid = UniqueId()
    assert hold.ncclGetUniqueId(byref(uid)) == 0
    comm = c_void_p()
    assert hold.ncclCommInitRank(byref(comm), 1, uid, 0) == 0
    g_hold, g_free, ar = hold.cublasSgemm_v2, free.cublasSgemm_v2, hold.ncclAllReduce

    # 7 Python frames down to the launch, as in model code.
    def launch_gemm_hold():
        g_hold(h, 0, 0, 64, 64, 64, None, None, 64, None, 64, None, None, 64)

    def launch_gemm_free():
        g_free(h, 0, 0, 64, 64, 64, None, None, 64, None, 64, None, None, 64)

    def launch_ar():
        ar(None, None, 1024, 7, 0, comm, None)

    def nest(fn, depth):
        if depth == 0:
            return fn
        inner = nest(fn, depth - 1)
        return lambda: inner()

    loops = {"gemm_hold": nest(launch_gemm_hold, 5), "gemm_free": nest(launch_gemm_free, 5),
             "ar_hold": nest(launch_ar, 5)}
    # Distinct call sites: one code object each (a cache miss each time).
    sites = []
    for i in range(1024):
        ns = {"g": g_hold, "h": h}
        exec(compile("def site_%d():\n    g(h, 0, 0, 64, 64, 64, None, None, 64, None, 64, None, None, 64)\n" % i,
                     "<site %d>" % i, "exec"), ns)
        sites.append(nest(ns["site_%d" % i], 5))

    def batches(fn, n):
        out = []
        for _ in range(max(1, n // BATCH)):
            t0 = time.perf_counter_ns()
            for _ in range(BATCH):
                fn()
            out.append((time.perf_counter_ns() - t0) / BATCH)
            hold.cudaDeviceSynchronize()
        return statistics.median(out)

    # Warm up: the hook's background thread resolves the runtime and creates
    # its event pool on first use.
    for fn in loops.values():
        batches(fn, 4 * BATCH)
    time.sleep(0.3)
    res = {name: batches(fn, iters) for name, fn in loops.items()}
    t0 = time.perf_counter_ns()
    for fn in sites:
        fn()
    res["miss"] = (time.perf_counter_ns() - t0) / len(sites)
    hold.cudaDeviceSynchronize()
    assert hold.ncclCommDestroy(comm) == 0
    res["pid"] = os.getpid()
    res["gil_free"] = gil_free
    print(json.dumps(res))


def ring_counts(path):
    """(dropped records, call-site links) of a child's ring file."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from xputimer import ring
    data = ring.read_ring(path)
    return data["header"]["counters"][0], len(ring.callsites(data))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hook", required=True)
    ap.add_argument("--fake-lib-dir", required=True)
    ap.add_argument("--iters", type=int, default=20480)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.iters)
    best = {}
    extra = {}
    ring_dir = tempfile.mkdtemp(prefix="xpu-callsite-bench.")
    for _ in range(a.repeats):
        for cfg, env_add in CONFIGS:
            env = dict(os.environ)
            env.pop("PYTHONPATH", None)
            env.update(env_add)
            env.update({"LD_PRELOAD": a.hook, "FAKE_LIB_DIR": a.fake_lib_dir, "XPU_DAEMON": "off",
                        "XPU_PYTHON": "on", "XPU_PYTHON_GC": "0", "XPU_RING_DIR": ring_dir,
                        "XPU_RING_CAPACITY": str(1 << 21), "XPU_SIG_CAPACITY": "16384",
                        "XPU_STR_CAPACITY": str(1 << 24), "XPU_FAKE_KERNEL_NS": "0",
                        "XPU_FAKE_TFLOPS": "1e9", "XPU_FAKE_NET_GBPS": "1e9", "RANK": "0",
                        "WORLD_SIZE": "1"})
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--iters",
                                str(a.iters), "--hook", a.hook, "--fake-lib-dir", a.fake_lib_dir],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=600)
            if p.returncode != 0:
                sys.stderr.write("child (%s) failed:\n%s%s" % (cfg, p.stdout, p.stderr))
                return 1
            r = json.loads(p.stdout.strip().splitlines()[-1])
            path = os.path.join(ring_dir, "xpu-ring-%d.bin" % r["pid"])
            extra[cfg] = ring_counts(path) + (r["gil_free"],)
            os.unlink(path)
            for loop, _ in LOOPS:
                key = (cfg, loop)
                best[key] = min(best.get(key, float("inf")), r[loop])
    os.rmdir(ring_dir)
    print("callsite_bench: ns per call from Python (ctypes), min of %d medians, %d calls per loop"
          % (a.repeats, a.iters))
    print("  %-30s %12s %12s %12s %12s %10s %10s" % ("loop", "not sampled", "no stack", "stack",
                                                     "C-API stack", "added", "added C-API"))
    for loop, label in LOOPS:
        row = [best[(cfg, loop)] for cfg, _ in CONFIGS]
        print("  %-30s %12.0f %12.0f %12.0f %12.0f %+10.0f %+10.0f"
              % (label, row[0], row[1], row[2], row[3], row[2] - row[1], row[3] - row[1]))
    for cfg, _ in CONFIGS:
        dropped, links, gil_free = extra[cfg]
        print("  %-12s ring: dropped=%d call-site links=%d gil-free walk=%s"
              % (cfg, dropped, links, "on" if gil_free else "off"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
