#!/usr/bin/env python3
"""Per-op cost of libxpu_hook.so under PyTorch: added CPU time on the launching
thread, added GPU time, and the step-time overhead of a launch-bound GPT, with
every configuration interleaved and repeated in one run.

    perop_bench.py --bundle after=.bundle [--bundle before=.bundle-before] \\
                   [--modes off,sampled,all] [--rounds 24] [--budget-s 360] \\
                   [--ops elementwise,gemm,allreduce] [--gpt launch] --out DIR

Configurations: `none` (no hook) and, for every bundle, the hook preloaded
with XPU_TIMING=off / sampled / all. One worker process per configuration is
started once (PyTorch import, CUDA context, a world-size-1 NCCL process group,
the GPT model) and then driven round by round over a pipe: in each round every
worker runs the same measurement in turn, in a shuffled order, while the others
wait idle on their pipe. Drifts of the machine (clocks, other load) therefore
hit every configuration alike, and each round gives one paired difference
against `none`.

Per round and op class (tiny elementwise `y.add_(x)`, small bf16 GEMM
`torch.matmul(a, b, out=c)`, small `dist.all_reduce` over NCCL):
  cpu   the wall time of an enqueue loop of --batch ops divided by --batch,
        best (minimum) of --cpu-batches batches; the stream is synchronized
        between batches, outside the timed region, so the launch queue never
        fills and the loop times the launching thread only.
  gpu   GPU time per op of the same ops back to back: a sleep kernel holds
        the stream while the loop enqueues start event, --batch ops and end
        event, so the GPU then runs them without idle gaps; elapsed time
        divided by --batch, best of --gpu-batches. A batch whose start event
        had already completed when the loop ended (the GPU caught up with the
        CPU, gaps inside) is reported, never silently mixed in.
  rec   ring records written per op (every traced op has at least one) and
        the hook's loss counters over the round.
The hook's ring is drained by the worker itself between batches (read_index
moved to write_index, outside the timed region): no daemon runs, nothing is
dropped, and writing records costs what it costs with a daemon.

C-level loops (--microbench-lib, launch_microbench.cu): an untraced empty
kernel, a traced cublasGemmEx and a traced ncclAllReduce from C, without
Python in the loop; before the rounds, while the workers start,
--micro-runs times per configuration (within --micro-budget-s), each run in
a process of its own.

GPT (--gpt launch|tiny|gpu|none): bench/gpt/train_gpt.py's model under DDP
on the world-size-1 group, synthetic tokens resident on the GPU; per round
--gpt-steps timed steps after one untimed step; the round's figure is the
median step. Overhead = per-round ratio to `none`, with a 95 % confidence
interval (Student t over rounds).

Tables go to stdout and DIR/perop.txt, raw per-round figures to
DIR/perop.json, worker logs to DIR/logs/. Prints figures; asserts nothing.
`--backend fake --fake-lib-dir DIR` runs the same harness against the
GPU-less test runtime through ctypes (no PyTorch; the "GPT" is a burst of
the three op classes): figures are meaningless there, it exists to test the
harness.
"""

import argparse
import json
import math
import mmap
import os
import random
import select
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# xpu_ring_header_v1 (include/xpu/ring.h): indices and counters.
WRITE_INDEX_OFF, READ_INDEX_OFF, COUNTERS_OFF = 1024, 1088, 1152
COUNTERS = {"dropped_full": 0, "event_pool_empty": 3, "pending_full": 4, "cuda_error": 5,
            "capture_skipped": 8, "launches_untraced": 9, "records_written": 10, "sampled": 11,
            "plugin_events": 13, "internal": 15}

OPS = ("elementwise", "gemm", "allreduce")
MODES = ("off", "sampled", "all")


# --------------------------------------------------------------------------
# Worker side.

class Ring:
    """The worker's own ring file (XPU_RING_DIR), mapped to drain it and read
    counters. Absent without the hook."""

    def __init__(self):
        self.mm = None
        d = os.environ.get("XPU_RING_DIR")
        if not d or "LD_PRELOAD" not in os.environ:
            return
        pid = os.getpid()
        names = [n for n in os.listdir(d) if n.startswith("xpu-ring-%d." % pid) or n == "xpu-ring-%d.bin" % pid]
        if not names:
            return
        path = os.path.join(d, max(names, key=lambda n: os.path.getmtime(os.path.join(d, n))))
        fd = os.open(path, os.O_RDWR)
        try:
            self.mm = mmap.mmap(fd, 4096)
        finally:
            os.close(fd)
        self.path = path

    def drain(self):
        if self.mm is not None:
            (w,) = struct.unpack_from("<Q", self.mm, WRITE_INDEX_OFF)
            struct.pack_into("<Q", self.mm, READ_INDEX_OFF, w)

    def settle(self, timeout=0.5):
        """Waits until the hook's completion thread has written the records
        of what completed (records_written unchanged for 20 ms)."""
        if self.mm is None:
            return
        last, t_end = None, time.monotonic() + timeout
        while time.monotonic() < t_end:
            (w,) = struct.unpack_from("<Q", self.mm, COUNTERS_OFF + 8 * COUNTERS["records_written"])
            if w == last:
                return
            last = w
            time.sleep(0.02)

    def counters(self):
        if self.mm is None:
            return {}
        return {k: struct.unpack_from("<Q", self.mm, COUNTERS_OFF + 8 * i)[0] for k, i in COUNTERS.items()}


