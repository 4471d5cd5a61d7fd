#!/usr/bin/env python3
"""Fault: the disk under the engine's history fills while a 4-rank job trains,
then space comes back.

Where mounting is allowed (root), the engine runs in a private mount
namespace with its database on a small tmpfs of its own, and the test fills
that tmpfs to ENOSPC from outside (through /proc/<engine>/root); otherwise
the engine gets SQLite's page limit (--db-max-mb 1) and the test fills its
database up to it (XPU_E2E_NO_MOUNT=1 picks this way as well). While the disk is full:

- the engine keeps serving and analysing: `xpu ranks` answers and every
  rank's record count keeps growing;
- the failure is visible and counted: /healthz answers 200 "degraded: ...",
  xpu_db_degraded is 1, xpu_db_write_failures_total grows, `xpu status`
  shows the history DEGRADED with the same counts as the metrics; history
  rows beyond the retry buffer (--db-retry-rows 4) are dropped and counted
  (xpu_db_rows_dropped_total, `xpu status` rows_dropped), never silently.

After the space comes back the engine writes again by itself (/healthz "ok",
xpu_db_degraded 0, no row pending); the job finishes (exit 0) and every
record each hook wrote is accounted: received by the engine + counted drops.

usage: test_disk_full.py PATHS_JSON
"""
import errno
import os
import sqlite3
import subprocess
import time
import urllib.request

from pipeline_harness import (check, check_hook_accounting, engine_ranks, log, metric, run_test,
                              wait_for, wait_ranks_alive)

NPROC = 4
TRAIN = ["--steps", "600", "--layers", "2", "--hidden", "128", "--tokens", "128",
         "--step-sleep-ms", "40"]
FULL_S = 4  # how long the disk stays full once the engine noticed
TMPFS = "size=8m,mode=0700"


def can_mount():
    if os.geteuid() != 0 or os.environ.get("XPU_E2E_NO_MOUNT") == "1":
        return False
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        'd=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs "$d" && umount "$d" '
                        '&& rmdir "$d"'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return r.returncode == 0


class TmpfsDisk:
    """The engine's database directory is a tmpfs in the engine's own mount
    namespace; reached from here through /proc/<pid>/root."""

    def __init__(self, pipe):
        self.dir = os.path.join(pipe.dir, "dbfs")
        os.makedirs(self.dir, mode=0o700)
        self.db = os.path.join(self.dir, "engine.db")
        self.wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                     'mount -t tmpfs -o %s tmpfs "$0" && exec "$@"' % TMPFS, self.dir]
        self.extra = []
        self.filler = None

    def fill(self, engine_pid):
        self.filler = "/proc/%d/root%s/filler" % (engine_pid, self.dir)
        chunk = b"\0" * (64 << 10)
        n = 0
        with open(self.filler, "wb", buffering=0) as f:
            while True:
                try:
                    f.write(chunk)
                    n += len(chunk)
                except OSError as e:
                    check(e.errno == errno.ENOSPC, "filling the tmpfs: %r" % e)
                    break
        log("tmpfs full (filler %d KiB)" % (n >> 10))

    def free(self):
        os.unlink(self.filler)
        log("filler removed: the tmpfs has room again")


class PageLimitDisk:
    """No mounts here: the engine's database (--db-max-mb 1) is filled to
    that page limit; space comes back by deleting the filler rows."""

    def __init__(self, pipe):
        self.db = os.path.join(pipe.dir, "engine.db")
        self.wrap = []
        self.extra = ["--db-max-mb", "1"]

    def fill(self, engine_pid):
        c = sqlite3.connect(self.db, timeout=30)
        c.execute("PRAGMA max_page_count = 256")  # the engine's limit (1 MiB of 4 KiB pages)
        c.execute("PRAGMA synchronous = OFF")  # test data: fast commits
        c.execute("CREATE TABLE IF NOT EXISTS test_filler (b BLOB)")
        for size in (65536, 4096, 256, 16):  # to the last free byte
            try:
                while True:
                    c.execute("INSERT INTO test_filler VALUES (zeroblob(?))", (size,))
                    c.commit()
            except sqlite3.OperationalError as e:
                check("full" in str(e), "filling the database: %r" % e)
                c.rollback()
        c.close()
        log("database at its page limit")

    def free(self):
        c = sqlite3.connect(self.db, timeout=30)
        c.execute("DELETE FROM test_filler")
        c.commit()
        c.close()
        log("filler rows deleted: the database has free pages again")


