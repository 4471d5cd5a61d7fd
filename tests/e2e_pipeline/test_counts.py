#!/usr/bin/env python3
"""End to end: an 8-rank job under the hook -> xpu-daemon -> xpu-engine.

Every rank is registered, and the engine holds exactly the records each hook
wrote (ring files read back with xpu-ring-dump), as seen through
`xpu ranks --json`, `xpu status --json` and /metrics; the hook's records
themselves account for every op the program issued (call counts of the fake
runtime, tied to --print-plan).

usage: test_counts.py PATHS_JSON
"""
import os

from pipeline_harness import (check, check_engine_matches_rings, check_hook_accounting, log, metric,
                              metric_series, metric_sum, run_test, wait_for, wait_ranks_alive)

NPROC = 8
TRAIN = ["--steps", "200", "--layers", "2", "--hidden", "256", "--tokens", "256",
         "--step-sleep-ms", "40"]


def body(pipe):
    engine = pipe.start_engine()
    pipe.start_daemon(engine.addr)
    job = pipe.start_job("e2ep-counts-%d" % os.getpid(), NPROC, TRAIN)

    wait_ranks_alive(pipe, engine.addr, job.job, NPROC, job_proc=job.proc)
    # Gauges are refreshed once a window (--window-s 1).
    wait_for(lambda: metric(pipe.metrics(engine), "xpu_job_ranks", job=job.job, state="alive") == NPROC,
             15, "xpu_job_ranks{state=alive} == %d" % NPROC)
    status = pipe.cli_json(engine.addr, "status")
    running = [j for j in status["jobs"] if j["job"] == job.job]
    check(len(running) == 1 and running[0]["state"] == "running" and running[0]["ranks"] == NPROC,
          "status while running: %s" % status["jobs"])

    # The bus bandwidth of the job's collectives appears while it runs.
    def busbw():
        series = metric_series(pipe.metrics(engine), "xpu_collective_busbw_bytes_per_second",
                               job=job.job)
        return series if any(v > 0 for _, v in series) else None

    try:
        series = wait_for(busbw, 30, "xpu_collective_busbw_bytes_per_second for %s" % job.job, 0.5)
        log("busbw while running: %s" % ", ".join("%s %.3g B/s" % (l.get("op"), v) for l, v in series))
    except Exception:
        check(not job.proc.alive(), "no busbw series while the job runs")
        raise

    check(job.wait() == 0, "job failed")
    rings = job.rings()
    total = check_hook_accounting(job, rings)
    check_engine_matches_rings(pipe, engine.addr, job, rings)

    wait_for(lambda: metric(pipe.metrics(engine), "xpu_job_ranks", job=job.job, state="exited") == NPROC,
             15, "xpu_job_ranks{state=exited} == %d" % NPROC)
    m = pipe.metrics(engine)
    check(metric(m, "xpu_ingest_records_total", job=job.job) == total,
          "xpu_ingest_records_total = %s, hooks wrote %d" % (
              metric(m, "xpu_ingest_records_total", job=job.job), total))
    check(metric(m, "xpu_job_ranks", job=job.job, state="exited") == NPROC,
          "xpu_job_ranks exited = %s" % metric(m, "xpu_job_ranks", job=job.job, state="exited"))
    dropped = metric_sum(m, "xpu_records_dropped_total", job=job.job)
    check(dropped == 0, "xpu_records_dropped_total = %s" % dropped)
    check(metric(m, "xpu_daemons_connected") == 1, "xpu_daemons_connected")

    status = pipe.cli_json(engine.addr, "status")
    check(status["records_total"] == total, "status records_total %d, hooks wrote %d" % (
        status["records_total"], total))
    check(status["rejected_total"] == 0, "rejected %d" % status["rejected_total"])
    check(len(status["daemons"]) == 1, "daemons: %s" % status["daemons"])
    d = status["daemons"][0]
    check(d["connected"] and d["records"] == total and d["records_dropped"] == 0,
          "daemon: %s" % d)
    jobs = pipe.cli_json(engine.addr, "jobs", "--all")["jobs"]
    mine = [j for j in jobs if j["job"] == job.job]
    check(len(mine) == 1 and mine[0]["ranks"] == NPROC and mine[0]["records"] == total,
          "jobs --all: %s" % jobs)
    # The human-readable form names every rank too.
    text = pipe.cli(engine.addr, "ranks", "--job", job.job).stdout.decode()
    check(text.count("\n") >= NPROC, "ranks text:\n%s" % text)


if __name__ == "__main__":
    run_test("counts", body)
