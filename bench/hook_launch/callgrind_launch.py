#!/usr/bin/env python3
"""Instructions the hook executes per intercepted call, on the launching
thread, counted with callgrind on the GPU-less runtime: a measure of the
launch path's own work that no machine noise disturbs (the time per call
also depends on the driver, which the test runtime does not model).

    callgrind_launch.py --bench BUILD/bench/hook_launch/hook_launch_bench \\
        [--hook LABEL=libxpu_hook.so ...] [--fake-lib-dir DIR] [--env K=V ...]

For each hook and API (cudaLaunchKernel: untraced plain launch;
cublasGemmEx: traced GEMM; ncclAllReduce: traced collective on a one-rank
communicator), the benchmark's child runs that API's loop under callgrind,
collecting only inside the measured loop (--toggle-collect on the child's
MeasureNsPerCall, so start-up, warm-up and the hook's background thread are
left out); the instructions attributed to libxpu_hook.so (and the NCCL
profiler plugin, which runs inside the NCCL call), divided by the calls, are
the per-call figure. It includes the stream synchronization every 256 calls
(the hook's sync interposer). The CUDA calls the hook made per op (event
records, stream waits, capture checks) come from the child, which counts
them through the test runtime. Prints a table; asserts nothing.
XPU_TIMING=sampled unless --env says otherwise.
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

APIS = ("cudaLaunchKernel", "cublasGemmEx", "ncclAllReduce")


def hook_ir(out_file, names):
    """Exclusive instructions in the functions of the objects `names`."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", out_file], capture_output=True,
                          text=True, check=True).stdout
    total = 0
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) .*\[(.*)\]\s*$", line)
        if m and os.path.basename(m.group(2)) in names:
            total += int(m.group(1).replace(",", ""))
    return total


def run(bench, hook, api, iters, env, work):
    out = os.path.join(work, "cg.%s.%d" % (api, iters))
    for f in glob.glob(out + "*"):
        os.unlink(f)
    e = dict(env)
    if hook:
        e["LD_PRELOAD"] = hook
    p = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                        "--toggle-collect=*MeasureNsPerCall*", "--callgrind-out-file=" + out, bench,
                        "--child", "--iters", str(iters), "--only", api], env=e, capture_output=True,
                       text=True, timeout=900)
    if p.returncode != 0:
        sys.exit("callgrind run failed (%s):\n%s" % (api, p.stderr[-2000:]))
    calls = 0.0
    for line in p.stdout.splitlines():
        if line.startswith("calls %s " % api):
            calls = float(line.split()[2])
    if not hook:
        return 0, calls
    names = {os.path.basename(hook), "libnccl-profiler-xpu.so"}
    return hook_ir(out, names), calls


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
    print("hook instructions per call in the measured loop (callgrind, %d calls, XPU_TIMING=%s), "
          "and CUDA calls the hook made per call" % (a.iters, env["XPU_TIMING"]))
    print("%-18s %-12s %14s %16s" % ("api", "hook", "hook_Ir/call", "hook_cuda_calls"))
    for api in APIS:
        for label, hook in hooks:
            ir, calls = run(a.bench, hook, api, a.iters, env, work)
            n = (a.iters // 256) * 256  # the loop runs whole batches
            print("%-18s %-12s %14.0f %16.3f" % (api, label, ir / n, calls), flush=True)
    subprocess.run(["rm", "-rf", work])
    return 0


if __name__ == "__main__":
    sys.exit(main())
