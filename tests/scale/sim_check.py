#!/usr/bin/env python3
"""Runs xpu-sim and checks its one-line result.

    sim_check.py XPU_SIM [--healthy] -- XPU-SIM ARGUMENTS...

With faults: every injected fault must be diagnosed with the expected kind,
culprit ranks and team within --max-windows (2) of its window, and nothing
else diagnosed that the fault does not explain. --healthy: no diagnosis at
all. Prints the result line and the engine figures; exit 0 when the checks
hold.
"""
import json
import subprocess
import sys


def fail(msg, result=None):
    print("FAIL: " + msg, file=sys.stderr)
    if result is not None:
        print(json.dumps(result, indent=1), file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) < 3 or "--" not in sys.argv:
        print(__doc__, file=sys.stderr)
        return 2
    sep = sys.argv.index("--")
    sim = sys.argv[1]
    healthy = "--healthy" in sys.argv[2:sep]
    args = sys.argv[sep + 1:]
    proc = subprocess.run([sim] + args, stdout=subprocess.PIPE, text=True, timeout=900)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if not lines:
        fail("xpu-sim printed no result line (exit %d)" % proc.returncode)
    r = json.loads(lines[-1])
    print(lines[-1])
    if r.get("records_dropped", 0) != 0:
        fail("records dropped on the way to the engine", r)
    if healthy:
        if r["diagnoses"]:
            fail("diagnoses on a healthy run", r)
    else:
        if not r["faults"]:
            fail("no fault in the result", r)
        for f in r["faults"]:
            if not f["found"] or not f["in_time"]:
                fail("fault %s at %s not diagnosed with the right culprit and team in time"
                     % (f["kind"], f["ranks"]), r)
            if f["windows_to_diagnosis"] > 2:
                fail("fault %s diagnosed after %s windows" % (f["kind"], f["windows_to_diagnosis"]), r)
            match = [d for d in r["diagnoses"]
                     if d["kind"] == f["expected_kind"] and d["team"] == f["expected_team"]
                     and d["ranks"] == f["expected_ranks"]]
            if not match:
                fail("no diagnosis %s %s on ranks %s" % (f["expected_kind"], f["expected_team"],
                                                          f["expected_ranks"]), r)
        if r["unexpected"]:
            fail("unexpected diagnoses: %s" % r["unexpected"], r)
    if proc.returncode != 0:
        fail("xpu-sim exit status %d though the result holds" % proc.returncode, r)
    e = r.get("engine", {})
    print("engine: %s CPU-us per rank per window, %s bytes RSS per rank; %s bytes per rank per step"
          % (e.get("cpu_us_per_rank_window"), e.get("rss_per_rank_bytes"), r["bytes_per_rank_step"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