class TorchBackend:
    def __init__(self, args):
        import torch
        import torch.distributed as dist
        self.torch, self.dist = torch, dist
        # --device cpu (gloo, no GPU figures) only tests the harness itself.
        self.cuda = args.device == "cuda"
        if self.cuda:
            torch.cuda.set_device(0)
            dev = torch.device("cuda", 0)
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=dev)
        else:
            dev = torch.device("cpu")
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        self.dev = dev
        g = args.gemm
        self.x = torch.ones(args.elems, device=dev)
        self.y = torch.zeros(args.elems, device=dev)
        self.a = torch.randn(g, g, device=dev, dtype=torch.bfloat16)
        self.b = torch.randn(g, g, device=dev, dtype=torch.bfloat16)
        self.c = torch.empty(g, g, device=dev, dtype=torch.bfloat16)
        self.t = torch.ones(args.ar_elems, device=dev)
        self.ops = {
            "elementwise": lambda: self.y.add_(self.x),
            "gemm": lambda: torch.matmul(self.a, self.b, out=self.c),
            "allreduce": lambda: dist.all_reduce(self.t),
        }
        self.gpt = None
        self.sleep_ns_per_cycle = None

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def sleep_ns(self, ns):
        if self.sleep_ns_per_cycle is None:
            ev = [self.torch.cuda.Event(enable_timing=True) for _ in range(2)]
            self.torch.cuda._sleep(1000)
            ev[0].record()
            self.torch.cuda._sleep(1000000)
            ev[1].record()
            self.sync()
            self.sleep_ns_per_cycle = ev[0].elapsed_time(ev[1]) * 1e6 / 1e6
        self.torch.cuda._sleep(int(ns / self.sleep_ns_per_cycle))

    def events(self):
        return [self.torch.cuda.Event(enable_timing=True) for _ in range(2)]

    @staticmethod
    def record(ev):
        ev.record()

    @staticmethod
    def elapsed_ns(e0, e1):
        return e0.elapsed_time(e1) * 1e6

    @staticmethod
    def done(ev):
        return ev.query()

    def gpt_init(self, shape):
        torch = self.torch
        sys.path.insert(0, os.path.join(REPO, "bench", "gpt"))
        from train_gpt import GPT, SHAPES, VOCAB
        cfg = SHAPES[shape]
        torch.manual_seed(0)
        model = GPT(cfg["layers"], cfg["hidden"], cfg["heads"], cfg["seq"], 4 * cfg["hidden"],
                    False).to(self.dev).to(torch.bfloat16)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0] if self.cuda else None)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        batch = torch.randint(0, VOCAB, (cfg["batch"], cfg["seq"] + 1), device=self.dev)
        F = torch.nn.functional

        def step():
            logits = model(batch[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, VOCAB), batch[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        self.gpt = step
        for _ in range(3):
            step()
        self.sync()


class FakeBackend:
    """The GPU-less test runtime through ctypes: kernel launch, cuBLAS SGEMM
    and a 1-rank ncclAllReduce, as a stand-in for PyTorch's ops (CDLL: the
    GIL is released around each call, as PyTorch does)."""

    def __init__(self, args):
        import ctypes
        from ctypes import byref, c_int, c_size_t, c_uint64, c_void_p
        self.ct = ctypes
        d = args.fake_lib_dir
        for name in ("libcudart.so.13", "libcublas.so.13", "libnccl.so.2", "libxpu_fake_core.so"):
            p = os.path.join(d, name)
            if os.path.exists(p):
                ctypes.CDLL(p, mode=os.RTLD_GLOBAL)
        lib = ctypes.CDLL(None)
        self.lib = lib

        class UniqueId(ctypes.Structure):
            _fields_ = [("internal", ctypes.c_char * 128)]

        class Dim3(ctypes.Structure):
            _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]

        lib.cudaLaunchKernel.argtypes = [c_void_p, Dim3, Dim3, c_void_p, c_size_t, c_void_p]
        lib.cublasSgemm_v2.argtypes = [c_void_p, c_int, c_int, c_int, c_int, c_int, c_void_p, c_void_p,
                                       c_int, c_void_p, c_int, c_void_p, c_void_p, c_int]
        lib.ncclAllReduce.argtypes = [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p]
        lib.ncclCommInitRank.argtypes = [ctypes.POINTER(c_void_p), c_int, UniqueId, c_int]
        lib.cudaEventRecord.argtypes = [c_void_p, c_void_p]
        lib.cudaEventQuery.argtypes = [c_void_p]
        lib.cudaEventElapsedTime.argtypes = [ctypes.POINTER(ctypes.c_float), c_void_p, c_void_p]
        kernel = ctypes.cast(lib.xpu_fake_kernel, c_void_p)
        self.zero, self.dur = c_uint64(0), c_uint64(0)
        args0 = (c_void_p * 1)(ctypes.cast(byref(self.zero), c_void_p))
        args1 = (c_void_p * 1)(ctypes.cast(byref(self.dur), c_void_p))
        one = Dim3(1, 1, 1)
        h = c_void_p()
        assert lib.cublasCreate_v2(byref(h)) == 0
        uid = UniqueId()
        assert lib.ncclGetUniqueId(byref(uid)) == 0
        comm = c_void_p()
        assert lib.ncclCommInitRank(byref(comm), 1, uid, 0) == 0
        launch, gemm, ar = lib.cudaLaunchKernel, lib.cublasSgemm_v2, lib.ncclAllReduce
        self.ops = {
            "elementwise": lambda: launch(kernel, one, one, args0, 0, None),
            "gemm": lambda: gemm(h, 0, 0, 64, 64, 64, None, None, 64, None, 64, None, None, 64),
            "allreduce": lambda: ar(None, None, 1024, 7, 0, comm, None),
        }
        self._sleep = lambda: launch(kernel, one, one, args1, 0, None)
        self.gpt = None

    def sync(self):
        self.lib.cudaDeviceSynchronize()

    def sleep_ns(self, ns):
        self.dur.value = int(ns)
        self._sleep()

    def events(self):
        out = []
        for _ in range(2):
            e = self.ct.c_void_p()
            assert self.lib.cudaEventCreate(self.ct.byref(e)) == 0
            out.append(e)
        return out

    def record(self, ev):
        self.lib.cudaEventRecord(ev, None)

    def elapsed_ns(self, e0, e1):
        ms = self.ct.c_float()
        self.lib.cudaEventElapsedTime(self.ct.byref(ms), e0, e1)
        return ms.value * 1e6

    def done(self, ev):
        return self.lib.cudaEventQuery(ev) == 0

    def gpt_init(self, shape):
        # A stand-in "step" (tests the protocol): a burst of every op class.
        ops = list(self.ops.values())

        def step():
            for _ in range(32):
                for fn in ops:
                    fn()

        self.gpt = step


def measure_op(be, ring, fn, p):
    """One round of one op class: cpu / gpu figures and ring counters."""
    n = p["batch"]
    c0 = ring.counters()
    cpu = []
    for _ in range(p["cpu_batches"]):
        ring.drain()
        be.sync()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        cpu.append((time.perf_counter_ns() - t0) / n)
    be.sync()
    ring.settle()
    c1 = ring.counters()
    gpu, caught_up = [], 0
    if p["gpu_batches"] > 0:
        e0, e1 = be.events()
        # Hold the stream long enough for the whole batch to be enqueued.
        hold_ns = max(200000, 3 * n * min(cpu))
        for _ in range(p["gpu_batches"]):
            ring.drain()
            be.sync()
            be.sleep_ns(hold_ns)
            be.record(e0)
            for _ in range(n):
                fn()
            be.record(e1)
            if be.done(e0):
                caught_up += 1  # the GPU was idle inside the batch: not back to back
            be.sync()
            gpu.append(be.elapsed_ns(e0, e1) / n)
    ring.drain()
    ops = n * p["cpu_batches"]
    d = {k: c1[k] - c0[k] for k in c0}
    return {"cpu_min": min(cpu), "cpu_med": statistics.median(cpu),
            "gpu_min": min(gpu) if gpu else None, "gpu_med": statistics.median(gpu) if gpu else None,
            "gpu_caught_up": caught_up, "ops": ops,
            "records_per_op": d["records_written"] / ops if d else None,
            "counters": d}


def measure_gpt(be, ring, steps):
    be.sync()
    ring.drain()
    be.gpt()  # one untimed step: allocator and autograd state settle
    times = []
    for _ in range(steps):
        be.sync()
        ring.drain()
        t0 = time.perf_counter_ns()
        be.gpt()
        be.sync()
        times.append((time.perf_counter_ns() - t0) / 1e6)
    ring.drain()
    return {"step_ms": times, "median_ms": statistics.median(times)}


def worker(args):
    import faulthandler
    faulthandler.enable()  # a crash leaves its Python stack in the worker's log
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # library chatter on stdout must not reach the protocol
    def reply(obj):
        out.write("@@ " + json.dumps(obj) + "\n")
        out.flush()
    try:
        be = TorchBackend(args) if args.backend == "torch" else FakeBackend(args)
        ring = Ring()
        # First use: handles, signatures, the hook's background thread, which
        # resolves the CUDA runtime (loaded by the import, after the hook) and
        # creates its event pool. Warm up until an op batch loses nothing.
        deadline = time.monotonic() + 100
        while True:
            c0 = ring.counters()
            for fn in be.ops.values():
                for _ in range(64):
                    fn()
            be.sync()
            c1 = ring.counters()
            if all(c1[k] == c0[k] for k in c1 if k in ("event_pool_empty", "pending_full")) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        time.sleep(0.2)
        reply({"ready": True, "pid": os.getpid(), "ring": getattr(ring, "path", None)})
    except Exception as e:  # reported to the parent, which leaves this config out
        reply({"ready": False, "error": "%s: %s" % (type(e).__name__, e)})
        return 1
    all_cpus = os.sched_getaffinity(0)
    for line in sys.stdin:
        try:
            cmd = json.loads(line)
            # The measuring thread runs on one fixed CPU in every worker
            # (threads created earlier, like the hook's, keep their own
            # affinity). Best effort: a CPU that cannot be taken is skipped.
            if args.pin_cpu >= 0:
                try:
                    os.sched_setaffinity(0, {args.pin_cpu})
                except OSError as e:
                    print("cannot pin to CPU %d: %s" % (args.pin_cpu, e), file=sys.stderr)
            if cmd["cmd"] == "quit":
                reply({"bye": True, "counters": ring.counters()})
                return 0
            if cmd["cmd"] == "gpt_init":
                be.gpt_init(cmd["shape"])
                ring.drain()
                reply({"ok": True})
            elif cmd["cmd"] == "perop":
                reply({op: measure_op(be, ring, be.ops[op], cmd) for op in cmd["ops"]})
            elif cmd["cmd"] == "gpt":
                reply(measure_gpt(be, ring, cmd["steps"]))
            else:
                reply({"error": "unknown command %r" % cmd.get("cmd")})
        except Exception as e:
            import traceback
            traceback.print_exc()
            reply({"error": "%s: %s" % (type(e).__name__, e)})
        finally:
            if args.pin_cpu >= 0:
                try:
                    os.sched_setaffinity(0, all_cpus)
                except OSError:
                    pass
    return 0


def micro_child(args):
    """One run of the C-level launch loops (launch_microbench.cu) in a process
    of its own: PyTorch is imported first so that the CUDA libraries it ships
    are the ones loaded. Prints one JSON line."""
    import ctypes
    import faulthandler
    faulthandler.enable()
    if args.backend == "torch":
        import torch
        torch.cuda.set_device(0)
        torch.zeros(1, device="cuda")  # the CUDA context, as in the workers
    else:  # the GPU-less runtime's libraries, where the hook finds them
        for name in ("libcudart.so.13", "libcublas.so.13", "libnccl.so.2"):
            ctypes.CDLL(os.path.join(args.fake_lib_dir, name), mode=os.RTLD_GLOBAL)
    fn = ctypes.CDLL(args.microbench_lib).xpu_launch_microbench
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    # One loop at a time, each result printed as soon as it is there: a loop
    # that crashes the process costs only its own figure, and the log names it.
    for loop in ("gemm", "allreduce", "kernel"):
        print("loop %s" % loop, file=sys.stderr, flush=True)
        out = ctypes.create_string_buffer(4096)
        rc = fn(loop.encode(), args.micro_batches, args.batch, out, len(out))
        if rc == 0:
            print("@@ " + out.value.decode(), flush=True)
        else:
            print("loop %s: rc %d" % (loop, rc), file=sys.stderr, flush=True)
    return 0


# --------------------------------------------------------------------------
# Parent side.

# monotonic time after which nothing waits any more (--deadline-s).
HARD_DEADLINE = [float("inf")]


def time_left():
    return HARD_DEADLINE[0] - time.monotonic()


class Worker:
    def __init__(self, name, env, argv, log_path):
        self.name = name
        self.log = open(log_path, "w")
        self.p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, text=True, bufsize=1)
        self.alive = True
        self.buf = b""

    def send(self, obj):
        if not self.alive:
            return
        try:
            self.p.stdin.write(json.dumps(obj) + "\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            self.give_up("cannot send (%s)" % type(e).__name__)

    def recv(self, timeout):
        """The next protocol line as a dict, or None (dead or timed out: the
        worker is then given up). Never waits past the run's hard deadline."""
        # The pipe is read with os.read into a buffer of our own: a buffered
        # readline() would take several lines at once and leave select()
        # waiting for data that is already here.
        deadline = min(time.monotonic() + timeout, HARD_DEADLINE[0])
        fd = self.p.stdout.fileno()
        while self.alive:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl].decode(errors="replace"), self.buf[nl + 1:]
                if line.startswith("@@ "):
                    return json.loads(line[3:])
                continue
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.give_up("no answer in %.0f s" % timeout)
                return None
            data = os.read(fd, 1 << 16)
            if not data:
                self.give_up("its output ended")
                return None
            self.buf += data
        return None

    def give_up(self, why):
        if self.alive:
            time.sleep(0.2)  # let an exiting process finish its last words
            code = self.p.poll()
            print("worker %s given up: %s, exit status %s; last lines of %s:"
                  % (self.name, why, code, self.log.name), flush=True)
            try:
                self.log.flush()
                with open(self.log.name, errors="replace") as f:
                    for line in f.readlines()[-15:]:
                        print("    " + line.rstrip(), flush=True)
            except OSError:
                pass
        self.alive = False
        if self.p.poll() is None:
            self.p.kill()


