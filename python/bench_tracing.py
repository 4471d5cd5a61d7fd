#!/usr/bin/env python3
"""Micro benchmark: added cost of a traced Python call.

Prints ns per call of a trivial function untraced, traced (hook enabled),
traced with tracing switched off at run time, and through the DataLoader
path (batch size + step-detector listener). Target: <= ~1 us added per
traced call. Prints figures only; asserts nothing about speed.

Needs the hook C API in the process. Without it the script re-executes
itself under LD_PRELOAD of --hook-lib / $XPU_HOOK_LIB (the real
libxpu_hook.so, or the test double python/tests/fake_hook_api.c, which
serializes producers with a mutex and is therefore a pessimistic stand-in).

    python3 python/bench_tracing.py --hook-lib build/hook/libxpu_hook.so
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# An installed package (maybe with _xputimer_native) wins over the sources
# next to this script, which Python put first on sys.path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
try:
    import xputimer  # noqa: F401
except ImportError:
    sys.path.insert(0, HERE)


def hook_or_reexec(args, hook, script=__file__):
    """None when the hook's C API is loaded in this process; otherwise the
    exit code of `script` run again under the hook (or 2 when even the
    re-executed child has no hook C API)."""
    if hook.available():
        return None
    if os.environ.get("XPU_BENCH_CHILD"):
        sys.stderr.write("%s: preloaded library has no hook C API\n"
                         % os.path.splitext(os.path.basename(script))[0])
        return 2
    return reexec_under_hook(args, script)


def reexec_under_hook(args, script=__file__):
    """Runs `script` again with the same arguments under the hook (a ring
    file in a temporary directory, no daemon, no Python autoload)."""
    lib = args.hook_lib or os.environ.get("XPU_HOOK_LIB")
    if not lib or not os.path.isfile(lib):
        sys.stderr.write("%s: hook C API not loaded; pass --hook-lib or set XPU_HOOK_LIB\n"
                         % os.path.splitext(os.path.basename(script))[0])
        return 2
    ring_dir = tempfile.mkdtemp(prefix="xpu-bench-")
    env = dict(os.environ)
    env["LD_PRELOAD"] = os.path.abspath(lib)
    env["XPU_RING_DIR"] = ring_dir
    env["XPU_PYTHON"] = "off"  # no autoload: measure only the wrappers made here
    # Room for every record of the run (nothing consumes the ring here), so
    # the figures are for the write path, not the cheaper ring-full drop path.
    env.setdefault("XPU_FAKE_RING_CAPACITY", str(1 << 22))
    env.setdefault("XPU_RING_CAPACITY", str(1 << 22))
    env.setdefault("XPU_DAEMON", "0")
    env["XPU_BENCH_CHILD"] = "1"
    try:
        import subprocess
        return subprocess.call([sys.executable, os.path.abspath(script)] + sys.argv[1:], env=env)
    finally:
        shutil.rmtree(ring_dir, ignore_errors=True)


def best_ns_per_call(fn, calls, repeats):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for i in range(calls):
            fn(i)
        best = min(best, (time.perf_counter_ns() - t0) / calls)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hook-lib")
    args = ap.parse_args()

    from xputimer import _hook, tracing
    rc = hook_or_reexec(args, _hook)
    if rc is not None:
        return rc

    def work(x):
        return x

    fast = _hook.emitter()
    kind_name = "native (_xputimer_native.emit)" if fast is not _hook._api.emit else "ctypes"
    traced = tracing.make_wrapper(work, _hook.OP_PY_API, "bench@work")
    traced_ctypes = None
    if fast is not _hook._api.emit:  # also measure the pure-ctypes fallback
        _hook._fast[:] = [_hook._api.emit]
        traced_ctypes = tracing.make_wrapper(work, _hook.OP_PY_API, "bench@work")
        _hook._fast[:] = [fast]
    tracing.add_listener(_hook.OP_PY_DATALOADER, lambda k, a, b, v: None)
    loader_like = tracing.make_wrapper(work, _hook.OP_PY_DATALOADER, "bench@loader",
                                       value_of=lambda r: 8)
    calls, reps = args.calls, args.repeats
    base = best_ns_per_call(work, calls, reps)
    on = best_ns_per_call(traced, calls, reps)
    on_ctypes = best_ns_per_call(traced_ctypes, calls, reps) if traced_ctypes else None
    loader = best_ns_per_call(loader_like, calls, reps)
    _hook.set_enabled(False)
    off = best_ns_per_call(traced, calls, reps)
    _hook.set_enabled(True)
    t0 = time.perf_counter_ns()
    for i in range(calls):
        _hook.emit(traced.__xpu_sig__, i, i + 1, 0, 0)
    raw_emit = (time.perf_counter_ns() - t0) / calls
    print("calls per variant: %d x %d repeats (best shown), hook API version %d"
          % (calls, reps, _hook.api_version()))
    print("emitter: %s; interpreter %s" % (kind_name, sys.version.split()[0]))
    print("%-34s %8.1f ns/call" % ("untraced call", base))
    print("%-34s %8.1f ns/call  (+%.1f ns)" % ("traced, tracing on", on, on - base))
    if on_ctypes is not None:
        print("%-34s %8.1f ns/call  (+%.1f ns)" % ("traced, ctypes fallback", on_ctypes,
                                                    on_ctypes - base))
    print("%-34s %8.1f ns/call  (+%.1f ns)" % ("traced, tracing off at run time", off, off - base))
    print("%-34s %8.1f ns/call  (+%.1f ns)" % ("DataLoader path (value+listener)", loader, loader - base))
    print("%-34s %8.1f ns/call" % ("_hook.emit() (ctypes, checked)", raw_emit))
    print("added per traced call: %.2f us (target <= ~1 us)" % ((on - base) / 1000.0))
    ring_file = os.path.join(os.environ.get("XPU_RING_DIR", ""), "xpu-ring-%d.bin" % os.getpid())
    if os.path.isfile(ring_file):
        from xputimer import ring
        header = ring.read_ring(ring_file)["header"]
        print("records written %d, dropped because the ring was full %d"
              % (header["counters"][10], header["counters"][0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
