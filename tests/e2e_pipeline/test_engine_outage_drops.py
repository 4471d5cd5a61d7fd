#!/usr/bin/env python3
"""Fault: the engine is down longer than the daemon can buffer (--buffer-mb 1).

The daemon sheds the oldest records; the job is not disturbed (exit 0); after
the engine comes back (same port, same database) the loss is counted and
visible the same way everywhere: per rank in `xpu ranks` (dropped), per
daemon in `xpu status` (records_dropped) and per job in /metrics
(xpu_records_dropped_total). Every record is accounted: per rank, what the
new engine holds (its count resumed from history) plus the counted drops of
records the hook wrote equal what the hook wrote.

usage: test_engine_outage_drops.py PATHS_JSON
"""
import os
import signal

from pipeline_harness import (RingDump, check, check_hook_accounting, engine_ranks, log, metric_sum,
                              run_test, wait_for, wait_ranks_alive)

NPROC = 8
# A high record rate: every kernel launch is recorded, short steps.
TRAIN = ["--steps", "1500", "--layers", "2", "--hidden", "64", "--tokens", "64", "--kernel-us", "5",
         "--step-sleep-ms", "2"]
BUFFER_MB = 1


def body(pipe):
    db = os.path.join(pipe.dir, "engine.db")
    engine = pipe.start_engine("engine1", db=db)
    daemon = pipe.start_daemon(engine.addr, extra=["--buffer-mb", str(BUFFER_MB)])
    job = pipe.start_job("e2ep-outage-%d" % os.getpid(), NPROC, TRAIN,
                         extra_env={"XPU_KERNEL_SAMPLE_EVERY": "1"})
    wait_ranks_alive(pipe, engine.addr, job.job, NPROC, job_proc=job.proc)
    before = engine_ranks(pipe, engine.addr, job.job)

    def written():
        total = 0
        for name in os.listdir(job.ring_dir):
            d = RingDump(pipe.paths.ring_dump, os.path.join(job.ring_dir, name), records=False)
            total += d.written if d.header["job"] == job.job else 0
        return total

    engine.proc.kill(signal.SIGKILL)
    engine.proc.popen.wait(10)
    at_kill = written()
    log("engine1 killed; hooks had written %d records" % at_kill)
    # Outage until the hooks wrote twice the daemon's budget (32-byte records).
    need = 2 * BUFFER_MB * 1024 * 1024 // 32
    wait_for(lambda: written() - at_kill > need or not job.proc.alive(), 60,
             "%d records written during the outage" % need, 0.3)
    during = written() - at_kill
    log("%d records written while the engine was down (budget ~%d)" % (during, need // 2))
    check(during > need, "the job ended before the outage exceeded the daemon's budget")
    check(daemon.alive(), "daemon died:\n%s" % daemon.log_text())

    engine2 = pipe.start_engine("engine2", port=engine.port, db=db)
    check(job.wait() == 0, "job failed")
    rings = job.rings()
    check_hook_accounting(job, rings)

    def all_exited():
        ranks = engine_ranks(pipe, engine2.addr, job.job)
        ok = len(ranks) == NPROC and all(r["liveness"] == "exited" for r in ranks.values())
        return ranks if ok else None

    ranks = wait_for(all_exited, 40, "engine2 to see every rank of %s exit" % job.job, 0.5)

    def accounted():
        now = engine_ranks(pipe, engine2.addr, job.job)
        ok = all(now[k]["records"] + now[k]["dropped"] - ring.counter("dropped_full") ==
                 ring.written for k, ring in rings.items())
        return now if ok else None

    try:
        ranks = wait_for(accounted, 30, "every record of %s to be accounted" % job.job, 0.5)
    except Exception:
        for rank, ring in sorted(rings.items()):
            r = ranks[rank]
            log("rank %d: hook wrote %d, engine2 %d, dropped %d (hook's ring_full %d)" % (
                rank, ring.written, r["records"], r["dropped"], ring.counter("dropped_full")))
        raise
    for rank, ring in sorted(rings.items()):
        r = ranks[rank]
        log("rank %d: hook wrote %d, engine1 had %d, engine2 holds %d, dropped %d" % (
            rank, ring.written, before[rank]["records"], r["records"], r["dropped"]))
    rank_drops = sum(r["dropped"] for r in ranks.values())
    hook_drops = sum(ring.counter("dropped_full") for ring in rings.values())
    check(rank_drops - hook_drops > 0, "the daemon's buffer overflowed but no rank shows a drop")

    status = pipe.cli_json(engine2.addr, "status")
    daemons = [d for d in status["daemons"] if d["connected"]]
    check(len(daemons) == 1, "daemons: %s" % status["daemons"])
    check(daemons[0]["records_dropped"] == rank_drops - hook_drops,
          "xpu status: daemon dropped %d, its ranks %d" % (daemons[0]["records_dropped"],
                                                         rank_drops - hook_drops))

    def metric_settled():
        v = metric_sum(pipe.metrics(engine2), "xpu_records_dropped_total", job=job.job)
        return v == rank_drops

    wait_for(metric_settled, 15, "xpu_records_dropped_total{job} == %d" % rank_drops)
    text = pipe.cli(engine2.addr, "ranks", "--job", job.job).stdout.decode()
    check(str(ranks[0]["dropped"]) in text, "xpu ranks text lacks the drops:\n%s" % text)
    log("%d records dropped by the daemon, visible in xpu ranks, xpu status and /metrics" %
        (rank_drops - hook_drops))


if __name__ == "__main__":
    run_test("engine-outage", body)
