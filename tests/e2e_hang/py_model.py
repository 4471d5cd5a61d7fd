#!/usr/bin/env python3
"""A Python training loop on the GPU-less runtime, for hang tests where no
rank waits in a collective: GEMMs and an all-reduce per step through the
fake CUDA/cuBLAS/NCCL libraries (ctypes; the hook's interposers see them as
from PyTorch), a device synchronization at the end of each step, and Python
stacks on demand (xputimer.pystacks, as the package's autoload installs it).

usage: py_model.py [--stuck-at STEP] [--stuck-ranks all|R[,R...]] [--steps N]
                   [--gc-garbage N] [--slow-loader-ms MS] [--json-steps]

Ranks in --stuck-ranks enter load_next_batch() at step --stuck-at and never
leave it: a data-loading loop that waits in Python forever (time.sleep in a
loop, GIL released in between, as a blocked DataLoader or a polling loop
does). It prints "rank R stuck in python at step S" when it does. The
batches come from an iterator traced as torch's DataLoader is (its
__next__ recorded as a DataLoader event); --slow-loader-ms makes it that
much slower on the ranks of --stuck-ranks (a slow input pipeline), and
--gc-garbage makes those ranks collect cyclic garbage every step.

Environment: RANK, WORLD_SIZE (default 0, 1), FAKE_LIB_DIR (the fake
libraries), XPU_FAKE_NCCL_ID_FILE (rank 0 publishes the NCCL id there; the
others read it) when WORLD_SIZE > 1.
"""
import argparse
import ctypes
import gc
import os
import sys
import time
from ctypes import byref, c_int, c_size_t, c_void_p

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def share_id(lib, rank, world):
    uid = UniqueId()
    path = os.environ.get("XPU_FAKE_NCCL_ID_FILE", "")
    if rank == 0:
        assert lib.ncclGetUniqueId(byref(uid)) == 0
        if world > 1:
            with open(path + ".tmp", "w") as f:
                f.write(ctypes.string_at(ctypes.addressof(uid), 128).hex() + "\n")
            os.rename(path + ".tmp", path)
        return uid
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with open(path) as f:
                raw = bytes.fromhex(f.read().strip())
            ctypes.memmove(ctypes.addressof(uid), raw, min(len(raw), 128))
            return uid
        except (OSError, ValueError):
            time.sleep(0.01)
    sys.exit("rank %d: no NCCL id in %s" % (rank, path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100000)
    ap.add_argument("--stuck-at", type=int, default=-1)
    ap.add_argument("--stuck-ranks", default="all")
    ap.add_argument("--step-sleep-ms", type=float, default=50)
    ap.add_argument("--gc-garbage", type=int, default=0,
                    help="ranks in --stuck-ranks make this many cyclic objects per step and run gc.collect() "
                         "(GC stalls; xputimer.gc_trace records them)")
    ap.add_argument("--slow-loader-ms", type=float, default=0,
                    help="extra DataLoader time per batch on the ranks of --stuck-ranks")
    ap.add_argument("--json-steps", action="store_true", help="rank 0 prints each step as JSON with its step_ms")
    a = ap.parse_args()
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    stuck = a.stuck_ranks == "all" or str(rank) in a.stuck_ranks.split(",")

    from xputimer import _hook, gc_trace, pystacks, tracing
    pystacks.install()
    gc_trace.install()

    class Batches:
        """The input pipeline: traced like torch's DataLoader iterator."""

        def __iter__(self):
            return self

        def __next__(self):
            time.sleep(((a.slow_loader_ms if stuck else 0) + 0.2) / 1000.0)
            return None

    tracing.wrap_attribute(Batches, "__next__", _hook.OP_PY_DATALOADER,
                           "torch.utils.data.DataLoader.__next__")
    batches = Batches()
    for name in ("libcudart.so.13", "libcublas.so.13", "libnccl.so.2"):
        ctypes.CDLL(os.path.join(os.environ["FAKE_LIB_DIR"], name), mode=os.RTLD_GLOBAL)
    lib = ctypes.CDLL(None)  # the hook's interposers first
    lib.cublasSgemm_v2.argtypes = [c_void_p, c_int, c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_int,
                                   c_void_p, c_int, c_void_p, c_void_p, c_int]
    lib.ncclAllReduce.argtypes = [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(c_void_p), c_int, UniqueId, c_int]
    handle, comm = c_void_p(), c_void_p()
    assert lib.cublasCreate_v2(byref(handle)) == 0
    assert lib.ncclCommInitRank(byref(comm), world, share_id(lib, rank, world), rank) == 0

    def matmul(n):
        assert lib.cublasSgemm_v2(handle, 0, 0, n, n, n, None, None, n, None, n, None, None, n) == 0

    def load_next_batch(step):
        if stuck and step == a.stuck_at:
            print("rank %d stuck in python at step %d (sleeping forever)" % (rank, step), flush=True)
            while True:  # waits for a batch that never comes
                time.sleep(0.1)
        next(batches)
        time.sleep(a.step_sleep_ms / 1000.0)  # the host's own work before the step

    def make_garbage():
        for _ in range(a.gc_garbage // 2):
            x, y = {}, {}
            x["y"], y["x"] = y, x
        gc.collect()

    def train_step():
        if a.gc_garbage and stuck:
            make_garbage()
        for _ in range(2):
            matmul(256)
            matmul(512)
        assert lib.ncclAllReduce(None, None, 1 << 20, 7, 0, comm, None) == 0
        assert lib.cudaDeviceSynchronize() == 0

    for step in range(a.steps):
        t0 = time.time()
        load_next_batch(step)
        train_step()
        if a.json_steps and rank == 0:
            print('{"step": %d, "step_ms": %.1f}' % (step, (time.time() - t0) * 1e3), flush=True)
        elif step % 20 == 0:
            print("rank %d step %d" % (rank, step), flush=True)


if __name__ == "__main__":
    main()
