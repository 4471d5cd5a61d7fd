#!/usr/bin/env python3
"""Fault: the engine is SIGKILLed while an 8-rank job trains, and restarted on
the same port and database.

The job is not disturbed (exit 0); the daemon reconnects and re-registers
every live rank with the new engine, re-sending the definitions (signatures)
its buffered records need and every record the dead engine had not
acknowledged; the new engine resumes each rank's count from its history
(acknowledgements follow durable checkpoints). So every record is accounted:
per rank, the new engine's records plus the counted drops equal what the
hook wrote. `xpu jobs --all` still lists the job (history in SQLite, or with
XPU_E2E_DB=postgres in a throwaway PostgreSQL server: the same accounting on
the other backend).

usage: test_engine_restart.py PATHS_JSON
"""
import os
import signal
import sys
import time

from pipeline_harness import (check, check_hook_accounting, engine_ranks, log, metric_sum, run_test,
                              wait_for, wait_ranks_alive)

NPROC = 8
TRAIN = ["--steps", "250", "--layers", "2", "--hidden", "256", "--tokens", "256",
         "--step-sleep-ms", "40"]


def body(pipe):
    if os.environ.get("XPU_E2E_DB") == "postgres":
        db = pipe.start_postgres()
        if db is None:
            log("SKIP: PostgreSQL server binaries not installed (Debian postgresql-15)")
            pipe.close()
            sys.exit(77)
    else:
        db = os.path.join(pipe.dir, "engine.db")
    engine = pipe.start_engine("engine1", db=db)
    daemon = pipe.start_daemon(engine.addr)
    job = pipe.start_job("e2ep-engine-restart-%d" % os.getpid(), NPROC, TRAIN)

    wait_ranks_alive(pipe, engine.addr, job.job, NPROC, job_proc=job.proc)
    before = engine_ranks(pipe, engine.addr, job.job)
    # Let the first engine persist the job (its store writes in the background).
    time.sleep(1.5)
    before = engine_ranks(pipe, engine.addr, job.job)

    engine.proc.kill(signal.SIGKILL)
    engine.proc.popen.wait(10)
    log("engine1 killed (SIGKILL) while the job runs")
    time.sleep(1.0)
    check(job.proc.alive(), "job ended before the engine restart; make it longer")
    check(daemon.alive(), "daemon died with the engine:\n%s" % daemon.log_text())

    engine2 = pipe.start_engine("engine2", port=engine.port, db=db)

    def reconnected():
        st = pipe.cli_json(engine2.addr, "status")
        return st if any(d["connected"] for d in st["daemons"]) else None

    wait_for(reconnected, 40, "the daemon to reconnect to engine2", 0.5)
    log("daemon reconnected to engine2")
    wait_ranks_alive(pipe, engine2.addr, job.job, NPROC, timeout=40, job_proc=job.proc)

    check(job.wait() == 0, "job failed after the engine restart")
    rings = job.rings()
    check_hook_accounting(job, rings)

    def all_exited():
        ranks = engine_ranks(pipe, engine2.addr, job.job)
        ok = len(ranks) == NPROC and all(r["liveness"] == "exited" for r in ranks.values())
        return ranks if ok else None

    ranks = wait_for(all_exited, 30, "engine2 to see every rank of %s exit" % job.job, 0.5)

    def accounted():
        now = engine_ranks(pipe, engine2.addr, job.job)
        ok = all(now[k]["records"] + now[k]["dropped"] == rings[k].written for k in rings)
        return now if ok else None

    try:
        ranks = wait_for(accounted, 30, "every record of %s to be accounted" % job.job, 0.5)
    except Exception:
        for rank, ring in sorted(rings.items()):
            r = ranks[rank]
            log("rank %d: hook wrote %d, engine2 holds %d, dropped %d" % (
                rank, ring.written, r["records"], r["dropped"]))
        raise
    total_after = 0
    for rank, ring in sorted(rings.items()):
        r = ranks[rank]
        check(r["pid"] == ring.header["pid"], "rank %d: pid %d vs ring %d" % (
            rank, r["pid"], ring.header["pid"]))
        # Records after the restart arrived, and engine1's count carried over.
        check(r["records"] >= before[rank]["records"], "rank %d: engine2 holds %d < engine1's %d" % (
            rank, r["records"], before[rank]["records"]))
        log("rank %d: hook wrote %d = engine2 %d + dropped %d (engine1 had %d when queried)" % (
            rank, ring.written, r["records"], r["dropped"], before[rank]["records"]))
        total_after += r["records"]

    # Drops, if any, are visible the same way through the CLI and /metrics.
    status = pipe.cli_json(engine2.addr, "status")
    daemons = [d for d in status["daemons"] if d["connected"]]
    check(len(daemons) == 1, "daemons on engine2: %s" % status["daemons"])
    rank_drops = sum(r["dropped"] for r in ranks.values())
    # The daemon's drops are a part of its processes' drops.
    check(daemons[0]["records_dropped"] <= rank_drops, "daemon dropped %d, its ranks %d" % (
        daemons[0]["records_dropped"], rank_drops))
    m = pipe.metrics(engine2)
    dropped_metric = metric_sum(m, "xpu_records_dropped_total", job=job.job)
    check(dropped_metric == rank_drops, "xpu_records_dropped_total %s, ranks say %d" % (
        dropped_metric, rank_drops))
    log("drops: ranks %d, daemon %d, metric %d" % (rank_drops, daemons[0]["records_dropped"],
                                                   dropped_metric))

    # History survives the crash: the job is listed (once) with its ranks.
    jobs = pipe.cli_json(engine2.addr, "jobs", "--all")["jobs"]
    mine = [j for j in jobs if j["job"] == job.job]
    check(len(mine) == 1, "jobs --all lists %s %d times: %s" % (job.job, len(mine), jobs))
    check(mine[0]["ranks"] == NPROC, "jobs --all: %s" % mine[0])
    check(mine[0]["records"] >= total_after, "jobs --all records %d < %d" % (
        mine[0]["records"], total_after))


if __name__ == "__main__":
    run_test("engine-restart", body)
