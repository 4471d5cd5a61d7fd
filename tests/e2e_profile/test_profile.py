#!/usr/bin/env python3
"""End to end profiling window and differential localization: an 8-rank
xpu-fake-train job under the hook with the GPU-less runtime's libcupti ->
xpu-daemon (CUPTI window in every rank, behaviour patterns) -> xpu-engine
(PerfTracker localization, diagnoses) -> `xpu profile --json`, `xpu diagnose`.

usage: test_profile.py PATHS_JSON SCENARIO

Scenarios:
  slow_kernel   rank SLOW runs the GEMM kernel 3x slower (XPU_FAKE_SLOW_KERNEL);
                `xpu profile --job J --seconds 4` names that kernel on that rank
                (abnormal_function, operations), every rank released CUPTI
                (the fake libcupti's state files: finalized once, no kind
                enabled, no subscriber) and the job keeps training.
  other_client  every rank has another CUPTI client (XPU_FAKE_CUPTI_OTHER_CLIENT):
                the window is skipped everywhere, the result says "skipped:
                another CUPTI client is active", and CUPTI is never finalized.
  auto          the throughput detector fires (its threshold set below zero
                in the engine's detector config) and starts one automatic
                window by itself; the rate limit keeps it at one.
XPU_E2E_PROFILE_DUMP=FILE writes the scenario's profiling result (JSON) there
(slow_kernel, auto);
XPU_E2E_KEEP=1 keeps the processes' logs (tests/e2e_pipeline).
"""
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e_pipeline"))

from pipeline_harness import check, log, run_test, wait_for, wait_ranks_alive  # noqa: E402

NPROC = 8
SLOW = 5
GEMM_KERNEL = "xpu_fake_gemm_kernel"
# Kernels long enough that the fake streams sleep rather than spin (eight
# ranks share two cores in CI): GEMMs at 10 TFLOPS take 0.6-0.9 ms, named
# kernels 200 us, xpu_fake_kernel 500 us, the allreduce ~1.3 ms.
TRAIN = ["--steps", "100000", "--layers", "2", "--hidden", "1024", "--tokens", "1024", "--kernel-us", "500"]
RUNTIME = {"XPU_FAKE_TFLOPS": "10", "XPU_FAKE_KERNEL_NS": "200000", "XPU_FAKE_NET_GBPS": "20"}
SLOW_KERNEL = {"XPU_FAKE_SLOW_RANKS": str(SLOW), "XPU_FAKE_SLOW_KERNEL": GEMM_KERNEL,
               "XPU_FAKE_SLOW_KERNEL_FACTOR": "3", "XPU_FAKE_SLOW_GEMM_FACTOR": "1"}
WINDOW_S = 4


def cupti_state(job, rank):
    """The fake libcupti's state file of a rank ({} when never written)."""
    path = os.path.join(job.dir, "cupti.rank%d" % rank)
    if not os.path.exists(path):
        return {}
    out = {}
    with open(path) as f:
        for line in f:
            k, v = line.split()
            out[k] = int(v)
    return out


def last_steps(job):
    """{rank: last step printed} from the job's log."""
    out = {}
    for m in re.finditer(r"rank (\d+) step (\d+) time_ms", job.proc.log_text()):
        out[int(m.group(1))] = int(m.group(2))
    return out


def dump_report(rep):
    if os.environ.get("XPU_E2E_PROFILE_DUMP"):
        with open(os.environ["XPU_E2E_PROFILE_DUMP"], "w") as f:
            json.dump(rep, f)


def log_findings(rep):
    for f in rep["findings"]:
        log("finding: rank %d %s (%s) beta %.3f (median %.3f) mu %.2f (median %.2f) Delta %.3f D %.3f%s" % (
            f["rank"], f["function"], f["class"], f["beta"], f["beta_median"], f["mu"], f["mu_median"], f["Delta"],
            f["D"], " <- cause" if f["cause"] else ""))


def profile(pipe, engine, job, *extra):
    r = pipe.cli(engine.addr, "profile", "--job", job.job, "--json", *extra)
    return json.loads(r.stdout)


