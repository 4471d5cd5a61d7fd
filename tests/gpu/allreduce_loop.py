"""All-reduce loop that runs until killed (torchrun --nproc-per-node 2), for
the hang checks: a stopped rank leaves the other one inside the NCCL kernel.
Prints one line per 100 iterations."""
import argparse
import os
import time

import torch
import torch.distributed as dist


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=int, default=64)
    args = ap.parse_args()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    x = torch.ones(args.mib * 1024 * 1024 // 4, device="cuda")
    i, t0 = 0, time.time()
    while True:
        dist.all_reduce(x)
        i += 1
        if i % 100 == 0:
            torch.cuda.synchronize()
            print(f"rank {dist.get_rank()} iter {i} {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
