"""All-reduce loop for the GPU check (torchrun --nproc-per-node 2), run under
LD_PRELOAD=libxpu_hook.so. For each size, `iters` all-reduces inside a
torch.profiler session; writes the profiler's NCCL kernel durations per call
to <out>/allreduce_profiler.rank<R>.json. The script also times each size
itself with CUDA events (nccl-tests busbw definition) for reference.
"""
import argparse
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

SIZES_MIB = [8, 64, 256]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--sizes-mib", default="", help="comma-separated sizes (default 8,64,256)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes_mib.split(",") if x] or SIZES_MIB
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    n = dist.get_world_size()
    results = []
    for mib in sizes:
        x = torch.ones(mib * 1024 * 1024 // 4, device="cuda", dtype=torch.float32)
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(args.iters):
                dist.all_reduce(x)
            torch.cuda.synchronize()
        ks = [e for e in prof.events()
              if e.device_type == torch.autograd.DeviceType.CUDA and "nccl" in e.name.lower()]
        ks.sort(key=lambda e: e.time_range.start)
        durs = [e.time_range.end - e.time_range.start for e in ks]
        # Script-side timing (events around each call, nccl-tests definitions).
        start = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
        end = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
        dist.barrier()
        for i in range(args.iters):
            start[i].record()
            dist.all_reduce(x)
            end[i].record()
        torch.cuda.synchronize()
        script_ms = statistics.median(s.elapsed_time(e) for s, e in zip(start, end))
        size = x.numel() * 4
        busbw = size / (script_ms * 1e-3) * 2 * (n - 1) / n
        results.append({"MiB": mib, "count": x.numel(), "iters": args.iters, "kernels": len(ks),
                        "profiler_median_us": statistics.median(durs) if durs else None,
                        "profiler_per_call_us": durs if len(durs) == args.iters else [],
                        "script_median_us": script_ms * 1e3, "script_busbw_GBps": busbw / 1e9})
        if rank == 0:
            print(json.dumps(results[-1]), flush=True)
    with open(f"{args.out}/allreduce_profiler.rank{rank}.json", "w") as f:
        json.dump(results, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
