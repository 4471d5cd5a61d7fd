#!/usr/bin/env python3
"""Two 4-rank jobs on one node, through one daemon, into one engine: they stay
separate. One job is named by XPU_JOB, the other by TORCHELASTIC_RUN_ID (what
torchrun sets); each job lists exactly its own ranks (pids of its own rings),
and each holds exactly the records its hooks wrote, also per job in /metrics.

usage: test_two_jobs.py PATHS_JSON
"""
import os

from pipeline_harness import (check, check_engine_matches_rings, check_hook_accounting, log, metric,
                              run_test, wait_for, wait_ranks_alive)

NPROC = 4
TRAIN_A = ["--steps", "250", "--layers", "2", "--hidden", "256", "--tokens", "256",
           "--step-sleep-ms", "30"]
TRAIN_B = ["--steps", "200", "--layers", "3", "--hidden", "128", "--tokens", "128",
           "--step-sleep-ms", "30", "--use-lt"]


def body(pipe):
    engine = pipe.start_engine()
    pipe.start_daemon(engine.addr)
    a = pipe.start_job("e2ep-two-a-%d" % os.getpid(), NPROC, TRAIN_A)
    b = pipe.start_job("e2ep-two-b-%d" % os.getpid(), NPROC, TRAIN_B, job_var="TORCHELASTIC_RUN_ID")

    wait_ranks_alive(pipe, engine.addr, a.job, NPROC, job_proc=a.proc)
    wait_ranks_alive(pipe, engine.addr, b.job, NPROC, job_proc=b.proc)
    status = pipe.cli_json(engine.addr, "status")
    running = sorted(j["job"] for j in status["jobs"])
    check(a.job in running and b.job in running, "status jobs: %s" % running)

    check(a.wait() == 0, "job A failed")
    check(b.wait() == 0, "job B failed")
    rings_a, rings_b = a.rings(), b.rings()
    total_a = check_hook_accounting(a, rings_a)
    total_b = check_hook_accounting(b, rings_b)
    pids_a = {r.header["pid"] for r in rings_a.values()}
    pids_b = {r.header["pid"] for r in rings_b.values()}
    check(len(pids_a) == NPROC and len(pids_b) == NPROC and not pids_a & pids_b,
          "ring pids A %s B %s" % (pids_a, pids_b))
    # Exact counts per rank also prove that no rank of one job landed in the other.
    ranks_a = check_engine_matches_rings(pipe, engine.addr, a, rings_a)
    ranks_b = check_engine_matches_rings(pipe, engine.addr, b, rings_b)
    check({r["pid"] for r in ranks_a.values()} == pids_a, "job A lists pids of another job")
    check({r["pid"] for r in ranks_b.values()} == pids_b, "job B lists pids of another job")

    jobs = {j["job"]: j for j in pipe.cli_json(engine.addr, "jobs", "--all")["jobs"]}
    for job, total in ((a.job, total_a), (b.job, total_b)):
        check(job in jobs, "jobs --all lacks %s: %s" % (job, sorted(jobs)))
        check(jobs[job]["ranks"] == NPROC and jobs[job]["records"] == total,
              "jobs --all %s: %s, want %d ranks %d records" % (job, jobs[job], NPROC, total))
    check(len(jobs) == 2, "jobs --all lists other jobs: %s" % sorted(jobs))

    def per_job_metrics():
        m = pipe.metrics(engine)
        return all(metric(m, "xpu_job_ranks", job=j.job, state="exited") == NPROC for j in (a, b)) and m

    m = wait_for(per_job_metrics, 15, "xpu_job_ranks{state=exited} of both jobs")
    for job, total in ((a.job, total_a), (b.job, total_b)):
        got = metric(m, "xpu_ingest_records_total", job=job)
        check(got == total, "xpu_ingest_records_total{job=%s} = %s, want %d" % (job, got, total))
    log("jobs %s (%d records) and %s (%d records) kept apart" % (a.job, total_a, b.job, total_b))


if __name__ == "__main__":
    run_test("two-jobs", body)