def t975(df):
    table = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
             10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000}
    if df <= 0:
        return float("nan")
    keys = sorted(k for k in table if k <= df)
    return table[keys[-1]] if df < 120 else 1.98


def stats(diffs):
    """median, IQR, mean and 95 % CI half-width of a list of paired differences."""
    d = sorted(x for x in diffs if x is not None)
    if not d:
        return None
    n = len(d)
    q = lambda f: d[min(n - 1, max(0, int(round(f * (n - 1)))))]
    mean = statistics.fmean(d)
    half = t975(n - 1) * statistics.stdev(d) / math.sqrt(n) if n > 1 else float("nan")
    return {"n": n, "median": statistics.median(d), "p25": q(0.25), "p75": q(0.75), "mean": mean,
            "ci95": half}


def bundle_hook(path):
    path = os.path.abspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "lib", "libxpu_hook.so")
    if not os.path.isfile(path):
        sys.exit("no hook at %s" % path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", action="append", default=[], metavar="LABEL=PATH[:MODES]",
                    help="a bundle directory (or libxpu_hook.so) under a label, optionally with its "
                         "own comma-separated modes; repeatable")
    ap.add_argument("--modes", default=",".join(MODES), help="XPU_TIMING modes per bundle (default %(default)s)")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--rounds", type=int, default=24)
    ap.add_argument("--budget-s", type=float, default=360, help="start no new round after this many seconds")
    ap.add_argument("--deadline-s", type=float, default=0,
                    help="hard limit from the start: no wait goes past it, the C-level loops are left out "
                         "when too little time is left, results are written before it (0: none)")
    ap.add_argument("--batch", type=int, default=256, help="ops per timed batch")
    ap.add_argument("--cpu-batches", type=int, default=16)
    ap.add_argument("--gpu-batches", type=int, default=2)
    ap.add_argument("--gemm", type=int, default=256, help="M=N=K of the small GEMM")
    ap.add_argument("--elems", type=int, default=1024, help="elements of the elementwise op")
    ap.add_argument("--ar-elems", type=int, default=1024, help="fp32 elements of the all-reduce")
    ap.add_argument("--microbench-lib", default="",
                    help="liblaunch_microbench.so (launch_microbench.cu): C-level launch loops, run after "
                         "the rounds in a process per configuration")
    ap.add_argument("--micro-batches", type=int, default=100)
    ap.add_argument("--micro-runs", type=int, default=1,
                    help="runs of the C-level loops per configuration, before the rounds")
    ap.add_argument("--micro-budget-s", type=float, default=80,
                    help="the C-level loops start no new process after this many seconds")
    ap.add_argument("--pin-cpu", type=int, default=-2,
                    help="CPU the measuring thread runs on (default: the last allowed one; -1: no pinning)")
    ap.add_argument("--gpt", default="launch", help="GPT shape of bench/gpt/train_gpt.py, or none")
    ap.add_argument("--gpt-steps", type=int, default=6)
    ap.add_argument("--backend", choices=("torch", "fake"), default="torch")
    ap.add_argument("--fake-lib-dir", default="")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: PyTorch on the CPU with gloo, no GPU figures (tests the harness)")
    ap.add_argument("--env", action="append", default=[], metavar="K=V", help="extra environment for hook workers")
    ap.add_argument("--out", default="perop-results")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--micro-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.pin_cpu == -2:
        args.pin_cpu = max(os.sched_getaffinity(0))
    if args.worker:
        return worker(args)
    if args.micro_child:
        return micro_child(args)

    t_start = time.monotonic()
    if args.deadline_s > 0:
        HARD_DEADLINE[0] = t_start + args.deadline_s
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    ring_root = os.path.join(os.environ.get("TMPDIR", "/tmp"), "xpu-perop-%d" % os.getpid())
    ops = [o for o in args.ops.split(",") if o]
    modes = [m for m in args.modes.split(",") if m]
    if args.backend == "torch" and args.device == "cpu":
        args.gpu_batches = 0
    configs = [("none", None, None)]
    for spec in args.bundle:
        label, _, path = spec.partition("=")
        if not path:
            label, path = "hook", label
        # LABEL=PATH:MODES picks this bundle's modes (comma-separated).
        path, _, own = path.partition(":")
        for m in ([x for x in own.split(",") if x] or modes):
            configs.append(("%s:%s" % (label, m), bundle_hook(path), m))

    base_env = dict(os.environ)
    base_env.pop("LD_PRELOAD", None)
    for k in [k for k in base_env if k.startswith("XPU_")]:
        base_env.pop(k)
    base_env.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                     "NVSHMEM_DISABLE_NVLS": "1", "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": "0",
                     "CUDA_VISIBLE_DEVICES":
                     os.environ.get("CUDA_VISIBLE_DEVICES", "0")})
    if args.backend == "fake":
        base_env.update({"XPU_FAKE_KERNEL_NS": "0", "XPU_FAKE_TFLOPS": "1e9", "XPU_FAKE_NET_GBPS": "1e9"})
    argv = [sys.executable, os.path.abspath(__file__), "--worker", "--backend", args.backend,
            "--fake-lib-dir", args.fake_lib_dir, "--device", args.device, "--gemm", str(args.gemm), "--elems", str(args.elems),
            "--ar-elems", str(args.ar_elems), "--pin-cpu", str(args.pin_cpu)]
    envs = []
    for name, hook, mode in configs:
        env = dict(base_env)
        if hook:
            rd = os.path.join(ring_root, name.replace(":", "-"))
            os.makedirs(rd, exist_ok=True)
            env.update({"LD_PRELOAD": hook, "XPU_TIMING": mode, "XPU_DAEMON": "off", "XPU_RING_DIR": rd,
                        "XPU_RING_CAPACITY": str(1 << 20), "RANK": "0", "WORLD_SIZE": "1",
                        "LOCAL_RANK": "0", "XPU_JOB_NAME": "perop-bench"})
            for kv in args.env:
                k, _, v = kv.partition("=")
                env[k] = v
        envs.append((name, env))
    # The workers start (PyTorch, CUDA, NCCL and the GPT take most of a
    # minute) while the C-level loops run.
    workers = [Worker(name, env, argv, os.path.join(args.out, "logs", name.replace(":", "-") + ".log"))
               for name, env in envs]
    do_gpt = args.gpt != "none"
    if do_gpt:  # queued: each worker builds its GPT right after it is ready
        for w in workers:
            w.send({"cmd": "gpt_init", "shape": args.gpt})
    rounds = []  # [{config: {"perop": {...}, "gpt": {...}, "micro": {...}}}]
    rng = random.Random(18)
    # The C-level loops first, while the workers initialize: each
    # configuration in a process of its own (a crash there costs only its
    # figures), alternately, --micro-runs times, within --micro-budget-s.
    # Each figure is the best of many batches of one thread's calls, which
    # the workers' start-up on other cores hardly disturbs.
    if args.microbench_lib:
        micro_end = time.monotonic() + args.micro_budget_s
        for rep in range(args.micro_runs):
            res = {}
            for name, env in rng.sample(envs, len(envs)):
                if time.monotonic() > micro_end or time_left() < 60:
                    print("micro %s left out: its time is up" % name, flush=True)
                    continue
                a = run_micro_child(args, name, env)
                if a is not None:
                    res[name] = {"micro": a}
            if res:
                rounds.append(res)
            print("micro run %d done (%.0f s)" % (rep + 1, time.monotonic() - t_start), flush=True)

    info = {}
    for w in workers:  # started together, they initialize in parallel
        r = w.recv(240)
        if r is None or not r.get("ready"):
            w.give_up((r or {}).get("error", "did not start"))
        else:
            info[w.name] = r
    if not workers[0].alive:
        print("the no-hook worker did not start; see %s" % workers[0].log.name, file=sys.stderr)
        return 1
    gpt_ok = set()
    if do_gpt:
        for w in workers:
            if not w.alive:
                continue
            r = w.recv(300)
            if r is None or not r.get("ok"):
                print("worker %s: no GPT (%s)" % (w.name, (r or {}).get("error")), flush=True)
            else:
                gpt_ok.add(w.name)
        if workers[0].name not in gpt_ok:
            do_gpt = False
    print("workers ready after %.0f s: %s" % (time.monotonic() - t_start, ", ".join(w.name for w in workers if w.alive)),
          flush=True)

    perop_cmd = {"cmd": "perop", "ops": ops, "batch": args.batch, "cpu_batches": args.cpu_batches,
                 "gpu_batches": args.gpu_batches}
    for r in range(args.rounds):
        if time.monotonic() - t_start > args.budget_s or time_left() < 20:
            print("time budget reached after %d rounds" % r, flush=True)
            break
        if not workers[0].alive or sum(w.alive for w in workers) < 2:
            print("stopping after %d rounds: the no-hook worker or every hook worker is gone" % r,
                  flush=True)
            break
        order = [w for w in workers if w.alive]
        rng.shuffle(order)
        res = {}
        for w in order:
            w.send(perop_cmd)
            a = w.recv(120)
            if a is None or "error" in a:
                if a is not None:
                    print("round %d %s: %s" % (r, w.name, a["error"]), file=sys.stderr)
                continue
            res.setdefault(w.name, {})["perop"] = a
        if do_gpt:
            rng.shuffle(order)
            for w in order:
                if not w.alive or w.name not in gpt_ok:
                    continue
                w.send({"cmd": "gpt", "steps": args.gpt_steps})
                a = w.recv(120)
                if a is not None and "error" not in a:
                    res.setdefault(w.name, {})["gpt"] = a
        rounds.append(res)
        print("round %d done (%.0f s)" % (r + 1, time.monotonic() - t_start), flush=True)
        # Tables so far: a run cut short by an outer time limit keeps its rounds.
        write_results(args, configs, ops, rounds, do_gpt, info, {})
    final = {}
    for w in workers:
        w.send({"cmd": "quit"})
        a = w.recv(min(30, max(1, time_left() - 5)))
        if a is not None:
            final[w.name] = a.get("counters")
        if w.p.poll() is None:
            try:
                w.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                w.p.kill()
    for name, _, _ in configs[1:]:
        d = os.path.join(ring_root, name.replace(":", "-"))
        for f in os.listdir(d) if os.path.isdir(d) else []:
            os.unlink(os.path.join(d, f))
        if os.path.isdir(d):
            os.rmdir(d)
    if os.path.isdir(ring_root):
        os.rmdir(ring_root)

    print(write_results(args, configs, ops, rounds, do_gpt, info, final))
    return 0