def run_slow_kernel(pipe):
    os.environ["XPU_PROFILE_AUTO"] = "0"
    engine = pipe.start_engine()
    pipe.start_daemon(engine.addr)
    name = "e2epf-slow-%d" % os.getpid()
    env = dict(RUNTIME)
    env.update(SLOW_KERNEL)
    env["XPU_FAKE_CUPTI_STATE"] = os.path.join(pipe.dir, "job-" + name, "cupti")
    job = pipe.start_job(name, NPROC, TRAIN, extra_env=env, timeout=140)
    wait_ranks_alive(pipe, engine.addr, job.job, NPROC, job_proc=job.proc)
    check(not profile(pipe, engine, job, "--last")["found"], "a profiling result before any window")
    before = last_steps(job)
    t0 = time.time()
    rep = profile(pipe, engine, job, "--seconds", str(WINDOW_S))
    dump_report(rep)
    log("profile of %d s took %.1f s: %d/%d ranks profiled, %d findings, %d diagnoses" % (
        WINDOW_S, time.time() - t0, rep["ranks_profiled"], len(rep["ranks"]), len(rep["findings"]),
        len(rep["diagnoses"])))
    sys.stdout.write(pipe.cli(engine.addr, "profile", "--job", job.job, "--last").stdout.decode())
    check(rep["found"] and rep["trigger"] == "on_demand", "no on-demand result: %s" % rep)
    check(rep["window_ms"] == WINDOW_S * 1000, "window %s ms" % rep["window_ms"])
    check(rep["ranks_profiled"] == NPROC, "%d ranks profiled: %s" % (
        rep["ranks_profiled"], [(r["rank"], r["status"], r["reason"]) for r in rep["ranks"]]))
    for r in rep["ranks"]:
        check(r["kernel_records"] > 100, "rank %d: %d kernel records" % (r["rank"], r["kernel_records"]))
        check(r["cupti_finalized"], "rank %d: CUPTI not finalized" % r["rank"])
        check(r["iterations"] >= 3, "rank %d: %d iterations in the window" % (r["rank"], r["iterations"]))
        check(r["functions"] >= 5, "rank %d: %d functions" % (r["rank"], r["functions"]))
    causes = [f for f in rep["findings"] if f["cause"]]
    log_findings(rep)
    check(any(f["function"] == GEMM_KERNEL and f["rank"] == SLOW for f in causes),
          "%s on rank %d not found as a cause" % (GEMM_KERNEL, SLOW))
    check(all(f["rank"] == SLOW for f in causes if f["class"] == "gpu_compute"),
          "a healthy rank blamed for a GPU kernel: %s" % [(f["rank"], f["function"]) for f in causes])
    diag = [d for d in rep["diagnoses"] if d["kind"] == "abnormal_function"
            and d["subject"] == "function:" + GEMM_KERNEL]
    check(len(diag) == 1, "no abnormal_function diagnosis for %s: %s" % (GEMM_KERNEL, rep["diagnoses"]))
    check(diag[0]["ranks"] == [SLOW], "diagnosis ranks %s" % diag[0]["ranks"])
    check(diag[0]["team"] == "operations", "team %s" % diag[0]["team"])
    check(diag[0]["hosts"], "no hosts")
    log("diagnosis: %s" % diag[0]["evidence"])

    # CUPTI released everywhere (the fake libcupti's own accounting).
    for rank in range(NPROC):
        st = cupti_state(job, rank)
        check(st.get("finalize_calls") == 1, "rank %d: finalize calls %s" % (rank, st.get("finalize_calls")))
        check(st.get("kernel_kind_enabled") == 0 and st.get("subscribed") == 0 and
              st.get("runtime_callbacks") == 0 and st.get("buffer_callbacks") == 0,
              "rank %d: CUPTI state after the window %s" % (rank, st))
        check(st.get("records_emitted", 0) > 0, "rank %d: no activity emitted" % rank)
    # Training goes on after the window.
    during = last_steps(job)
    check(all(during.get(r, -1) > before.get(r, -1) for r in range(NPROC)), "a rank stopped during the window")
    wait_for(lambda: all(last_steps(job).get(r, -1) > during.get(r, -1) + 5 for r in range(NPROC)), 30,
             "every rank to train on after the window", 0.5)
    check(job.proc.alive(), "the job ended")
    # The finding reaches the engine's diagnoses (tracker, store, alerts).
    def diagnosed():
        d = pipe.cli_json(engine.addr, "diagnose", "--job", job.job)
        return [x for x in d["diagnoses"] if x["kind"] == "abnormal_function"
                and x["subject"] == "function:" + GEMM_KERNEL] or None
    found = wait_for(diagnosed, 20, "abnormal_function in xpu diagnose", 0.5)
    check(found[0]["ranks"] == [SLOW] and found[0]["team"] == "operations", "xpu diagnose: %s" % found[0])