def healthz(engine):
    url = "http://127.0.0.1:%d/healthz" % engine.metrics_port
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, resp.read().decode()


def store_status(pipe, engine):
    return pipe.cli_json(engine.addr, "status")["store"]


def body(pipe):
    disk = TmpfsDisk(pipe) if can_mount() else PageLimitDisk(pipe)
    log("disk: %s" % type(disk).__name__)
    engine = pipe.start_engine(db=disk.db, wrap=disk.wrap,
                               extra=disk.extra + ["--db-retry-rows", "4"])
    pipe.start_daemon(engine.addr)
    job = pipe.start_job("e2ep-diskfull-%d" % os.getpid(), NPROC, TRAIN)
    wait_ranks_alive(pipe, engine.addr, job.job, NPROC, job_proc=job.proc)
    check(healthz(engine) == (200, "ok\n") or healthz(engine)[1].startswith("ok"),
          "healthz before the fault: %r" % (healthz(engine),))

    disk.fill(engine.proc.popen.pid)

    def degraded():
        code, text = healthz(engine)
        m = pipe.metrics(engine)
        if code == 200 and text.startswith("degraded") and metric(m, "xpu_db_degraded") == 1:
            return text, m
        return None

    text, m = wait_for(degraded, 30, "/healthz to say degraded", 0.3)
    log("/healthz: %s" % text.strip())
    at_full = engine_ranks(pipe, engine.addr, job.job)
    time.sleep(FULL_S)
    check(job.proc.alive(), "the job ended while the disk was full; make it longer")
    now = engine_ranks(pipe, engine.addr, job.job)
    check(all(now[r]["records"] > at_full[r]["records"] for r in range(NPROC)),
          "records stopped while the disk was full: %s -> %s" % (
              {r: at_full[r]["records"] for r in at_full}, {r: now[r]["records"] for r in now}))
    log("the engine kept serving and analysing: records %d -> %d" % (
        sum(r["records"] for r in at_full.values()), sum(r["records"] for r in now.values())))

    # /metrics first: the counters only grow, so the later status is at least as far.
    m = pipe.metrics(engine)
    st = store_status(pipe, engine)
    check(st["degraded"] and st["error"], "xpu status store: %s" % st)
    failures = metric(m, "xpu_db_write_failures_total")
    dropped = metric(m, "xpu_db_rows_dropped_total")
    check(failures and failures >= 1, "xpu_db_write_failures_total = %s" % failures)
    check(dropped and dropped >= 1, "no history row dropped past --db-retry-rows 4: %s" % dropped)
    check(st["write_failures"] >= failures and st["rows_dropped"] >= dropped,
          "xpu status %s behind /metrics (failures %s, dropped %s)" % (st, failures, dropped))
    text = pipe.cli(engine.addr, "status").stdout.decode()
    check("DEGRADED" in text, "xpu status text does not show the degraded history:\n%s" % text)
    log("counted: %d failed writes, %d rows dropped, %d pending (%s)" % (
        st["write_failures"], st["rows_dropped"], st["rows_pending"], st["error"]))

    disk.free()

    def recovered():
        code, text = healthz(engine)
        m = pipe.metrics(engine)
        ok = (code == 200 and text.startswith("ok") and metric(m, "xpu_db_degraded") == 0 and
              metric(m, "xpu_db_rows_pending") == 0)
        return m if ok else None

    m = wait_for(recovered, 30, "history writes to succeed again", 0.3)
    st = store_status(pipe, engine)
    check(not st["degraded"] and st["rows_dropped"] == metric(m, "xpu_db_rows_dropped_total"),
          "after recovery: %s" % st)
    log("recovered: /healthz ok, %d rows dropped while full stay counted" % st["rows_dropped"])

    check(job.wait() == 0, "job failed")
    rings = job.rings()
    check_hook_accounting(job, rings)

    def accounted():
        ranks = engine_ranks(pipe, engine.addr, job.job)
        ok = len(ranks) == NPROC and all(
            ranks[k]["liveness"] == "exited" and
            ranks[k]["records"] + ranks[k]["dropped"] - ring.counter("dropped_full") == ring.written
            for k, ring in rings.items())
        return ranks if ok else None

    ranks = wait_for(accounted, 30, "every record of %s to be accounted" % job.job, 0.5)
    for rank, ring in sorted(rings.items()):
        log("rank %d: hook wrote %d, engine %d, dropped %d" % (
            rank, ring.written, ranks[rank]["records"], ranks[rank]["dropped"]))


if __name__ == "__main__":
    run_test("disk-full", body)
