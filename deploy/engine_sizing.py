#!/usr/bin/env python3
"""Engine sizing figures for docs/deploy.md, from the ingest benchmark.

    deploy/engine_sizing.py [--build build] [--ranks 64,256,1024] [--seconds 10]

Runs bench/ingest/ingest_bench (the real engine in a child process fed over
loopback gRPC: one job, 8 daemon streams, the given total ranks, 1 s
analysis windows, records as fast as it takes them) once per rank count,
samples the engine child's resident memory while it runs, and prints per
run: records ingested, engine CPU seconds, records per second per engine
core, peak RSS; then the memory per additional thousand ranks (slope between
the smallest and the largest run) and engine cores per thousand ranks at
typical record rates. The figures depend on the machine: run it on the
engine's hardware.
"""
import argparse
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
STREAMS = 8


def rss_kib(pid, key):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def run_one(bench, ranks, seconds):
    per_stream = max(1, ranks // STREAMS)
    p = subprocess.Popen([bench, "--seconds", str(seconds), "--streams", str(STREAMS), "--ranks", str(per_stream)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = [0]

    def sample():
        engine = None
        while p.poll() is None:
            if engine is None:
                kids = children(p.pid)
                engine = kids[0] if kids else None
            if engine is not None:
                peak[0] = max(peak[0], rss_kib(engine, "VmHWM"), rss_kib(engine, "VmRSS"))
            time.sleep(0.1)
    t = threading.Thread(target=sample)
    t.start()
    out, _ = p.communicate()
    t.join()
    if p.returncode != 0:
        sys.exit("ingest_bench failed:\n" + out)
    ingested = int(re.search(r"engine ingested (\d+) records", out).group(1))
    cpu = float(re.search(r"engine cpu\s+([\d.]+) s", out).group(1))
    wall = float(re.search(r"([\d.]+) s wall", out).group(1))
    return {"ranks": per_stream * STREAMS, "ingested": ingested, "cpu": cpu, "wall": wall,
            "per_core": ingested / cpu if cpu else 0.0, "rss_mib": peak[0] / 1024.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--ranks", default="64,256,1024", help="total ranks per run (8 streams)")
    ap.add_argument("--seconds", type=float, default=10)
    a = ap.parse_args()
    bench = os.path.join(a.build, "bench", "ingest", "ingest_bench")
    if not os.access(bench, os.X_OK):
        sys.exit("%s not built (cmake --build %s --target ingest_bench)" % (bench, a.build))
    print("engine sizing: %s, %d streams, %.0f s per run, %d cpus, load %s" % (
        bench, STREAMS, a.seconds, os.cpu_count(), open("/proc/loadavg").read().split()[0]))
    print("%7s %12s %9s %8s %14s %12s" % ("ranks", "records", "cpu s", "cores", "records/s/core", "peak RSS MiB"))
    runs = []
    for r in [int(x) for x in a.ranks.split(",")]:
        x = run_one(bench, r, a.seconds)
        runs.append(x)
        print("%7d %12d %9.2f %8.2f %14.0f %12.0f" % (x["ranks"], x["ingested"], x["cpu"], x["cpu"] / x["wall"],
                                                       x["per_core"], x["rss_mib"]), flush=True)
    lo, hi = runs[0], runs[-1]
    if hi["ranks"] > lo["ranks"]:
        slope = (hi["rss_mib"] - lo["rss_mib"]) / (hi["ranks"] - lo["ranks"]) * 1000
        print("memory: %.0f MiB per additional 1000 ranks (%d -> %d ranks)" % (slope, lo["ranks"], hi["ranks"]))
    per_core = hi["per_core"]
    print("engine cores per 1000 ranks at the %d-rank rate of %.0f records/s/core:" % (hi["ranks"], per_core))
    for rate in (20, 100, 500):
        print("  %4d records/s per rank: %.2f cores" % (rate, 1000 * rate / per_core if per_core else float("nan")))


if __name__ == "__main__":
    main()
