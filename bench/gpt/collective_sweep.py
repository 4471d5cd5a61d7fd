"""All-reduce / all-gather / reduce-scatter size sweep (torchrun, NCCL, one
GPU per process), for the bus-bandwidth check and as a workload.

Sizes follow nccl-tests: "size" is the all-reduce buffer, the all-gather
output and the reduce-scatter input (bytes). For every size and op the script
times each call with a CUDA event pair (the GPU kept ahead of the CPU by a
sleep kernel queued first, as nccl-tests' C loop keeps it busy), then takes
per call the shortest of
the ranks' times (the last rank to arrive waits least: the engine's
last-arrival time, max(end) - max(start)); algbw = size / time,
busbw = algbw * 2(n-1)/n (all-reduce) or (n-1)/n (the others).
Reported per (op, size): busbw over every call made (warm-up included, the
calls the hook sees) and over the timed calls only, plus nccl-tests' own
loop-average figure. Rank 0 writes JSON to --json-out.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

OPS = ("allreduce", "allgather", "reducescatter")
GPU_HEAD_START_CYCLES = 200_000_000  # ~0.1 s at 2 GHz: room to enqueue a size's calls


def parse_sizes(text):
    out = []
    for tok in text.split(","):
        tok = tok.strip().upper()
        mult = 1
        for suf, m in (("GIB", 1 << 30), ("MIB", 1 << 20), ("KIB", 1 << 10), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
            if tok.endswith(suf):
                tok, mult = tok[: -len(suf)], m
                break
        out.append(int(float(tok) * mult))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1M,4M,16M,64M,256M,1G", help="comma list, suffixes K/M/G (binary)")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--json-out", default="")
    args = ap.parse_args()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, n = dist.get_rank(), dist.get_world_size()
    dt = getattr(torch, args.dtype)
    el = torch.tensor([], dtype=dt).element_size()
    results = []
    for op in args.ops.split(","):
        if op not in OPS:
            print(f"unknown op {op}; choose from {OPS}", file=sys.stderr)
            return 2
        factor = 2 * (n - 1) / n if op == "allreduce" else (n - 1) / n
        for size in parse_sizes(args.sizes):
            count = size // el
            count -= count % n
            big = torch.ones(count, device="cuda", dtype=dt)
            small = torch.ones(count // n, device="cuda", dtype=dt)
            if op == "allreduce":
                call = lambda: dist.all_reduce(big)
            elif op == "allgather":
                call = lambda: dist.all_gather_into_tensor(big, small)
            else:
                call = lambda: dist.reduce_scatter_tensor(small, big)
            total = args.warmup + args.iters
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(total)]
            dist.barrier()
            torch.cuda.synchronize()
            # Keep the GPU ahead of the CPU: with a long kernel queued first,
            # every call below is enqueued before the GPU reaches it, so the
            # event pairs time the GPU work and not PyTorch's per-call CPU
            # cost (which exceeds a small collective's duration).
            torch.cuda._sleep(GPU_HEAD_START_CYCLES)
            for i in range(total):
                ev[i][0].record()
                call()
                ev[i][1].record()
            torch.cuda.synchronize()
            # nccl-tests style: one event pair around a loop, average per call.
            l0, l1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            dist.barrier()
            torch.cuda._sleep(GPU_HEAD_START_CYCLES)
            l0.record()
            for _ in range(args.iters):
                call()
            l1.record()
            torch.cuda.synchronize()
            per_call = torch.tensor([a.elapsed_time(b) for a, b in ev], dtype=torch.float64, device="cuda")
            dist.all_reduce(per_call, op=dist.ReduceOp.MIN)
            loop_ms = torch.tensor([l0.elapsed_time(l1) / args.iters], dtype=torch.float64, device="cuda")
            dist.all_reduce(loop_ms, op=dist.ReduceOp.AVG)
            ms = per_call.tolist()
            nbytes = count * el

            def bw(ms_list):
                t = statistics.fmean(ms_list) * 1e-3
                return nbytes / t * factor / 1e9

            row = {"op": op, "bytes": nbytes, "nranks": n, "calls": total,
                   "busbw_all_calls_GBps": bw(ms), "busbw_timed_GBps": bw(ms[args.warmup:]),
                   "busbw_loop_GBps": nbytes / (loop_ms.item() * 1e-3) * factor / 1e9,
                   "median_us": statistics.median(ms[args.warmup:]) * 1e3}
            results.append(row)
            if rank == 0:
                print(json.dumps(row), flush=True)
            del big, small
    if rank == 0 and args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"nranks": n, "dtype": args.dtype, "results": results}, f, indent=1)
    torch.cuda.synchronize()
    time.sleep(1.0)  # let the hook's completion thread drain the last records
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