def run_micro_child(args, name, env):
    """The C-level loops of one configuration in a fresh process; None when
    it failed (the reason and its log tail are printed)."""
    log = os.path.join(args.out, "logs", "micro-%s.log" % name.replace(":", "-"))
    argv = [sys.executable, os.path.abspath(__file__), "--micro-child", "--backend", args.backend,
            "--fake-lib-dir", args.fake_lib_dir, "--microbench-lib",
            os.path.abspath(args.microbench_lib), "--micro-batches", str(args.micro_batches),
            "--batch", str(args.batch)]
    try:
        with open(log, "a") as lf:
            p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=lf, text=True,
                               timeout=max(5, min(90, time_left() - 10)))
    except subprocess.TimeoutExpired:
        print("micro %s: no answer in time" % name, flush=True)
        return None
    got = {}
    for line in p.stdout.splitlines():
        if line.startswith("@@ "):
            got.update(json.loads(line[3:]))
    if p.returncode != 0 or len(got) < 3:
        print("micro %s: exit status %s, loops %s; last lines of %s:"
              % (name, p.returncode, sorted(got), log), flush=True)
        with open(log, errors="replace") as f:
            for line in f.readlines()[-12:]:
                print("    " + line.rstrip(), flush=True)
    return got or None


def write_results(args, configs, ops, rounds, do_gpt, info, final):
    report = summarize(args, configs, ops, rounds, do_gpt)
    with open(os.path.join(args.out, "perop.txt"), "w") as f:
        f.write(report + "\n")
    with open(os.path.join(args.out, "perop.json"), "w") as f:
        json.dump({"args": vars(args), "configs": [c[0] for c in configs], "workers": info,
                   "rounds": rounds, "final_counters": final}, f)
    return report


