"""Small GPT training benchmark (DDP or FSDP, bf16, synthetic tokens through a
real torch.utils.data.DataLoader). Run with torchrun; needs GPUs.

Shapes:
  --shape gpu     8 layers, hidden 2048, seq 1024, batch 8 (GPU-bound)
  --shape launch  24 layers, hidden 512, seq 256, batch 2 (launch-bound)
Prints one JSON line per step on rank 0 and a summary at the end (median step
time measured by the script itself with torch.cuda.synchronize()).
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

SHAPES = {
    "gpu": dict(layers=8, hidden=2048, seq=1024, batch=8, heads=16),
    "launch": dict(layers=24, hidden=512, seq=256, batch=2, heads=8),
    "tiny": dict(layers=2, hidden=256, seq=128, batch=2, heads=4),
}
VOCAB = 32000


class Tokens(Dataset):
    """Synthetic token batches, generated on the CPU like a real dataset.
    `item_delay_s` makes every sample slower (anomaly injection: slow
    DataLoader)."""

    def __init__(self, n, seq, seed, item_delay_s=0.0):
        self.n, self.seq, self.seed, self.item_delay_s = n, seq, seed, item_delay_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.item_delay_s:
            time.sleep(self.item_delay_s)
        g = torch.Generator().manual_seed(self.seed * 1000003 + i)
        return torch.randint(0, VOCAB, (self.seq + 1,), generator=g)


def make_cyclic_garbage(n):
    """n objects in reference cycles: only the cyclic GC frees them."""
    for _ in range(n // 2):
        a, b = {}, {}
        a["b"], b["a"] = b, a


class Block(nn.Module):
    def __init__(self, h, heads, ffn, sync_inside=False):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc1, self.fc2 = nn.Linear(h, ffn), nn.Linear(ffn, h)
        self.heads, self.sync_inside = heads, sync_inside

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, h // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, h))
        if self.sync_inside:
            torch.cuda.synchronize()  # anomaly injection: unnecessary synchronization
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, layers, hidden, heads, seq, ffn, sync_inside):
        super().__init__()
        self.emb, self.pos = nn.Embedding(VOCAB, hidden), nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, ffn, sync_inside) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, VOCAB, bias=False)

    def forward(self, idx):
        x = self.emb(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=SHAPES, default="gpu")
    ap.add_argument("--parallel", choices=["ddp", "fsdp"], default="ddp")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.0,
                    help="stop after this many seconds of steps (all ranks at the same step; 0: --steps only)")
    ap.add_argument("--ffn", type=int, default=0, help="FFN width (default 4*hidden); 8484 reproduces the paper's case")
    ap.add_argument("--sync-inside", action="store_true", help="inject torch.cuda.synchronize() in every block")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json-out", default="")
    ap.add_argument("--fault-rank", type=int, default=-1, help="rank that injects the faults below")
    ap.add_argument("--extra-allreduce-at", type=int, default=-1,
                    help="the fault rank issues one extra all-reduce at this step (collective mismatch)")
    ap.add_argument("--python-hang-at", type=int, default=-1,
                    help="the fault rank sleeps forever in Python at this step, before its collectives")
    ap.add_argument("--gpu-hang-at", type=int, default=-1,
                    help="the fault rank launches a GPU kernel that never ends at this step (a spinning kernel), "
                         "then goes on until it blocks on it")
    ap.add_argument("--slow-loader-ms", type=float, default=0.0,
                    help="the fault rank's DataLoader spends this much longer per batch (sleep in its workers)")
    ap.add_argument("--gc-garbage", type=int, default=0,
                    help="the fault rank creates this many cyclic objects per step and runs gc.collect() (GC stalls)")
    ap.add_argument("--sync-fault-rank", action="store_true",
                    help="with --sync-inside: only the fault rank synchronizes inside every block")
    ap.add_argument("--side-gemms", type=int, default=0,
                    help="the fault rank runs this many extra hidden x hidden GEMMs per step on a second stream, "
                         "which the step then waits for (extra per-rank GPU work)")
    ap.add_argument("--torch-profiler", default="",
                    help="run the steps under torch.profiler (CPU+CUDA) and write its Chrome trace to this path prefix")
    args = ap.parse_args()
    cfg = SHAPES[args.shape]
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    torch.manual_seed(0)
    sync_inside = args.sync_inside and (not args.sync_fault_rank or rank == args.fault_rank)
    model = GPT(cfg["layers"], cfg["hidden"], cfg["heads"], cfg["seq"], args.ffn or 4 * cfg["hidden"],
                sync_inside).cuda().to(torch.bfloat16)
    side = torch.cuda.Stream() if args.side_gemms and rank == args.fault_rank else None
    side_a = torch.randn(cfg["hidden"] * 2, cfg["hidden"] * 2, device="cuda", dtype=torch.bfloat16) if side else None
    if args.parallel == "ddp":
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local])
    else:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        model = FSDP(model, device_id=local)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    delay = args.slow_loader_ms / 1e3 / cfg["batch"] if rank == args.fault_rank else 0.0
    loader = DataLoader(Tokens((args.steps + args.warmup) * cfg["batch"], cfg["seq"], rank, delay),
                        batch_size=cfg["batch"], num_workers=args.workers, pin_memory=True)
    times = []
    prof = None
    if args.torch_profiler:
        from torch.profiler import ProfilerActivity, profile
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        prof.__enter__()
    started = None
    for step, batch in enumerate(loader):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if args.seconds:
            # Every rank stops at the same step: rank 0's clock decides.
            started = started or t0
            stop = torch.tensor([1.0 if rank == 0 and t0 - started >= args.seconds else 0.0], device="cuda")
            dist.broadcast(stop, 0)
            if stop.item():
                break
        if rank == args.fault_rank and step == args.python_hang_at:
            print(f"rank {rank}: sleeping forever at step {step}", flush=True)
            while True:
                time.sleep(3600)
        if rank == args.fault_rank and step == args.gpu_hang_at:
            print(f"rank {rank}: GPU kernel that never ends at step {step}", flush=True)
            torch.cuda._sleep(1 << 62)  # spins for ~2^62 GPU cycles: decades
        if rank == args.fault_rank and step == args.extra_allreduce_at:
            print(f"rank {rank}: extra all-reduce at step {step}", flush=True)
            dist.all_reduce(torch.ones(1024, device="cuda"))
        if rank == args.fault_rank and args.gc_garbage:
            make_cyclic_garbage(args.gc_garbage)
            gc.collect()
        batch = batch.cuda(non_blocking=True)
        if side is not None:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(args.side_gemms):
                    side_a @ side_a
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), batch[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if side is not None:
            torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            times.append(dt)
        if rank == 0:
            print(json.dumps({"step": step, "step_ms": dt * 1e3, "loss": float(loss)}), flush=True)
    trace_bytes = None
    if prof is not None:
        prof.__exit__(None, None, None)
        path = f"{args.torch_profiler}.rank{rank}.json"
        prof.export_chrome_trace(path)
        trace_bytes = os.path.getsize(path)
    summary = {"trace_bytes_per_rank": trace_bytes, "shape": args.shape, "parallel": args.parallel, "world": world,
               "steps": len(times), "median_step_ms": statistics.median(times) * 1e3 if times else None,
               "step_ms": [t * 1e3 for t in times],
               # The median of each fifth of the run, in order: a drift over the run shows here.
               "median_step_ms_by_fifth": [statistics.median(times[i * len(times) // 5:(i + 1) * len(times) // 5]) * 1e3
                                           for i in range(5)] if len(times) >= 5 else None}
    if rank == 0:
        print(json.dumps({"summary": summary}), flush=True)
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(summary, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
