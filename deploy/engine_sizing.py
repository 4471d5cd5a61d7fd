#!/usr/bin/env python3
"""Engine sizing figures for docs/deploy.md, from the ingest benchmark.

    deploy/engine_sizing.py [--build build] [--ranks 64,256,1024] [--seconds 10]
    deploy/engine_sizing.py --plan RANKS [--largest-job RANKS] [--spare 1]
                            [--cores-per-replica 2] [--memory-per-replica-gib 4]

--plan runs nothing: it reads the per-rank engine cost measured by the rank
simulator (the tables of docs/scale.md: engine cores for real time and RSS
per rank, the largest of every run) and prints how many engine replicas
(docs/deploy.md, "Engine replicas sharing PostgreSQL") serve RANKS ranks in
all with --spare replicas lost, each replica of the given size used up to
--utilization of its cores; and whether the largest job fits one replica
(a job is served by one replica at a time); exit status 1 when it does not.

Without --plan:

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


def scale_costs(path):
    """[(ranks, run, cores for real time, RSS KiB per rank)] from the tables of docs/scale.md."""
    rows = []
    header = None
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ranks |"):
            header = cells
            continue
        if header is None or not line.startswith("|") or line.startswith("|---"):
            if not line.startswith("|"):
                header = None
            continue
        row = dict(zip(header, cells))
        try:
            rows.append((int(row["ranks"]), row["run"], float(row["engine cores for real time"]),
                         float(row["engine RSS per rank (KiB)"])))
        except (KeyError, ValueError):
            continue
    return rows


def plan(a):
    """Replicas for a.plan ranks from the per-rank costs of docs/scale.md."""
    rows = scale_costs(a.scale_doc)
    if not rows:
        sys.exit("engine_sizing: no cost table in %s" % a.scale_doc)
    cpu = max(rows, key=lambda r: r[2] / r[0])
    mem = max(rows, key=lambda r: r[3])
    core_per_rank, kib_per_rank = cpu[2] / cpu[0], mem[3]
    print("per-rank engine cost, the largest of %d runs in %s:" % (len(rows), os.path.relpath(a.scale_doc, REPO)))
    print("  CPU    %.1f µs of engine CPU per rank per second (%d ranks, %s: %.3f cores)" % (
        core_per_rank * 1e6, cpu[0], cpu[1], cpu[2]))
    print("  memory %.0f KiB per rank (%d ranks, %s), plus %.0f MiB per replica" % (
        kib_per_rank, mem[0], mem[1], a.base_mib))
    cores_cap = a.cores_per_replica * a.utilization
    mem_cap_mib = a.memory_per_replica_gib * 1024 - a.base_mib
    if mem_cap_mib <= 0:
        sys.exit("engine_sizing: --memory-per-replica-gib %.1f leaves nothing beyond the %.0f MiB base" % (
            a.memory_per_replica_gib, a.base_mib))
    per_replica = int(min(cores_cap / core_per_rank, mem_cap_mib * 1024 / kib_per_rank))
    need = -(-a.plan // per_replica) if per_replica > 0 else float("inf")
    total = need + a.spare
    print("one replica of %.1f cores (used to %.0f %%) and %.1f GiB serves about %d ranks" % (
        a.cores_per_replica, a.utilization * 100, a.memory_per_replica_gib, per_replica))
    print("%d ranks: %d replica(s) carry them, %d with %d lost: run %d" % (a.plan, need, total, a.spare, total))
    largest = a.largest_job or a.plan
    job_cores = largest * core_per_rank / a.utilization
    job_gib = (largest * kib_per_rank / 1024 + a.base_mib) / 1024
    fits = largest <= per_replica
    print("largest job, %d ranks: one replica needs %.1f cores and %.1f GiB%s" % (
        largest, job_cores, job_gib, "" if fits else
        " — more than one replica of this size: give each replica at least that much"))
    return 0 if fits else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--ranks", default="64,256,1024", help="total ranks per run (8 streams)")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--plan", type=int, metavar="RANKS",
                    help="replicas for RANKS ranks in all, from docs/scale.md (runs nothing)")
    ap.add_argument("--largest-job", type=int, metavar="RANKS", help="ranks of the largest job (default: --plan)")
    ap.add_argument("--spare", type=int, default=1, help="replicas that may be lost (default 1)")
    ap.add_argument("--cores-per-replica", type=float, default=2.0, help="cores of each replica (default 2)")
    ap.add_argument("--memory-per-replica-gib", type=float, default=4.0,
                    help="memory of each replica, GiB (default 4)")
    ap.add_argument("--utilization", type=float, default=0.5,
                    help="share of a replica's cores to plan for (default 0.5: bursts, queries, failover)")
    ap.add_argument("--base-mib", type=float, default=32.0,
                    help="memory of an idle engine, MiB (default 32; one with no job measured 24 MiB of RSS)")
    ap.add_argument("--scale-doc", default=os.path.join(REPO, "docs", "scale.md"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.plan is not None:
        if a.plan <= 0 or a.spare < 0 or not 0 < a.utilization <= 1 or a.cores_per_replica <= 0:
            ap.error("--plan > 0, --spare >= 0, 0 < --utilization <= 1, --cores-per-replica > 0")
        sys.exit(plan(a))
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
