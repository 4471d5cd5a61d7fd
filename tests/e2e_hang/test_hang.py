#!/usr/bin/env python3
"""End to end hang diagnosis: an 8-rank xpu-fake-train job under the hook ->
xpu-daemon (evidence: /proc, gdb stacks, hook progress table, fake-NCCL ring
counters) -> xpu-engine (suspicion, classification) -> `xpu hang --json`.

usage: test_hang.py PATHS_JSON SCENARIO

Scenarios (the faulty rank is FAULT; every check names what it expects):
  sigstop       FAULT gets SIGSTOP mid-run             non-communication, operations;
                then every rank goes silent (--silent-after-s 6): `xpu diagnose`
                shows the hang, with the silence folded into its evidence,
                and no rank_silent while the hang verdict stands
  sleep         FAULT sleeps forever in native code (--hang-at: pause(); the
                Python variant is not exercised here)  non-communication, algorithm
  spin          FAULT spins in native code (--spin-at) non-communication, algorithm
  exit          FAULT exits (--exit-at), peers hang    crash, operations
  mismatch      FAULT issues an extra allreduce        mismatch, algorithm
  kernel_stall  every rank inside allreduce seq N, the fake ring's link
                FAULT -> FAULT+1 carries nothing       communication, operations,
                                                       culprits FAULT and FAULT+1
  checkpoint    rank 0 saves a checkpoint for CKPT_MS (default 30 s; 60 s in
                production, thresholds scaled: XPU_HANG_FLOOR_S=5 instead of 10)
                while the others wait                 busy-wait on rank 0, no fault;
                                                       the job then runs on
Each prints the time from the stall (as the test saw it) to the diagnosis
being visible in `xpu hang`, and the engine's own stall -> diagnosis figure.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e_pipeline"))

from pipeline_harness import Job, check, log, run_test, wait_for, wait_ranks_alive  # noqa: E402

NPROC = 8
FAULT = 3
FAULT_STEP = 12
# 4 collectives per step with --layers 2 (2 allreduce, allgather,
# reducescatter): the first collective of FAULT_STEP.
STALL_SEQ = 4 * FAULT_STEP + 1
# The production case is a 60 s save with the default 10 s floor; CI runs a
# 30 s save with the floor scaled in proportion (5 s).
CKPT_MS = int(os.environ.get("XPU_E2E_HANG_CKPT_MS", "30000"))
CKPT_FLOOR_S = "%g" % (10.0 * CKPT_MS / 60000.0)
BASE = ["--steps", "100000", "--layers", "2", "--hidden", "256", "--tokens", "256",
        "--step-sleep-ms", "50"]

SCENARIOS = {
    # name: (train args, extra env, expected class, team, culprits)
    "sigstop": ([], {}, "non-communication", "operations", [FAULT]),
    "sleep": (["--hang-at", str(FAULT_STEP), "--fault-rank", str(FAULT)], {}, "non-communication",
              "algorithm", [FAULT]),
    "spin": (["--spin-at", str(FAULT_STEP), "--fault-rank", str(FAULT)], {}, "non-communication",
             "algorithm", [FAULT]),
    "exit": (["--exit-at", str(FAULT_STEP), "--fault-rank", str(FAULT)], {}, "crash", "operations", [FAULT]),
    "mismatch": (["--extra-collective-at", str(FAULT_STEP), "--fault-rank", str(FAULT)], {}, "mismatch",
                 "algorithm", [FAULT]),
    # A located link goes to operations (its NICs, cables or GPUs).
    "kernel_stall": ([], {"XPU_FAKE_NCCL_STALL_SEQ": str(STALL_SEQ), "XPU_FAKE_NCCL_STALL_LINK": str(FAULT)},
                     "communication", "operations", [FAULT, FAULT + 1]),
    "checkpoint": (["--checkpoint-at", str(FAULT_STEP), "--fault-rank", "0", "--checkpoint-ms", str(CKPT_MS)],
                   {"XPU_HANG_FLOOR_S": CKPT_FLOOR_S}, "busy-wait", "", [0]),
}
# The sigstop scenario's engine marks ranks silent after this long (the
# harness's default is 30 s): the hung ranks go silent within the test.
SILENT_AFTER_S = 6
# Lines xpu-fake-train prints when the fault starts.
FAULT_LINE = {
    "sleep": "rank %d hanging at step" % FAULT,
    "spin": "rank %d spinning at step" % FAULT,
    "exit": "rank %d exiting at step" % FAULT,
    "checkpoint": "rank 0 checkpoint at step",
}


def start_job(pipe, name, train_args, env, launcher_args):
    """pipeline_harness.Pipeline.start_job with extra launcher flags."""
    jdir = os.path.join(pipe.dir, "job-" + name)
    ring_dir = os.path.join(jdir, "rings")
    os.makedirs(ring_dir)
    calls = os.path.join(jdir, "calls")
    job_env = pipe.job_env(name, ring_dir, calls, "off", env)
    argv = [pipe.paths.fake_launch, "--nproc", str(NPROC), "--timeout", "115", "--pid-file",
            os.path.join(jdir, "pids")] + launcher_args + [
            "--env", "LD_PRELOAD=" + pipe.paths.hook, "--", pipe.paths.fake_train] + list(train_args)
    proc = pipe.spawn("job-" + name, argv, job_env)
    log("job %s: %d ranks, pid %d: %s %s" % (name, NPROC, proc.popen.pid, " ".join(train_args), env))
    return Job(pipe, name, NPROC, proc, jdir, ring_dir, calls, train_args)


def pids(job):
    path = os.path.join(job.dir, "pids")
    out = {}
    with open(path) as f:
        for line in f:
            r, p = line.split()
            out[int(r)] = int(p)
    return out


def hang_report(pipe, engine, job):
    r = pipe.cli(engine.addr, "hang", "--job", job.job, "--json")
    return json.loads(r.stdout)


def body(pipe, scenario):
    train, env, want_cls, want_team, want_culprits = SCENARIOS[scenario]
    os.environ["XPU_EVIDENCE_FAKE_NCCL"] = "1"   # the daemon reads the fake ring counters
    os.environ["XPU_EVIDENCE_DEBUGGER"] = "gdb"
    # 8 debuggers at once on a loaded 2-core machine (one core taken by the
    # spinning rank) can need more than the default 20 s.
    os.environ["XPU_HANG_EVIDENCE_DEADLINE_MS"] = "40000"
    engine = pipe.start_engine(
        extra=["--silent-after-s=%d" % SILENT_AFTER_S] if scenario == "sigstop" else [])
    pipe.start_daemon(engine.addr)
    # Peers of a crashed rank hang when no agent stops them: --keep-going.
    job = start_job(pipe, "e2eh-%s-%d" % (scenario, os.getpid()), BASE + train, env,
                    ["--keep-going"] if scenario == "exit" else [])
    wait_ranks_alive(pipe, engine.addr, job.job, NPROC, job_proc=job.proc)
    ranks = pids(job)
    stopped = []
    try:
        # Healthy so far: no hang reported.
        check(not hang_report(pipe, engine, job)["found"], "hang reported for a healthy job")
        if scenario == "sigstop":
            time.sleep(1.0)
            os.kill(ranks[FAULT], signal.SIGSTOP)
            stopped.append(ranks[FAULT])
            stall = time.time()
            log("SIGSTOP rank %d (pid %d)" % (FAULT, ranks[FAULT]))
        elif scenario == "kernel_stall":
            # Every rank reaches collective STALL_SEQ and stays inside it.
            def all_in():
                check(job.proc.alive(), "job ended")
                r = pipe_status(pipe, job)
                return r if r and all(a == STALL_SEQ and c == STALL_SEQ - 1 for a, c in r.values()) else None
            wait_for(all_in, 60, "all ranks inside collective %d" % STALL_SEQ, 0.2)
            stall = time.time()
            log("all %d ranks inside allreduce seq %d" % (NPROC, STALL_SEQ))
        elif scenario == "mismatch":
            # The mismatched collective is the first one after the extra allreduce.
            def stuck():
                check(job.proc.alive(), "job ended")
                r = pipe_status(pipe, job)
                return r if r and all(a > c for a, c in r.values()) and \
                    len(set(a for a, c in r.values())) == 1 else None
            st = wait_for(stuck, 60, "ranks stuck in one collective", 0.2)
            stall = time.time()
            log("ranks stuck in collective %s" % sorted(set(a for a, c in st.values())))
        else:
            line = FAULT_LINE[scenario]
            wait_for(lambda: line in job.proc.log_text(), 60, "'%s'" % line, 0.1)
            stall = time.time()
            log("fault started: %s" % line)

        def diagnosed():
            rep = hang_report(pipe, engine, job)
            return rep if rep["found"] else None

        rep = wait_for(diagnosed, 75, "a hang diagnosis of %s" % job.job, 0.25)
        seen = time.time()
        log("first verdict (%s pass): %s, culprits %s, team %r, %d/%d daemons" % (
            rep.get("phase"), rep["classification"], rep["culprit_ranks"], rep["team"], rep["daemons_answered"],
            rep["daemons_asked"]))
        # The checks below read the refined verdict (native stacks from the
        # debugger, the full evidence).

        def refined():
            r = hang_report(pipe, engine, job)
            return r if r["found"] and r.get("refined_ns") else None

        rep = wait_for(refined, 60, "the refined hang diagnosis of %s" % job.job, 0.25)
        log("refined after %.1f s (test clock)" % (time.time() - stall))
        log("diagnosis: %s, culprits %s (%s), team %r; reason: %s" % (
            rep["classification"], rep["culprit_ranks"], ",".join(rep["hosts"]), rep["team"], rep["reason"]))
        for d in rep["details"]:
            log("  detail: %s" % d)
        log("STALL -> SUSPECTED %.1f s, STALL -> DIAGNOSIS %.1f s (test clock); engine: stall -> diagnosis "
            "%.1f s, evidence %d ms, %d/%d daemons" % (
                rep["suspected_ns"] / 1e9 - stall, seen - stall, rep["stall_to_diagnosis_s"], rep["evidence_ms"],
                rep["daemons_answered"], rep["daemons_asked"]))
        # The merged view, culprit subtrees first (the whole tree is long).
        lines = rep["merged_stacks"].splitlines()
        for ln in lines:
            if any("[ranks %s |" % c in ln for c in [rep["culprit_ranks"]]):
                sys.stdout.write("  culprit frame: %s\n" % ln.strip())
        sys.stdout.write("\n".join(lines[:40]) + "\n")
        for r in rep["ranks"]:
            if r["native_error"] or r["python_error"]:
                log("rank %d: native stacks: %s; python stacks: %s" % (r["rank"], r["native_error"] or "ok",
                                                                      r["python_error"] or "ok"))
        check(rep["classification"] == want_cls, "classification %r, want %r" % (rep["classification"], want_cls))
        check(rep["team"] == want_team, "team %r, want %r" % (rep["team"], want_team))
        check(sorted(rep["culprits"]) == sorted(want_culprits),
              "culprits %s, want %s" % (rep["culprits"], want_culprits))
        check(rep["hosts"], "no culprit hosts")
        check(len(rep["ranks"]) == NPROC, "%d ranks in the report" % len(rep["ranks"]))
        check(rep["daemons_answered"] == rep["daemons_asked"] == 1, "daemons %d/%d" % (
            rep["daemons_answered"], rep["daemons_asked"]))
        states = {r["rank"]: r["state"] for r in rep["ranks"]}
        if scenario == "sigstop":
            check(states[FAULT] == "stopped", "rank %d state %r" % (FAULT, states[FAULT]))
            check_silence_folded(pipe, engine, job, stall)
        if scenario == "exit":
            check(states[FAULT] == "gone", "rank %d state %r" % (FAULT, states[FAULT]))
        if scenario == "spin":
            check(re.search(r"fake_spin_forever  \[ranks %d \| not 0-%d,%d-%d\]" % (FAULT, FAULT - 1, FAULT + 1,
                                                                                  NPROC - 1),
                            rep["merged_stacks"]), "merged stacks lack the spinning rank's frame")
            # On demand, without a suspicion: the same view from `xpu stacks`.
            # gdb on 8 ranks beside a spinning one is slow on a loaded 2-core
            # machine: allow the collection its full deadline.
            r = subprocess.run([pipe.paths.cli, "--engine", engine.addr, "stacks", "--job", job.job, "--json",
                                "--deadline-s", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            check(r.returncode == 0, "xpu stacks exited %d: %s" % (r.returncode, r.stderr[:300]))
            st = json.loads(r.stdout)
            log("xpu stacks: %d ranks, evidence %d ms" % (len(st["ranks"]), st["evidence_ms"]))
            check(st["found"] and st["on_demand"], "xpu stacks: %s" % r.stdout[:200])
            check("fake_spin_forever" in st["merged_stacks"], "xpu stacks lacks fake_spin_forever")
        if scenario == "sleep":
            check(re.search(r"pause  \[ranks %d \| not" % FAULT, rep["merged_stacks"]) or
                  re.search(r"clock_nanosleep  \[ranks %d \| not" % FAULT, rep["merged_stacks"]) or
                  re.search(r"\[ranks %d \| not 0-%d,%d-%d\]" % (FAULT, FAULT - 1, FAULT + 1, NPROC - 1),
                            rep["merged_stacks"]),
                  "merged stacks do not single out rank %d" % FAULT)
        if scenario == "kernel_stall":
            check(rep["faulty_link"] == "%d->%d" % (FAULT, FAULT + 1), "faulty link %r" % rep["faulty_link"])
        if scenario == "checkpoint":
            # Not a fault: after the save the job goes on, and no hang other than
            # the busy-wait was reported.
            def progressed():
                return len(re.findall(r"rank 0 step %d " % (FAULT_STEP + 3), job.proc.log_text())) > 0
            wait_for(progressed, CKPT_MS / 1000.0 + 30, "rank 0 to run on after the checkpoint", 0.5)
            diags = pipe.cli_json(engine.addr, "diagnose", "--job", job.job, "--all")
            kinds = sorted(set(d["kind"] for d in diags.get("diagnoses", []) if d["kind"].startswith("hang")))
            log("hang diagnoses stored: %s" % kinds)
            for d in diags.get("diagnoses", []):
                if d["kind"].startswith("hang") and d["kind"] != "hang_busy_wait":
                    log("  %s: %s" % (d["kind"], json.dumps(d)[:2000]))
            check(all(k == "hang_busy_wait" for k in kinds), "a fault was reported: %s" % kinds)
            check(job.proc.alive(), "job ended")
    finally:
        for p in stopped:
            try:
                os.kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass


def check_silence_folded(pipe, engine, job, stall):
    """The hung ranks write no records and go silent: the liveness detector's
    rank_silent is part of the hang (engine/hang/fold_silence.h). Waits until
    the stored hang diagnosis carries the silence, then checks that
    `xpu diagnose` shows the hang and no separate rank_silent."""
    def folded():
        diags = pipe.cli_json(engine.addr, "diagnose", "--job", job.job, "--all")["diagnoses"]
        hang = [d for d in diags if d["kind"] == "hang_non_communication"]
        return diags if hang and "silent (same hang, not reported apart)" in hang[0]["evidence"] else None
    diags = wait_for(folded, SILENT_AFTER_S + 30, "the ranks' silence folded into the hang diagnosis", 0.5)
    log("silence folded into the hang %.1f s after the stall" % (time.time() - stall))
    hang = [d for d in diags if d["kind"] == "hang_non_communication"][0]
    log("hang evidence, silence lines: %s" % [l for l in hang["evidence"].splitlines() if "silent" in l][:3])
    check(hang["active"], "the hang diagnosis is not active: %s" % hang)
    check(hang["ranks"] == [FAULT], "hang ranks %s, want [%d]" % (hang["ranks"], FAULT))
    # Two more windows (1 s each) with the ranks silent and the hang standing.
    time.sleep(2.5)
    active = pipe.cli_json(engine.addr, "diagnose", "--job", job.job)["diagnoses"]
    kinds = sorted(set(d["kind"] for d in active))
    log("active diagnoses while the hang stands: %s" % kinds)
    check("hang_non_communication" in kinds, "the hang is not shown: %s" % kinds)
    everything = pipe.cli_json(engine.addr, "diagnose", "--job", job.job, "--all")["diagnoses"]
    silent = [d for d in everything if d["kind"] == "rank_silent"]
    check(not silent, "rank_silent reported apart from the hang: %s" % [(d["subject"], d["ranks"]) for d in silent])


def pipe_status(pipe, job):
    """{comm rank: (coll_arrived, coll_completed)} from xpu-fake-nccl-status."""
    tool = os.path.join(os.path.dirname(pipe.paths.fake_train), "xpu-fake-nccl-status")
    idfile = None
    # The launcher's id file: read from the rank's environment.
    ranks = pids(job)
    try:
        with open("/proc/%d/environ" % ranks[0], "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        idfile = env.get(b"XPU_FAKE_NCCL_ID_FILE", b"").decode()
    except OSError:
        return None
    if not idfile:
        return None
    r = subprocess.run([tool, "--id-file", idfile], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10,
                       env=dict(os.environ, LD_LIBRARY_PATH=pipe.paths.fake_lib_dir))
    out = {}
    for line in r.stdout.decode().splitlines():
        m = re.match(r"rank (\d+) .* coll_arrived (\d+) coll_completed (\d+)", line)
        if m:
            out[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    return out if len(out) == NPROC else None


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in SCENARIOS:
        sys.stderr.write("usage: test_hang.py PATHS_JSON {%s}\n" % "|".join(SCENARIOS))
        sys.exit(64)
    scen = sys.argv[2]
    run_test("hang-" + scen, lambda pipe: body(pipe, scen))
