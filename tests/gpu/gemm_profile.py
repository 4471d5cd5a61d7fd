"""GEMM loop for the GPU check: run under LD_PRELOAD=libxpu_hook.so.

For each shape, runs `iters` bf16 products torch.mm(A[M,K], B[K,N]) inside a
torch.profiler session (CPU+CUDA activities) and writes, per shape, the
profiler's kernel durations per product to <out>/gemm_profiler.json. The
hook times the same products (XPU_TIMING=all) into its ring, which the
comparison script reads back with xpu-ring-dump.

cuBLAS is column-major: torch.mm(A, B) with row-major A[M,K], B[K,N] is the
cuBLAS product C^T[N,M] = B^T A^T, i.e. the hook records m=N, n=M, k=K.
"""
import argparse
import json
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

SHAPES = [  # (M, K, N)
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (4096, 8192, 8484),   # the paper's unaligned FFN width
    (4096, 8192, 8512),   # padded to a multiple of 64
    (2048, 2048, 512),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--shapes", default="",
                    help="comma-separated MxKxN (default: the built-in list)")
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",") if s] or SHAPES
    torch.manual_seed(0)
    dev = torch.device("cuda")
    results = []
    for (m, k, n) in shapes:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        for _ in range(5):  # warm-up outside the profiler (cuBLAS heuristics, handles)
            torch.mm(a, b)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(args.iters):
                torch.mm(a, b)
            torch.cuda.synchronize()
        # Every kernel (and memset) cuBLAS ran for the call counts: a call's
        # duration is the sum over its group, and the group's span (first
        # start to last end) is kept too. The hook's own calibration kernel
        # (xpu_span, on its own stream) is not the application's.
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                   and not e.name.startswith("xpu_")]
        kernels.sort(key=lambda e: e.time_range.start)
        per_call = len(kernels) // args.iters if args.iters else 0
        durs_us, spans_us = [], []
        if per_call >= 1 and len(kernels) == per_call * args.iters:
            for i in range(args.iters):
                grp = kernels[i * per_call:(i + 1) * per_call]
                durs_us.append(sum(e.time_range.end - e.time_range.start for e in grp))
                spans_us.append(max(e.time_range.end for e in grp) - grp[0].time_range.start)
        else:
            print("shape %dx%dx%d: %d kernels for %d calls, no per-call figures: %s"
                  % (m, k, n, len(kernels), args.iters, sorted({e.name for e in kernels})[:6]),
                  file=sys.stderr, flush=True)
        results.append({
            "M": m, "K": k, "N": n,
            "cublas_m": n, "cublas_n": m, "cublas_k": k,
            "iters": args.iters,
            "warmup": 5,
            "kernels": len(kernels),
            "kernels_per_call": per_call,
            "kernel_names": sorted({e.name for e in kernels})[:4],
            "profiler_median_us": statistics.median(durs_us) if durs_us else None,
            "profiler_per_call_us": durs_us,
            "profiler_span_median_us": statistics.median(spans_us) if spans_us else None,
            "profiler_tflops": (2.0 * m * n * k / (statistics.median(durs_us) * 1e-6) / 1e12)
            if durs_us else None,
        })
        print(json.dumps(results[-1]), flush=True)
        del a, b
    with open(f"{args.out}/gemm_profiler.json", "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
