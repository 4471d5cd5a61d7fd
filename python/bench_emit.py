#!/usr/bin/env python3
"""Micro benchmark: cost of one host event through each emit path.

Prints ns per emit(sig_id, start_ns, end_ns, value, flags) call, in the same
process and run, through the compiled _xputimer_native.emit and through the
ctypes function of the hook C API, plus a time.time_ns() pair (what a traced
call adds around the emit). Prints figures only; asserts nothing about speed.

Needs the hook C API in the process: without it the script re-executes
itself under LD_PRELOAD of --hook-lib / $XPU_HOOK_LIB. The package is the
first `xputimer` on sys.path, so a bundle's copy (with the module built for
this interpreter) is measured with

    PYTHONPATH=.bundle/share/xputimer/python python3.12 python/bench_emit.py \\
        --hook-lib .bundle/lib/libxpu_hook.so
"""

import argparse
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
try:
    import xputimer  # noqa: F401
except ImportError:
    sys.path.insert(0, HERE)


def hook_or_reexec(args, hook):
    # The same check and re-exec as bench_tracing.py (loaded by path: this
    # directory is kept off sys.path so that an installed package wins).
    spec = importlib.util.spec_from_file_location("bench_tracing", os.path.join(HERE, "bench_tracing.py"))
    bench_tracing = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_tracing)
    return bench_tracing.hook_or_reexec(args, hook, script=__file__)


def best_ns(loop, calls, repeats):
    best = float("inf")
    for _ in range(repeats):
        best = min(best, loop(calls) / calls)
    return best


def emit_loop(emit, sig):
    def loop(n):
        t0 = time.perf_counter_ns()
        for i in range(n):
            emit(sig, i, i + 1, 0, 0)
        return time.perf_counter_ns() - t0
    return loop


def empty_loop(n):
    t0 = time.perf_counter_ns()
    for i in range(n):
        pass
    return time.perf_counter_ns() - t0


def clock_loop(n):
    now = time.time_ns
    t0 = time.perf_counter_ns()
    for i in range(n):
        now()
        now()
    return time.perf_counter_ns() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=300000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--hook-lib")
    args = ap.parse_args()

    import xputimer
    from xputimer import _hook
    rc = hook_or_reexec(args, _hook)
    if rc is not None:
        return rc

    sig = _hook.intern(_hook.OP_PY_API, "bench@emit")
    paths = []
    try:
        native = xputimer.native()
        if native.available():
            paths.append(("_xputimer_native.emit", native.emit, native.__file__))
        else:
            print("_xputimer_native at %s does not see the hook C API" % native.__file__)
    except ImportError as e:
        print("_xputimer_native: not importable here (%s)" % e)
    paths.append(("ctypes (hook C API)", _hook._api.emit, "ctypes"))

    calls, reps = args.calls, args.repeats
    base = best_ns(empty_loop, calls, reps)
    clock = best_ns(clock_loop, calls, reps) - base
    results = [(name, best_ns(emit_loop(fn, sig), calls, reps) - base, where)
               for name, fn, where in paths]

    print("interpreter %s (%s), package %s"
          % (sys.version.split()[0], sys.executable, os.path.dirname(xputimer.__file__)))
    print("%d calls x %d repeats per path, best shown, loop overhead (%.1f ns) subtracted"
          % (calls, reps, base))
    for name, ns, where in results:
        print("%-26s %8.1f ns/event   %s" % (name, ns, where))
    print("%-26s %8.1f ns          (start/end stamps of a traced call)" % ("2 x time.time_ns()", clock))
    if len(results) == 2:
        print("ctypes / native: %.1fx" % (results[1][1] / results[0][1]))
    ring_file = os.path.join(os.environ.get("XPU_RING_DIR", ""), "xpu-ring-%d.bin" % os.getpid())
    if os.path.isfile(ring_file):
        from xputimer import ring
        header = ring.read_ring(ring_file)["header"]
        print("records written %d, dropped because the ring was full %d"
              % (header["counters"][10], header["counters"][0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
