#!/usr/bin/env python3
"""Fault: an ingest flood from a client holding a valid ingest credential
(a broken or hostile daemon), while another user's job trains beside it.

The engine runs with small caps (--max-processes-per-stream 128,
--max-ranks-per-job 384). While a real 4-rank job streams through the node
daemon, two xpu-sim clients flood the engine with the messages a daemon
sends: 512 processes on a single stream, and 480 processes of one job on 60
streams. Checked:

- the engine stays responsive to others: `xpu ranks` of the real job
  answers throughout (latency reported), the real job finishes (exit 0) and
  the engine holds exactly what its hooks wrote, nothing dropped;
- the flood is refused and counted by cap: xpu_ingest_rejected_total and
  xpu_ingest_rejected_records_total for `processes_per_stream` and
  `ranks_per_job`; for each flood, records sent == records the engine
  accepted + records it refused; the engine admitted no more processes
  than the caps allow, and its memory stayed small.

usage: test_ingest_flood.py PATHS_JSON
"""
import json
import os
import subprocess
import time

from pipeline_harness import (check, check_engine_matches_rings, check_hook_accounting,
                              engine_ranks, log, metric, run_test, wait_for, wait_ranks_alive)

NPROC = 4
TRAIN = ["--steps", "700", "--layers", "2", "--hidden", "256", "--tokens", "256",
         "--step-sleep-ms", "40"]
PER_STREAM = 128
PER_JOB = 384
RSS_LIMIT_MB = 512


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def start_flood(pipe, engine, token, name, ranks, per_host):
    argv = [pipe.paths.sim, "--engine", engine.addr, "--token-file", token, "--ranks", str(ranks),
            "--ranks-per-host", str(per_host), "--windows", "3", "--window-s", "1",
            "--job", name, "--quiet", "--threads", "1"]
    out = os.path.join(pipe.dir, name + ".json")
    proc = pipe.spawn(name, ["sh", "-c", 'exec "$@" > "$0"', out] + argv)
    return proc, out


def flood_result(proc, out):
    rc = proc.popen.wait(120)
    with open(out) as f:
        text = f.read().strip()
    check(text, "%s wrote no result (exit %d):\n%s" % (out, rc, proc.log_text()))
    return json.loads(text.splitlines()[-1])


def job_records(pipe, engine, job):
    return sum(r["records"] for r in engine_ranks(pipe, engine.addr, job).values())


def body(pipe):
    token = os.path.join(pipe.dir, "ingest.token")
    fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, os.urandom(16).hex().encode() + b"\n")
    os.close(fd)
    engine = pipe.start_engine(extra=["--ingest-token-file", token,
                                      "--max-processes-per-stream", str(PER_STREAM),
                                      "--max-ranks-per-job", str(PER_JOB)])
    pipe.start_daemon(engine.addr)
    job = pipe.start_job("e2ep-victim-%d" % os.getpid(), NPROC, TRAIN)
    wait_ranks_alive(pipe, engine.addr, job.job, NPROC, job_proc=job.proc)
    rss_before = rss_mb(engine.proc.popen.pid)

    floods = {"flood-stream": (512, 512), "flood-job": (480, 8)}
    running = {n: start_flood(pipe, engine, token, n, r, h) for n, (r, h) in floods.items()}
    latencies = []
    while any(p.alive() for p, _ in running.values()):
        t0 = time.monotonic()
        ranks = engine_ranks(pipe, engine.addr, job.job)  # fails on error or after 30 s
        latencies.append(time.monotonic() - t0)
        check(len(ranks) == NPROC, "real job's ranks during the flood: %s" % sorted(ranks))
        time.sleep(0.2)
    rss_peak = rss_mb(engine.proc.popen.pid)
    log("xpu ranks answered %d times during the flood: median %.3f s, max %.3f s" % (
        len(latencies), sorted(latencies)[len(latencies) // 2], max(latencies)))
    results = {n: flood_result(p, out) for n, (p, out) in running.items()}
    log("the real job was %s when the flood ended" % ("still training" if job.proc.alive()
                                                       else "done"))

    m = pipe.metrics(engine)
    for name, reason, cap in (("flood-stream", "processes_per_stream", PER_STREAM),
                              ("flood-job", "ranks_per_job", PER_JOB)):
        sent = results[name]["records_sent"]
        ranks = engine_ranks(pipe, engine.addr, name)
        accepted = sum(r["records"] for r in ranks.values())
        refused = metric(m, "xpu_ingest_rejected_records_total", reason=reason)
        refusals = metric(m, "xpu_ingest_rejected_total", reason=reason)
        if refused is None or refusals is None:
            log("rejections: %s" % {k: v for k, v in m.items() if "rejected" in k[0] and v})
        log("%s: %d processes sent %d records; engine admitted %d processes (%d records), "
            "refused %d records (%s, %d refusals)" % (name, floods[name][0], sent, len(ranks),
                                                       accepted, refused, reason, refusals))
        check(len(ranks) <= cap, "%s: %d processes admitted, cap %d" % (name, len(ranks), cap))
        check(refusals and refusals > 0 and refused and refused > 0,
              "%s: no refusal counted for %s" % (name, reason))
        check(accepted + refused == sent, "%s: sent %d != accepted %d + refused %d" % (
            name, sent, accepted, refused))
    log("engine memory: %.0f MiB before the flood, %.0f MiB after" % (rss_before, rss_peak))
    check(rss_peak < RSS_LIMIT_MB, "engine grew to %.0f MiB under the flood" % rss_peak)

    check(job.wait() == 0, "real job failed")
    rings = job.rings()
    check_hook_accounting(job, rings)
    check_engine_matches_rings(pipe, engine.addr, job, rings)


if __name__ == "__main__":
    run_test("ingest-flood", body)
