#!/usr/bin/env python3
"""Fault: rings corrupted and truncated under live, hooked training processes.

Job A (4 ranks, rings in files under XPU_RING_DIR): while it trains, random
bytes are written over the positions (write_index, read_index) of ranks 0
and 1, three times each, as a stray writer or a bad page would. Job B (2
ranks, the default sealed memfd rings): the test opens each rank's ring
through /proc/<pid>/fd and tries to shrink and to grow it. Job C (2 ranks,
ring files): mid-run, as their owner could, the test truncates rank 0's
ring file to its header page and rank 1's to nothing; the hook's next
store into a lost page would raise SIGBUS.

Checked: every job finishes (exit 0), job C about as fast as job B (same
work, same time); the memfd truncation attempts fail with EPERM (the
seals); the daemon and the engine stay up; the corrupted ranks show
resynchronizations and their losses under `ring_resync` (by reason in
`xpu ranks --json`), bounded (no counter wraps); the untouched ranks lose
nothing; for every rank of jobs A and B and for job C's rank 0, records
the engine received + counted drops == records the hook wrote (its own
counter, not the corrupted index; for rank 0 of job C read from the header
page still in the file), job C's rank 0 under `ring_truncated`. Job C's
rank 1 lost its counters with the header page: the engine holds no more
than the hook had written when it last saw the header.

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
COUNTERS_OFFSET = 1152
RECORDS_WRITTEN = 10  # xpu_counter
RING_TRUNCATED = 20
RING_HEADER_SIZE = 4096
ROUNDS = 3
NPROC_C = 2


def ring_files(job):
    """{rank: path} of job's ring files."""
    out = {}
    for name in os.listdir(job.ring_dir):
        path = os.path.join(job.ring_dir, name)
        d = RingDump(job.p.paths.ring_dump, path, records=False)
        if d.header["job"] == job.job:
            out[d.header["rank"]] = path
    return out


def read_u64(path, offset):
    with open(path, "rb") as f:
        f.seek(offset)
        return struct.unpack("<Q", f.read(8))[0]


def check_offsets(pipe, path):
    """The offsets above name write_index and records_written: read them, then
    ask xpu-ring-dump."""
    written_at = COUNTERS_OFFSET + 8 * RECORDS_WRITTEN
    before = (read_u64(path, WRITE_INDEX_OFFSET), read_u64(path, written_at))
    h = RingDump(pipe.paths.ring_dump, path, records=False).header
    dumped = (h["write_index"], h["counters"]["records_written"])
    after = (read_u64(path, WRITE_INDEX_OFFSET), read_u64(path, written_at))
    for i, what in enumerate(("write_index", "records_written")):
        check(before[i] <= dumped[i] <= after[i], "%s at its offset reads %d..%d, xpu-ring-dump "
              "says %d" % (what, before[i], after[i], dumped[i]))


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


def truncate_rings(job, files):
    """Rank 0's ring file to its header page, rank 1's to nothing, as their
    owner may (a file cannot be sealed)."""
    sizes = {0: RING_HEADER_SIZE, 1: 0}
    for rank, size in sizes.items():
        os.truncate(files[rank], size)
    log("job %s: ring files truncated mid-run: %s" % (
        job.job, {r: "%d bytes" % s for r, s in sizes.items()}))


def wait_all(jobs, timeout=150):
    """Waits for every job; {job: (rc, seconds from its start)}."""
    out = {}
    deadline = time.monotonic() + timeout
    while len(out) < len(jobs):
        check(time.monotonic() < deadline, "jobs still running after %d s: %s" % (
            timeout, [j.job for j in jobs if j.job not in out]))
        for j in jobs:
            if j.job not in out:
                rc = j.proc.popen.poll()
                if rc is not None:
                    out[j.job] = (rc, time.monotonic() - j.started)
        time.sleep(0.05)
    for job, (rc, secs) in sorted(out.items()):
        log("job %s exited %d after %.1f s" % (job, rc, secs))
    return out


