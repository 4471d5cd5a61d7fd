#!/usr/bin/env python3
"""End to end: hangs where no rank waits in a collective, on the GPU-less
runtime under the hook, with xpu-daemon and xpu-engine at their defaults
(no hook floor or evidence deadline changed). The engine must notice from
the job's own progress against its own step period and name state, culprits
and team, within the time budget of a collective hang.

usage: test_hang_outside.py PATHS_JSON SCENARIO

Scenarios:
  single_rank   (a) a one-rank xpu-fake-train job gets SIGSTOP mid-run:
                    non-communication, operations, state "stopped";
                (b) a one-rank Python job (py_model.py) gets stuck in Python
                    in load_next_batch(): non-communication, algorithm, the
                    frame named in the report.
  all_ranks     every rank of a 3-rank Python job gets stuck in Python at
                the same step (no rank inside a collective): every rank a
                culprit, algorithm, the frame named.
Each asserts the time from the stall to the report visible in `xpu hang`
(REPORT_BUDGET_S, default 20 s: the 15 s goal plus slack for a loaded
2-core machine) and prints it with the engine's own figures.
"""
import json
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e_pipeline"))

from pipeline_harness import Job, check, log, run_test, wait_for, wait_ranks_alive  # noqa: E402

BUDGET_S = float(os.environ.get("XPU_E2E_HANG_REPORT_BUDGET_S", "20"))
STUCK_STEP = 40


def hang_report(pipe, engine, job):
    r = pipe.cli(engine.addr, "hang", "--job", job, "--json")
    return json.loads(r.stdout)


def launch(pipe, name, nproc, argv, extra_env=None):
    jdir = os.path.join(pipe.dir, "job-" + name)
    ring_dir = os.path.join(jdir, "rings")
    os.makedirs(ring_dir)
    calls = os.path.join(jdir, "calls")
    env = pipe.job_env(name, ring_dir, calls, "off", extra_env)
    full = [pipe.paths.fake_launch, "--nproc", str(nproc), "--timeout", "110", "--pid-file",
            os.path.join(jdir, "pids"), "--env", "LD_PRELOAD=" + pipe.paths.hook, "--"] + argv
    proc = pipe.spawn("job-" + name, full, env)
    log("job %s: %d ranks, pid %d: %s" % (name, nproc, proc.popen.pid, " ".join(argv)))
    return Job(pipe, name, nproc, proc, jdir, ring_dir, calls, argv)


def pids(job):
    out = {}
    with open(os.path.join(job.dir, "pids")) as f:
        for line in f:
            r, p = line.split()
            out[int(r)] = int(p)
    return out


def await_report(pipe, engine, job, stall, what):
    def diagnosed():
        check(job.proc.alive(), "job ended")
        rep = hang_report(pipe, engine, job.job)
        return rep if rep["found"] else None

    rep = wait_for(diagnosed, 60, "a hang diagnosis of %s" % job.job, 0.25)
    seen = time.time() - stall
    log("%s: %s, culprits %s, team %r; reason: %s" % (what, rep["classification"], rep["culprit_ranks"],
                                                      rep["team"], rep["reason"]))
    for d in rep["details"]:
        log("  detail: %s" % d)
    log("%s: STALL -> SUSPECTED %.1f s, STALL -> REPORT %.1f s (test clock); engine: stall -> diagnosis "
        "%.1f s, evidence %d ms" % (what, rep["suspected_ns"] / 1e9 - stall, seen, rep["stall_to_diagnosis_s"],
                                    rep["evidence_ms"]))
    check(seen <= BUDGET_S, "%s: report after %.1f s, budget %.0f s" % (what, seen, BUDGET_S))
    return rep


def check_python(rep, nproc, want_culprits):
    check(rep["classification"] == "non-communication", "classification %r" % rep["classification"])
    check(rep["team"] == "algorithm", "team %r, want algorithm" % rep["team"])
    check(sorted(rep["culprits"]) == want_culprits, "culprits %s, want %s" % (rep["culprits"], want_culprits))
    check(len(rep["ranks"]) == nproc, "%d ranks in the report" % len(rep["ranks"]))
    text = rep["reason"] + "\n" + "\n".join(rep["details"]) + "\n" + rep["merged_stacks"]
    check("load_next_batch" in text, "the report does not name the Python frame load_next_batch")


def py_argv(pipe):
    return [sys.executable, os.path.join(HERE, "py_model.py"), "--stuck-at", str(STUCK_STEP)]


def py_env(pipe):
    return {"FAKE_LIB_DIR": pipe.paths.fake_lib_dir, "PYTHONDONTWRITEBYTECODE": "1",
            "XPU_PYSTACK_DIR": os.path.join(pipe.dir, "pystacks")}


def body(pipe, scenario):
    os.environ["XPU_EVIDENCE_FAKE_NCCL"] = "1"
    os.environ["XPU_EVIDENCE_DEBUGGER"] = "gdb"
    os.environ["XPU_PYSTACK_DIR"] = os.path.join(pipe.dir, "pystacks")  # the daemon's
    engine = pipe.start_engine()
    pipe.start_daemon(engine.addr)
    tag = "%s-%d" % (scenario, os.getpid())
    if scenario == "single_rank":
        # (a) stopped
        job = launch(pipe, "e2eo-stop-" + tag, 1, [pipe.paths.fake_train, "--steps", "100000", "--layers", "2",
                                                  "--hidden", "256", "--tokens", "256", "--step-sleep-ms", "50"])
        wait_ranks_alive(pipe, engine.addr, job.job, 1, job_proc=job.proc)
        time.sleep(3.0)
        check(not hang_report(pipe, engine, job.job)["found"], "hang reported for a healthy job")
        pid = pids(job)[0]
        os.kill(pid, signal.SIGSTOP)
        stall = time.time()
        log("SIGSTOP the only rank (pid %d)" % pid)
        try:
            rep = await_report(pipe, engine, job, stall, "one rank stopped")
        finally:
            os.kill(pid, signal.SIGCONT)
        check(rep["classification"] == "non-communication", "classification %r" % rep["classification"])
        check(rep["team"] == "operations", "team %r, want operations" % rep["team"])
        check(rep["culprits"] == [0], "culprits %s" % rep["culprits"])
        check(rep["ranks"][0]["state"] == "stopped", "state %r" % rep["ranks"][0]["state"])
        job.proc.kill()
        # (b) stuck in Python
        job = launch(pipe, "e2eo-py-" + tag, 1, py_argv(pipe), py_env(pipe))
        nproc, want = 1, [0]
    else:
        nproc = 3
        job = launch(pipe, "e2eo-all-" + tag, nproc, py_argv(pipe), py_env(pipe))
        want = list(range(nproc))
    wait_ranks_alive(pipe, engine.addr, job.job, nproc, job_proc=job.proc)
    line = "stuck in python at step %d" % STUCK_STEP
    wait_for(lambda: job.proc.log_text().count(line) == nproc, 60, "'%s' x%d" % (line, nproc), 0.05)
    stall = time.time()
    log("every one of %d rank(s) stuck in Python" % nproc)
    rep = await_report(pipe, engine, job, stall, "%d rank(s) stuck in Python" % nproc)
    check_python(rep, nproc, want)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("single_rank", "all_ranks"):
        sys.stderr.write("usage: test_hang_outside.py PATHS_JSON {single_rank|all_ranks}\n")
        sys.exit(64)
    scen = sys.argv[2]
    run_test("hang-outside-" + scen, lambda pipe: body(pipe, scen))
