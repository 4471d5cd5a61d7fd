#!/usr/bin/env python3
"""Fault: rings corrupted and truncated under live, hooked training processes.

Job A (4 ranks, rings in files under XPU_RING_DIR): while it trains, random
bytes are written over the positions (write_index, read_index) of ranks 0
and 1, three times each, as a stray writer or a bad page would. Job B (2
ranks, the default sealed memfd rings): the test opens each rank's ring
through /proc/<pid>/fd and tries to shrink and to grow it.

Checked: both jobs finish (exit 0); the truncation attempts fail with EPERM
(the seals); the daemon and the engine stay up; the corrupted ranks show
resynchronizations and their losses under `ring_resync` (by reason in
`xpu ranks --json`), bounded (no counter wraps); the untouched ranks lose
nothing; and for every rank, records the engine received + counted drops ==
records the hook wrote (its own counter, not the corrupted index).

usage: test_ring_corruption.py PATHS_JSON
"""
import errno
import os
import random
import struct
import time

from pipeline_harness import (RingDump, check, engine_ranks, log, run_test, wait_for,
                              wait_ranks_alive)

NPROC_A = 4
NPROC_B = 2
CORRUPTED = (0, 1)
TRAIN = ["--steps", "500", "--layers", "2", "--hidden", "128", "--tokens", "128",
         "--step-sleep-ms", "30"]
# include/xpu/ring.h, xpu_ring_header_v1 (checked against xpu-ring-dump below).
WRITE_INDEX_OFFSET = 1024
READ_INDEX_OFFSET = 1088
ROUNDS = 3


def ring_files(job):
    """{rank: path} of job's ring files."""
    out = {}
    for name in os.listdir(job.ring_dir):
        path = os.path.join(job.ring_dir, name)
        d = RingDump(job.p.paths.ring_dump, path, records=False)
        if d.header["job"] == job.job:
            out[d.header["rank"]] = path
    return out


def check_offsets(pipe, path):
    """The offsets above name write_index: read it, then ask xpu-ring-dump."""
    with open(path, "rb") as f:
        f.seek(WRITE_INDEX_OFFSET)
        before = struct.unpack("<Q", f.read(8))[0]
    dumped = RingDump(pipe.paths.ring_dump, path, records=False).header["write_index"]
    with open(path, "rb") as f:
        f.seek(WRITE_INDEX_OFFSET)
        after = struct.unpack("<Q", f.read(8))[0]
    check(before <= dumped <= after, "write_index at offset %d reads %d..%d, xpu-ring-dump says %d" %
          (WRITE_INDEX_OFFSET, before, after, dumped))


def corrupt(path, rng):
    with open(path, "r+b", buffering=0) as f:
        for off in (WRITE_INDEX_OFFSET, READ_INDEX_OFFSET):
            f.seek(off)
            f.write(rng.getrandbits(64).to_bytes(8, "little"))


def ring_memfds(pid):
    out = []
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("/memfd:xpu-ring"):
            out.append(os.path.join(fd_dir, fd))
    return out


