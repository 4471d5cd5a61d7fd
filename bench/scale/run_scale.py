#!/usr/bin/env python3
"""The engine at scale: runs xpu-sim at the given rank counts (a healthy run
and one run per fault) through a private xpu-engine, and writes the table of
docs/scale.md: engine CPU per rank per window, cores needed for real time,
engine memory per rank, bytes per rank per step on the wire, time to each
diagnosis and whether it was right, and how long `xpu status` and
`xpu diagnose` took against the engine holding the job.

    run_scale.py --sim build/tools/sim/xpu-sim --ranks 1000,10000 [--out DIR]
                 [--faults healthy,slow_gpu,python] [--window-s 10] [--windows 5]
                 [--engine-cpus 0-3] [--docs docs/scale.md --section NAME]

Each run's JSON line goes to DIR/scale.jsonl and the table to DIR/scale.md;
--docs replaces the table between that file's markers
<!-- scale-table:SECTION:begin --> and <!-- scale-table:SECTION:end -->. Exit status 0
when every run was right (faults found with the right culprit and team
within 2 windows, healthy runs silent).
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time

# Culprit ranks per fault kind, as a fraction of the job (so that they exist
# at every size and are not rank 0).
FAULT_AT = {"slow_gpu": 0.37, "python": 0.61, "slow_link": 0.23, "gc": 0.45,
            "dataloader": 0.52, "sync": 0.29, "stop": 0.71, "hang": 0.83, "mismatch": 0.67}


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return "%s, %d CPUs, %.0f GiB (%s)" % (model or platform.machine(), os.cpu_count(), mem_gb,
                                           platform.node())


def run_one(a, ranks, fault, out_dir):
    args = [a.sim, "--ranks", str(ranks), "--windows", str(a.windows),
            "--window-s", str(a.window_s), "--quiet"]
    if a.layout:
        args += ["--layout", a.layout]
    if a.engine_cpus:
        args += ["--engine-cpus", a.engine_cpus]
    if fault != "healthy":
        args += ["--fault", "%s:%d" % (fault, int(ranks * FAULT_AT[fault]))]
    args += a.sim_arg
    print("run_scale: %s" % " ".join(args), file=sys.stderr, flush=True)
    t0 = time.time()
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=a.windows * a.window_s * 4 + 600)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if not lines:
        sys.stderr.write(p.stderr[-3000:])
        return {"ranks": ranks, "run": fault, "error": "no result (exit %d)" % p.returncode,
                "command": " ".join(args)}
    r = json.loads(lines[-1])
    r["run"] = fault
    r["exit"] = p.returncode
    r["wall_s"] = round(time.time() - t0, 1)
    r["command"] = " ".join(["xpu-sim"] + args[1:])
    with open(os.path.join(out_dir, "scale.jsonl"), "a") as f:
        f.write(json.dumps(r) + "\n")
    return r


def right(r):
    if "error" in r:
        return False
    if r["run"] == "healthy":
        return not r["diagnoses"] and r["exit"] == 0
    return r["exit"] == 0 and all(f["found"] and f["in_time"] for f in r["faults"])


def row(r):
    if "error" in r:
        return "| %d | %s | %s |" % (r["ranks"], r["run"], r["error"]) + " |" * 9
    e = r.get("engine", {})
    q = r.get("queries", {}) if isinstance(r.get("queries"), dict) else {}
    if r["run"] == "healthy":
        diag = "none" if not r["diagnoses"] else ", ".join(d["kind"] for d in r["diagnoses"])
    else:
        diag = ", ".join(
            "%s %s %s: %s" % (f["expected_kind"], f["expected_ranks"], f["expected_team"],
                              "%s s (%s w)" % (f["seconds_to_diagnosis"], f["windows_to_diagnosis"])
                              if f["found"] else "not found")
            for f in r["faults"])
        others = [d["kind"] + " " + d["ranks"] for d in r["diagnoses"]
                  if d["kind"] not in [f["expected_kind"] for f in r["faults"]]]
        if others:
            diag += "; also " + ", ".join(others)
    return "| %d | %s | %s | %s | %s | %.1f | %s | %s | %s | %s | %s / %s |" % (
        r["ranks"], r["run"], r["hosts"], e.get("cpu_us_per_rank_window", "-"),
        e.get("cores_for_real_time", "-"), e.get("rss_per_rank_bytes", 0) / 1024.0,
        r["bytes_per_rank_step"], r["late_windows"], diag, "yes" if right(r) else "**no**",
        q.get("status_s", "-"), q.get("diagnose_s", "-"))


HEADER = ("| ranks | run | hosts | engine CPU µs per rank per window | engine cores for real time "
          "| engine RSS per rank (KiB) | wire bytes per rank per step | late windows "
          "| diagnosis: time after the fault (windows) | right | `xpu status` / `xpu diagnose` s |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")


def write_docs(path, section, table):
    begin, end = "<!-- scale-table:%s:begin -->" % section, "<!-- scale-table:%s:end -->" % section
    with open(path) as f:
        text = f.read()
    if begin not in text or end not in text:
        sys.exit("run_scale: %s has no %s ... %s markers" % (path, begin, end))
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + table + "\n" + end + tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", required=True, help="the xpu-sim binary")
    ap.add_argument("--ranks", default="1000,10000", help="rank counts, comma-separated")
    ap.add_argument("--faults", default="healthy,slow_gpu,python",
                    help="runs per size: healthy and fault kinds (%s)" % ",".join(FAULT_AT))
    ap.add_argument("--layout", default="", help="xpu-sim --layout (default dp)")
    ap.add_argument("--window-s", type=float, default=10)
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--engine-cpus", default="", help="pin the engine, e.g. 0-3")
    ap.add_argument("--sim-arg", action="append", default=[],
                    help="one more xpu-sim argument (repeatable), e.g. --sim-arg=--keep-engine-dir")
    ap.add_argument("--out", default=os.environ.get("OUT", "scale-out"), help="output folder")
    ap.add_argument("--docs", default="", help="replace the table in this markdown file")
    ap.add_argument("--section", default="main",
                    help="which table of --docs: the one between <!-- scale-table:SECTION:begin/end -->")
    ap.add_argument("--from-jsonl", default="",
                    help="make the table from the runs of an earlier scale.jsonl, run nothing")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = []
    if a.from_jsonl:
        with open(a.from_jsonl) as f:
            results = [json.loads(l) for l in f if l.startswith("{")]
        a.ranks = ""
    for n in [int(x) for x in a.ranks.split(",") if x]:
        for fault in [x for x in a.faults.split(",") if x]:
            if fault != "healthy" and fault not in FAULT_AT:
                sys.exit("run_scale: unknown fault %s" % fault)
            r = run_one(a, n, fault, a.out)
            results.append(r)
            print(row(r), file=sys.stderr, flush=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = "bench/scale/run_scale.py " + " ".join(
        x for x in sys.argv[1:] if x not in ("--docs", a.docs, "--section", a.section))
    made = "made by `%s`" % cmd
    if a.from_jsonl:
        made = "runs: %s" % "; ".join("`%s`" % r.get("command", "?") for r in results)
        stamp = "table of earlier runs"
    table = "%s\n%s\n\nMachine: %s; %s; %s.\n" % (
        HEADER, "\n".join(row(r) for r in results), machine(), stamp, made)
    with open(os.path.join(a.out, "scale.md"), "w") as f:
        f.write(table)
    print(table)
    if a.docs:
        write_docs(a.docs, a.section, table)
    return 0 if all(right(r) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