def check_truncated_job(pipe, engine, job, files, ended):
    rc_c, secs_c = ended[job.job]
    check(rc_c == 0, "job %s failed after its ring files were truncated (exit %d)" % (job.job, rc_c))
    # The header page survived: the hook's own counters are still the file's.
    path0 = files[0]
    check(os.path.getsize(path0) == RING_HEADER_SIZE, "rank 0's ring file grew back")
    written0 = read_u64(path0, COUNTERS_OFFSET + 8 * RECORDS_WRITTEN)
    faults0 = read_u64(path0, COUNTERS_OFFSET + 8 * RING_TRUNCATED)
    check(faults0 >= 1, "rank 0: the hook answered no SIGBUS (ring_truncated counter 0)")

    def rank0_accounted():
        r = engine_ranks(pipe, engine.addr, job.job).get(0)
        if r is None or r["liveness"] != "exited":
            return None
        return r if r["records"] + r["dropped"] - r["lost"].get("ring_full", 0) == written0 else None

    try:
        r0 = wait_for(rank0_accounted, 30, "rank 0 of %s accounted" % job.job, 0.5)
    except Exception:
        log("rank 0: %s, hook wrote %d" % (engine_ranks(pipe, engine.addr, job.job).get(0),
                                           written0))
        raise
    check(r0["written"] == written0, "rank 0: engine says the hook wrote %d, ring %d" % (
        r0["written"], written0))
    check(r0["lost"].get("ring_truncated", 0) > 0, "rank 0: no ring_truncated loss: %s" % r0)
    log("rank 0 of %s: hook wrote %d, engine %d, dropped %d %s" % (
        job.job, written0, r0["records"], r0["dropped"], r0["lost"]))
    # Rank 1's counters went with its header page: what the engine holds
    # can only be checked against what the daemon saw written by then
    # (`written` stays at that), never more.
    r1 = engine_ranks(pipe, engine.addr, job.job).get(1)
    check(r1 is not None and r1["records"] > 0, "rank 1 of %s: %s" % (job.job, r1))
    check(r1["records"] + r1["dropped"] - r1["lost"].get("ring_full", 0) <= r1["written"],
          "rank 1: more accounted than the hook had written: %s" % r1)
    log("rank 1 of %s (header page lost): engine %d, dropped %d %s of %d seen written" % (
        job.job, r1["records"], r1["dropped"], r1["lost"], r1["written"]))


def body(pipe):
    rng = random.Random(os.getpid())
    engine = pipe.start_engine()
    daemon = pipe.start_daemon(engine.addr)
    job_a = pipe.start_job("e2ep-corrupt-%d" % os.getpid(), NPROC_A, TRAIN)
    job_b = pipe.start_job("e2ep-sealed-%d" % os.getpid(), NPROC_B, TRAIN,
                           extra_env={"XPU_RING_DIR": ""})
    job_c = pipe.start_job("e2ep-truncated-%d" % os.getpid(), NPROC_C, TRAIN)
    wait_ranks_alive(pipe, engine.addr, job_a.job, NPROC_A, job_proc=job_a.proc)
    wait_ranks_alive(pipe, engine.addr, job_b.job, NPROC_B, job_proc=job_b.proc)
    wait_ranks_alive(pipe, engine.addr, job_c.job, NPROC_C, job_proc=job_c.proc)
    files_c = ring_files(job_c)
    check(sorted(files_c) == list(range(NPROC_C)), "ring files of %s: %s" % (job_c.job, files_c))
    check_offsets(pipe, files_c[0])
    truncate_rings(job_c, files_c)

    files = ring_files(job_a)
    check(sorted(files) == list(range(NPROC_A)), "ring files of %s: %s" % (job_a.job, files))
    check_offsets(pipe, files[0])
    for i in range(ROUNDS):
        for rank in CORRUPTED:
            corrupt(files[rank], rng)
        log("round %d: random bytes over the positions of ranks %s" % (i + 1, list(CORRUPTED)))
        time.sleep(0.7)
    try_truncate(job_b)
    check(job_a.proc.alive() and job_b.proc.alive() and job_c.proc.alive(),
          "a job ended before the faults were done; make it longer")

    ended = wait_all([job_a, job_b, job_c])
    check(ended[job_a.job][0] == 0, "job %s failed after its rings were corrupted" % job_a.job)
    check(ended[job_b.job][0] == 0, "job %s failed after the truncation attempts" % job_b.job)
    # Same work as job B, started together: a truncated ring costs no time.
    secs_b, secs_c = ended[job_b.job][1], ended[job_c.job][1]
    check(secs_c <= 1.5 * secs_b + 3, "job %s took %.1f s, job %s %.1f s" % (
        job_c.job, secs_c, job_b.job, secs_b))
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
    check_truncated_job(pipe, engine, job_c, files_c, ended)


if __name__ == "__main__":
    run_test("ring-corruption", body)