def try_truncate(job):
    """Tries to shrink and to grow every rank's memfd ring; both must fail."""
    with open(os.path.join(job.dir, "pids")) as f:
        pids = [int(line.split()[1]) for line in f if line.strip()]
    check(len(pids) == job.nproc, "pids of job %s: %s" % (job.job, pids))
    for pid in pids:
        rings = ring_memfds(pid)
        check(len(rings) == 1, "pid %d: ring memfds %s" % (pid, rings))
        fd = os.open(rings[0], os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            for new in (4096, 0, size + 4096):
                try:
                    os.ftruncate(fd, new)
                except OSError as e:
                    check(e.errno == errno.EPERM, "ftruncate(%d) of pid %d's ring: %r" % (new, pid, e))
                    continue
                raise AssertionError("pid %d's ring could be resized to %d bytes" % (pid, new))
            check(os.fstat(fd).st_size == size, "pid %d's ring changed size" % pid)
        finally:
            os.close(fd)
    log("job %s: no ring of %s could be shrunk or grown (EPERM)" % (job.job, pids))


def check_accounted(pipe, engine, job, written_of):
    """records + counted drops (beyond the hook's ring_full) == written, per rank."""
    def accounted():
        ranks = engine_ranks(pipe, engine.addr, job.job)
        if len(ranks) != job.nproc or any(r["liveness"] != "exited" for r in ranks.values()):
            return None
        for k, r in ranks.items():
            written = written_of(k, r)
            if r["records"] + r["dropped"] - r["lost"].get("ring_full", 0) != written:
                return None
        return ranks

    try:
        return wait_for(accounted, 30, "every record of %s to be accounted" % job.job, 0.5)
    except Exception:
        for k, r in sorted(engine_ranks(pipe, engine.addr, job.job).items()):
            log("rank %d: %s written %d" % (k, r, written_of(k, r)))
        raise


def body(pipe):
    rng = random.Random(os.getpid())
    engine = pipe.start_engine()
    daemon = pipe.start_daemon(engine.addr)
    job_a = pipe.start_job("e2ep-corrupt-%d" % os.getpid(), NPROC_A, TRAIN)
    job_b = pipe.start_job("e2ep-sealed-%d" % os.getpid(), NPROC_B, TRAIN,
                           extra_env={"XPU_RING_DIR": ""})
    wait_ranks_alive(pipe, engine.addr, job_a.job, NPROC_A, job_proc=job_a.proc)
    wait_ranks_alive(pipe, engine.addr, job_b.job, NPROC_B, job_proc=job_b.proc)

    files = ring_files(job_a)
    check(sorted(files) == list(range(NPROC_A)), "ring files of %s: %s" % (job_a.job, files))
    check_offsets(pipe, files[0])
    for i in range(ROUNDS):
        for rank in CORRUPTED:
            corrupt(files[rank], rng)
        log("round %d: random bytes over the positions of ranks %s" % (i + 1, list(CORRUPTED)))
        time.sleep(0.7)
    try_truncate(job_b)
    check(job_a.proc.alive() and job_b.proc.alive(), "a job ended before the faults were done; "
          "make it longer")

    check(job_a.wait() == 0, "job %s failed after its rings were corrupted" % job_a.job)
    check(job_b.wait() == 0, "job %s failed after the truncation attempts" % job_b.job)
    check(daemon.alive(), "daemon died:\n%s" % daemon.log_text())
    check(engine.proc.alive(), "engine died:\n%s" % engine.proc.log_text())

    rings = {k: RingDump(pipe.paths.ring_dump, p, records=False) for k, p in files.items()}
    ranks = check_accounted(pipe, engine, job_a,
                            lambda k, r: rings[k].counter("records_written"))
    for k, r in sorted(ranks.items()):
        written = rings[k].counter("records_written")
        check(r["written"] == written, "rank %d: engine says the hook wrote %d, ring %d" % (
            k, r["written"], written))
        capacity = rings[k].header["ring_capacity"]
        if k in CORRUPTED:
            check(r["resyncs"] >= 1, "rank %d: corrupted but no resync: %s" % (k, r))
            check(r["dropped"] <= written, "rank %d: %d dropped of %d written" % (
                k, r["dropped"], written))
            check(r["lost"].get("ring_resync", 0) <= ROUNDS * 2 * capacity,
                  "rank %d: ring_resync %d beyond %d rings' worth" % (
                      k, r["lost"].get("ring_resync", 0), ROUNDS * 2))
        else:
            check(r["resyncs"] == 0 and r["dropped"] == 0 and r["records"] == written,
                  "untouched rank %d: %s, wrote %d" % (k, r, written))
        log("rank %d: hook wrote %d, engine %d, dropped %d %s, resyncs %d" % (
            k, written, r["records"], r["dropped"], r["lost"], r["resyncs"]))
    ranks_b = check_accounted(pipe, engine, job_b, lambda k, r: r["written"])
    for k, r in sorted(ranks_b.items()):
        check(r["written"] > 0 and r["dropped"] == 0, "sealed rank %d: %s" % (k, r))
    log("job %s: every record accounted, nothing lost" % job_b.job)


if __name__ == "__main__":
    run_test("ring-corruption", body)