def run_other_client(pipe):
    os.environ["XPU_PROFILE_AUTO"] = "0"
    engine = pipe.start_engine()
    pipe.start_daemon(engine.addr)
    name = "e2epf-other-%d" % os.getpid()
    env = dict(RUNTIME)
    env["XPU_FAKE_CUPTI_OTHER_CLIENT"] = "1"
    env["XPU_FAKE_CUPTI_STATE"] = os.path.join(pipe.dir, "job-" + name, "cupti")
    job = pipe.start_job(name, NPROC, TRAIN, extra_env=env, timeout=140)
    wait_ranks_alive(pipe, engine.addr, job.job, NPROC, job_proc=job.proc)
    t0 = time.time()
    rep = profile(pipe, engine, job, "--seconds", str(WINDOW_S))
    took = time.time() - t0
    text = pipe.cli(engine.addr, "profile", "--job", job.job, "--last").stdout.decode()
    sys.stdout.write(text)
    check(rep["ranks_profiled"] == 0, "%d ranks profiled despite another CUPTI client" % rep["ranks_profiled"])
    check(rep["ranks_skipped"] == NPROC, "%d ranks skipped" % rep["ranks_skipped"])
    check(rep["skipped_reason"] == "skipped: another CUPTI client is active", "reason %r" % rep["skipped_reason"])
    check(all(r["status"] == "skipped_other_client" for r in rep["ranks"]),
          "statuses %s" % [r["status"] for r in rep["ranks"]])
    check("skipped: another CUPTI client is active" in text, "the text does not say why")
    check(not rep["findings"] and not rep["diagnoses"], "findings without a window")
    # The skip is decided at once, not after the window's length.
    check(took < WINDOW_S + 3, "skipping took %.1f s" % took)
    # Someone else's CUPTI was never finalized (the fake writes its state
    # file on every cuptiFinalize).
    for rank in range(NPROC):
        check(cupti_state(job, rank) == {}, "rank %d: CUPTI finalized: %s" % (rank, cupti_state(job, rank)))
    check(job.proc.alive(), "the job ended")


def run_auto(pipe):
    cfg = os.path.join(pipe.dir, "detectors.conf")
    with open(cfg, "w") as f:
        # Every window counts as degraded: the trigger is under test here,
        # not the throughput detector.
        f.write("throughput.threshold = -0.5\nthroughput.steps = 3\nthroughput.noise_z = 0\n"
                "throughput.persist_windows = 1\n")
    os.environ["XPU_PROFILE_AUTO"] = "1"
    os.environ["XPU_PROFILE_SECONDS"] = "3"
    os.environ["XPU_PROFILE_MIN_INTERVAL_S"] = "3600"
    engine = pipe.start_engine(extra=["--detector-config=%s" % cfg])
    pipe.start_daemon(engine.addr)
    name = "e2epf-auto-%d" % os.getpid()
    env = dict(RUNTIME)
    env.update(SLOW_KERNEL)
    job = pipe.start_job(name, NPROC, TRAIN, extra_env=env, timeout=140)
    wait_ranks_alive(pipe, engine.addr, job.job, NPROC, job_proc=job.proc)

    def automatic():
        r = profile(pipe, engine, job, "--last")
        return r if r["found"] else None
    rep = wait_for(automatic, 60, "an automatic profiling window", 0.5)
    log("automatic window: trigger %s, %d/%d ranks profiled, diagnoses %s" % (
        rep["trigger"], rep["ranks_profiled"], len(rep["ranks"]), [(d["kind"], d["subject"], d["ranks"])
                                                                  for d in rep["diagnoses"]]))
    check(rep["trigger"] == "throughput_regression", "trigger %s" % rep["trigger"])
    check(rep["window_ms"] == 3000, "window %s ms" % rep["window_ms"])
    check(rep["ranks_profiled"] == NPROC, "%d ranks profiled" % rep["ranks_profiled"])
    dump_report(rep)
    log_findings(rep)
    check(any(d["kind"] == "abnormal_function" and d["ranks"] == [SLOW] for d in rep["diagnoses"]),
          "the automatic window did not name rank %d: %s" % (SLOW, rep["diagnoses"]))
    d = pipe.cli_json(engine.addr, "diagnose", "--job", job.job)
    check(any(x["kind"] == "throughput_regression" for x in d["diagnoses"]), "no throughput_regression")
    # The regression keeps being reported; the rate limit keeps it to one window.
    time.sleep(6)
    again = profile(pipe, engine, job, "--last")
    check(again["requested_ns"] == rep["requested_ns"], "a second automatic window within the interval")


SCENARIOS = {"slow_kernel": run_slow_kernel, "other_client": run_other_client, "auto": run_auto}

if __name__ == "__main__":
    scenario = sys.argv[2] if len(sys.argv) > 2 else ""
    if scenario not in SCENARIOS:
        sys.exit("usage: test_profile.py PATHS_JSON {%s}" % ",".join(SCENARIOS))
    run_test("profile-" + scenario, SCENARIOS[scenario])
