#!/usr/bin/env python3
"""Instructions the hook executes per intercepted call, on the launching
thread, counted with callgrind on the GPU-less runtime: a measure of the
launch path's own work that no machine noise disturbs (the time per call
also depends on the driver, which the test runtime does not model).

    callgrind_launch.py --bench BUILD/bench/hook_launch/hook_launch_bench \\
        [--hook LABEL=libxpu_hook.so ...] [--fake-lib-dir DIR] [--env K=V ...]

For each hook and API (cudaLaunchKernel: untraced plain launch;
cublasGemmEx: traced GEMM; ncclAllReduce: traced collective on a one-rank
communicator), the benchmark's child runs that API's loop under callgrind
(--separate-threads=yes) twice, with N and 2N calls; the difference of the
instructions attributed to libxpu_hook.so on the main thread, divided by N,
is the per-call figure (start-up and warm-up cancel out). The same for the
CUDA calls the hook made per op (event records, stream waits, capture
checks), which the child counts through the test runtime. Prints a table;
asserts nothing. XPU_TIMING=sampled unless --env says otherwise.
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

APIS = ("cudaLaunchKernel", "cublasGemmEx", "ncclAllReduce")


def hook_ir(out_file, hook_name):
    """Exclusive instructions in `hook_name` functions of one callgrind file."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", out_file], capture_output=True,
                          text=True, check=True).stdout
    total = 0
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) .*\[(.*)\]\s*$", line)
        if m and os.path.basename(m.group(2)) == hook_name:
            total += int(m.group(1).replace(",", ""))
    return total


def run(bench, hook, api, iters, env, work):
    out = os.path.join(work, "cg.%s.%d" % (api, iters))
    for f in glob.glob(out + "*"):
        os.unlink(f)
    e = dict(env)
    if hook:
        e["LD_PRELOAD"] = hook
    p = subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                        "--callgrind-out-file=" + out, bench, "--child", "--iters", str(iters),
                        "--only", api], env=e, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        sys.exit("callgrind run failed (%s):\n%s" % (api, p.stderr[-2000:]))
    calls = 0.0
    for line in p.stdout.splitlines():
        if line.startswith("calls %s " % api):
            calls = float(line.split()[2])
    main = sorted(glob.glob(out + "*-01"))
    if not main:
        sys.exit("no per-thread callgrind output for %s" % api)
    return hook_ir(main[0], os.path.basename(hook)) if hook else 0, calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--hook", action="append", default=[], metavar="LABEL=PATH")
    ap.add_argument("--fake-lib-dir", default="")
    ap.add_argument("--iters", type=int, default=4096)
    ap.add_argument("--env", action="append", default=[], metavar="K=V")
    a = ap.parse_args()
    env = dict(os.environ)
    lib_dir = a.fake_lib_dir or os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(a.bench)))), "fake_runtime", "lib")
    work = tempfile.mkdtemp(prefix="xpu-callgrind.")
    env.update({"LD_LIBRARY_PATH": lib_dir, "XPU_FAKE_KERNEL_NS": "0", "XPU_FAKE_TFLOPS": "1e9",
                "XPU_FAKE_NET_GBPS": "1e9", "RANK": "0", "WORLD_SIZE": "1", "XPU_DAEMON": "off",
                "XPU_TIMING": "sampled", "XPU_RING_DIR": work})
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    hooks = []
    for spec in a.hook:
        label, _, path = spec.partition("=")
        hooks.append((label, os.path.abspath(path)))
    print("hook instructions per call on the launching thread (callgrind, %d vs %d calls, "
          "XPU_TIMING=%s), and CUDA calls the hook made per call" % (a.iters, 2 * a.iters, env["XPU_TIMING"]))
    print("%-18s %-12s %14s %16s" % ("api", "hook", "hook_Ir/call", "hook_cuda_calls"))
    for api in APIS:
        for label, hook in hooks:
            ir1, _ = run(a.bench, hook, api, a.iters, env, work)
            ir2, calls = run(a.bench, hook, api, 2 * a.iters, env, work)
            print("%-18s %-12s %14.0f %16.3f" % (api, label, (ir2 - ir1) / a.iters, calls), flush=True)
    subprocess.run(["rm", "-rf", work])
    return 0


if __name__ == "__main__":
    sys.exit(main())
