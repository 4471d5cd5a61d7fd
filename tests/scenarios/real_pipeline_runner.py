#!/usr/bin/env python3
"""Scenario runner over the REAL GPU-less pipeline: libxpu_hook.so preloaded
into an N-rank xpu-fake-train job (xpu-fake-launch) -> xpu-daemon ->
xpu-engine, the anomaly injected with the scenario's "fake_train" block
(XPU_FAKE_* environment, xpu-fake-train flags). Passes when `xpu diagnose
--job J --json` lists every expected kind naming exactly the expected ranks
within the time limit. Scenarios without a "fake_train" block cannot be
injected into the fake runtime and are skipped (reported).

usage: real_pipeline_runner.py E2E_PATHS_JSON SCENARIO.json [...]
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e_pipeline"))
from pipeline_harness import Failure, Paths, Pipeline, check, log  # noqa: E402

TRAIN = ["--steps", "100000", "--layers", "2", "--hidden", "1024", "--tokens", "1024",
         "--step-sleep-ms", "2"]
TIME_LIMIT_S = 60


def run_one(paths, path):
    with open(path) as f:
        sc = json.load(f)
    ft = sc.get("fake_train")
    if not ft:
        log("%s: no fake_train block, skipped" % sc["name"])
        return None
    pipe = Pipeline(paths, "scn-" + sc["name"])
    ok = False
    try:
        engine = pipe.start_engine(extra=["--window-s=2"])
        pipe.start_daemon(engine.addr)
        job_id = "scn-%s-%d" % (sc["name"], os.getpid())
        job = pipe.start_job(job_id, sc.get("ranks", 8), TRAIN + ft.get("args", []),
                             extra_env=ft.get("env", {}), timeout=TIME_LIMIT_S + 30)
        deadline = time.monotonic() + TIME_LIMIT_S
        want = {(e["kind"], tuple(sorted(e.get("ranks", [])))) for e in sc["expect"]}
        seen = set()
        while time.monotonic() < deadline:
            time.sleep(2)
            reply = pipe.cli_json(engine.addr, "diagnose", "--job", job_id)
            seen = {(d["kind"], tuple(sorted(d["ranks"]))) for d in reply["diagnoses"]}
            for d in reply["diagnoses"]:
                log("  %s %s: %s" % (d["kind"], d["ranks"], d["evidence"][:300]))
            if want <= seen:
                ok = True
                break
        check(ok, "%s: expected %s, engine reported %s" % (sc["name"], sorted(want), sorted(seen)))
        job.proc.kill()
        return True
    except Failure as e:
        log("FAIL: %s" % e)
        pipe.dump_logs()
        return False
    finally:
        pipe.close()


def main():
    paths = Paths(sys.argv[1])
    results = {p: run_one(paths, p) for p in sys.argv[2:]}
    for p, r in results.items():
        log("%s: %s" % (os.path.basename(p), {None: "skipped", True: "PASS", False: "FAIL"}[r]))
    sys.exit(1 if any(r is False for r in results.values()) else 0)


if __name__ == "__main__":
    main()