def fmt(x, spec="%.0f"):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else spec % x


def summarize(args, configs, ops, rounds, do_gpt):
    names = [c[0] for c in configs]
    lines = ["per-op cost: %d rounds, %d ops per batch, cpu = best of %d batches, gpu = best of %d; "
             "added = per-round difference to `none` (median [p25, p75], mean +- 95%% CI)"
             % (sum(any("perop" in v for v in rd.values()) for rd in rounds), args.batch,
                args.cpu_batches, args.gpu_batches)]
    for op in ops:
        lines.append("")
        lines.append("%s  (%s)" % (op, {"elementwise": "y.add_(x), %d fp32" % args.elems,
                                        "gemm": "torch.matmul bf16 %d^3" % args.gemm,
                                        "allreduce": "dist.all_reduce %d fp32, world 1" % args.ar_elems}.get(op, op)))
        lines.append("  %-16s %10s %26s %16s | %10s %26s | %8s %s"
                     % ("config", "cpu ns/op", "cpu added ns [p25,p75]", "mean +- CI",
                        "gpu ns/op", "gpu added ns [p25,p75]", "rec/op", "losses"))
        for name in names:
            cpu, gpu, cpu_d, gpu_d, rec, caught, losses = [], [], [], [], [], 0, {}
            for rd in rounds:
                me = rd.get(name, {}).get("perop", {}).get(op)
                base = rd.get("none", {}).get("perop", {}).get(op)
                if not me:
                    continue
                cpu.append(me["cpu_min"])
                if me["gpu_min"] is not None:
                    gpu.append(me["gpu_min"])
                caught += me["gpu_caught_up"]
                if me["records_per_op"] is not None:
                    rec.append(me["records_per_op"])
                for k in ("dropped_full", "event_pool_empty", "pending_full", "cuda_error", "internal"):
                    v = (me.get("counters") or {}).get(k, 0)
                    if v:
                        losses[k] = losses.get(k, 0) + v
                if base and name != "none":
                    cpu_d.append(me["cpu_min"] - base["cpu_min"])
                    if me["gpu_min"] is not None and base["gpu_min"] is not None:
                        gpu_d.append(me["gpu_min"] - base["gpu_min"])
            if not cpu:
                lines.append("  %-16s (no data)" % name)
                continue
            sc, sg = stats(cpu_d), stats(gpu_d)
            cpu_added = "%+.0f [%+.0f, %+.0f]" % (sc["median"], sc["p25"], sc["p75"]) if sc else "-"
            cpu_mean = "%+.0f +- %.0f" % (sc["mean"], sc["ci95"]) if sc else "-"
            gpu_added = "%+.0f [%+.0f, %+.0f]" % (sg["median"], sg["p25"], sg["p75"]) if sg else "-"
            loss = ",".join("%s=%d" % kv for kv in sorted(losses.items())) or "none"
            if caught:
                loss += " gpu_batches_not_back_to_back=%d" % caught
            lines.append("  %-16s %10.0f %26s %16s | %10s %26s | %8s %s"
                         % (name, statistics.median(cpu), cpu_added, cpu_mean,
                            fmt(statistics.median(gpu) if gpu else None), gpu_added,
                            fmt(statistics.median(rec) if rec else None, "%.2f"), loss))
    micro_loops = []
    for rd in rounds:
        for name in names:
            for loop in rd.get(name, {}).get("micro", {}):
                if loop not in micro_loops:
                    micro_loops.append(loop)
    if micro_loops:
        lines.append("")
        lines.append("C-level launch loops (launch_microbench.cu, %d-call batches, min of %d batches per run, "
                     "%d run(s) per configuration before the rounds, each in its own process): ns per call"
                     % (args.batch, args.micro_batches, args.micro_runs))
        for loop in micro_loops:
            lines.append("  %s  (%s)" % (loop, {"kernel": "empty kernel <<<>>>, untraced",
                                                "gemm": "cublasGemmEx bf16 64^3, traced",
                                                "allreduce": "ncclAllReduce 4 KiB, 1 rank, traced"}.get(loop, loop)))
            lines.append("    %-16s %10s %26s %16s" % ("config", "ns/call", "added ns [p25,p75]", "mean +- CI"))
            for name in names:
                v, d = [], []
                for rd in rounds:
                    me = rd.get(name, {}).get("micro", {}).get(loop)
                    base = rd.get("none", {}).get("micro", {}).get(loop)
                    if not me:
                        continue
                    v.append(me["min_ns"])
                    if base and name != "none":
                        d.append(me["min_ns"] - base["min_ns"])
                if not v:
                    continue
                sd = stats(d)
                lines.append("    %-16s %10.1f %26s %16s"
                             % (name, statistics.median(v),
                                "%+.1f [%+.1f, %+.1f]" % (sd["median"], sd["p25"], sd["p75"]) if sd else "-",
                                "%+.1f +- %.1f" % (sd["mean"], sd["ci95"]) if sd else "-"))
    if do_gpt:
        lines.append("")
        lines.append("GPT (%s shape, DDP world 1): median step per round; overhead = per-round ratio to `none`"
                     % args.gpt)
        lines.append("  %-16s %6s %14s %24s %18s" % ("config", "rounds", "step ms", "overhead % [p25,p75]",
                                                      "mean +- 95% CI"))
        for name in names:
            ms, ov = [], []
            for rd in rounds:
                me = rd.get(name, {}).get("gpt")
                base = rd.get("none", {}).get("gpt")
                if not me:
                    continue
                ms.append(me["median_ms"])
                if base and name != "none":
                    ov.append(100.0 * (me["median_ms"] / base["median_ms"] - 1.0))
            if not ms:
                continue
            s = stats(ov)
            lines.append("  %-16s %6d %14.3f %24s %18s"
                         % (name, len(ms), statistics.median(ms),
                            "%+.2f [%+.2f, %+.2f]" % (s["median"], s["p25"], s["p75"]) if s else "-",
                            "%+.2f +- %.2f" % (s["mean"], s["ci95"]) if s else "-"))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
