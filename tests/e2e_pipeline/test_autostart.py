#!/usr/bin/env python3
"""Auto-start: no daemon runs; the 8 ranks of a job elect one (flock on
<socket dir>/daemon.lock) that spawns XPU_DAEMON_BIN with --engine $XPU_ENGINE.
Exactly one daemon process starts (one live process serving the socket, one
start in its log, no failed start) and every rank registers with the engine
through it, with exactly the records the hooks wrote.

usage: test_autostart.py PATHS_JSON
"""
import os
import time

from pipeline_harness import (check, check_engine_matches_rings, check_hook_accounting, log, run_test,
                              wait_for, wait_ranks_alive)

NPROC = 8
TRAIN = ["--steps", "250", "--layers", "2", "--hidden", "256", "--tokens", "256",
         "--step-sleep-ms", "30"]


def body(pipe):
    engine = pipe.start_engine()
    check(not os.path.exists(pipe.socket), "a daemon socket exists before the test")
    check(pipe.autostarted_daemons() == [], "a daemon already serves %s" % pipe.socket)
    job = pipe.start_job("e2ep-autostart-%d" % os.getpid(), NPROC, TRAIN, daemon="on",
                         extra_env={"XPU_DAEMON_BIN": pipe.paths.daemon, "XPU_ENGINE": engine.addr})

    pids = wait_for(pipe.autostarted_daemons, 30, "an auto-started daemon on %s" % pipe.socket, 0.2)
    log("auto-started daemon pid(s) %s" % pids)
    wait_ranks_alive(pipe, engine.addr, job.job, NPROC, job_proc=job.proc)
    # Late losers of the election would show up now.
    time.sleep(1.0)
    pids = pipe.autostarted_daemons()
    check(len(pids) == 1, "%d daemons serve %s: %s" % (len(pids), pipe.socket, pids))
    with open("/proc/%d/cmdline" % pids[0], "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    check("--engine" in argv and argv[argv.index("--engine") + 1] == engine.addr,
          "auto-started daemon argv %s lacks --engine %s" % (argv, engine.addr))

    check(job.wait() == 0, "job failed")
    rings = job.rings()
    check_hook_accounting(job, rings)
    check_engine_matches_rings(pipe, engine.addr, job, rings)

    check(pipe.autostarted_daemons() == pids, "daemon set changed: %s" % pipe.autostarted_daemons())
    with open(os.path.join(os.path.dirname(pipe.socket), "daemon.log"), errors="replace") as f:
        dlog = f.read()
    starts = dlog.count("xpu-daemon ready")
    failures = dlog.count("cannot start")
    check(starts == 1 and failures == 0, "daemon.log: %d starts, %d failed starts" % (starts, failures))
    status = pipe.cli_json(engine.addr, "status")
    check(len(status["daemons"]) == 1 and status["daemons"][0]["connected"],
          "engine daemons: %s" % status["daemons"])
    log("one daemon (pid %d) was started for %d ranks" % (pids[0], NPROC))


if __name__ == "__main__":
    run_test("autostart", body)
