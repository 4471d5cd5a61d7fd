"""Sampled (timed) GPU durations recorded by libxpu_hook.so against
torch.profiler's (CUPTI) kernel durations of the same run, per GEMM shape and
collective size: the check of exact short-op timing (docs/timing-policy.md,
stream holds).

    short_op_compare.py --ring-dir DIR --profiler-dir DIR [--label L] [--tolerance 5]
                        [--out FILE.json]

Ring files are read with the repository's xputimer.ring (no bundle binary
needed). For each shape the hook's figure is the median of its timed records
(XPU_REC_TIMED: the hook's own events, or the NCCL profiler plugin's record
for collectives); the profiler's is the median per call of the kernels it saw
(gemm_profile.py / allreduce_profile.py). Also prints the hook's median issue
latency. Exit status 0 when every shape is within the tolerance.
"""
import argparse
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from xputimer import ring  # noqa: E402

REC_TIMED, REC_ISSUE_LAT_VALID, REC_PLUGIN = 1, 1 << 6, 1 << 8


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ring-dir", required=True)
    ap.add_argument("--profiler-dir", required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("--tolerance", type=float, default=5.0)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    rings = []
    for path in sorted(glob.glob(os.path.join(a.ring_dir, "*.bin"))):
        try:
            data = ring.read_ring(path)
        except Exception as e:  # a ring of a helper process that never traced
            print("skip %s: %s" % (path, e), file=sys.stderr)
            continue
        if data["records"]:
            rings.append(data)

    def timed(pred, rank=None):
        durs, lats, plugin = [], [], 0
        for data in rings:
            if rank is not None and data["header"]["rank"] != rank:
                continue
            sigs = data["signatures"]
            for r in data["records"]:
                s = sigs.get(r["sig_id"])
                if s is None or not r["flags"] & REC_TIMED or not pred(s):
                    continue
                durs.append(r["duration_ns"] / 1e3)
                if r["flags"] & REC_ISSUE_LAT_VALID:
                    lats.append(r["issue_latency_ns"] / 1e3)
                plugin += bool(r["flags"] & REC_PLUGIN)
        return durs, lats, plugin

    rows, ok = [], True
    gp = os.path.join(a.profiler_dir, "gemm_profiler.json")
    if os.path.exists(gp):
        for shape in json.load(open(gp)):
            m, n, k = shape["cublas_m"], shape["cublas_n"], shape["cublas_k"]
            durs, lats, _ = timed(lambda s: s["kind"] == ring.OP_GEMM and (s["m"], s["n"], s["k"]) == (m, n, k))
            rows.append(row("gemm", "%dx%dx%d" % (shape["M"], shape["K"], shape["N"]), durs, lats,
                            shape["profiler_median_us"], ""))
    for pf in sorted(glob.glob(os.path.join(a.profiler_dir, "allreduce_profiler.rank*.json"))):
        rank = int(pf.rsplit("rank", 1)[1].split(".")[0])
        for size in json.load(open(pf)):
            durs, lats, plugin = timed(lambda s: s["kind"] == ring.OP_ALLREDUCE and s["count"] == size["count"], rank)
            rows.append(row("allreduce", "%dMiB r%d" % (size["MiB"], rank), durs, lats,
                            size["profiler_median_us"], "plugin" if plugin else "events"))
    title = "short-op timing" + (" (%s)" % a.label if a.label else "")
    print("%s: hook timed median vs torch.profiler kernel median" % title)
    print("%-10s %-16s %5s %11s %12s %8s %14s %s" % ("op", "shape", "n", "hook_us", "profiler_us", "diff_%",
                                                    "issue_lat_us", "timer"))
    for r in rows:
        f = lambda v, spec="%.2f": "-" if v is None else spec % v
        print("%-10s %-16s %5d %11s %12s %8s %14s %s" % (r["op"], r["shape"], r["n"], f(r["hook_us"]),
                                                       f(r["profiler_us"]), f(r["diff_pct"], "%+.1f"),
                                                       f(r["issue_latency_us"]), r["timer"]))
        ok &= r["diff_pct"] is not None and abs(r["diff_pct"]) <= a.tolerance
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    print("RESULT (%s):" % (a.label or "-"), "all within" if ok else "NOT all within", "%g%%" % a.tolerance)
    return 0 if ok else 1


def row(op, shape, durs, lats, profiler_us, timer):
    r = {"op": op, "shape": shape, "n": len(durs), "profiler_us": profiler_us, "timer": timer,
         "hook_us": statistics.median(durs) if durs else None,
         "issue_latency_us": statistics.median(lats) if lats else None, "diff_pct": None}
    if durs and profiler_us:
        r["diff_pct"] = 100.0 * (r["hook_us"] - profiler_us) / profiler_us
    return r


if __name__ == "__main__":
    sys.exit(main())
