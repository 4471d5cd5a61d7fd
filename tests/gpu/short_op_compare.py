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
(gemm_profile.py / allreduce_profile.py). Where the profiler's per-call
durations are available and the hook recorded every occurrence, each timed
occurrence is also compared with the same call's profiler duration (the
median of those differences: "same-call"), which the spread of durations from
call to call does not disturb; the check uses it when present. Also prints
the hook's median issue latency. Exit status 0 when every shape is within
the tolerance.
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

    def per_call(pred, per_call_us, warmup, rank=None):
        """Per-call differences (%): the k-th profiled call against the
        hook's record of the same occurrence (occurrences in launch order:
        every one has a record; the timed ones carry the duration, or the
        plugin's record with the same seq does). None when the occurrences
        cannot be lined up (a record missing)."""
        if not per_call_us:
            return None
        diffs = []
        for data in rings:
            if rank is not None and data["header"]["rank"] != rank:
                continue
            sigs = data["signatures"]
            mine = [r for r in data["records"] if r["sig_id"] in sigs and pred(sigs[r["sig_id"]])]
            occ = sorted((r for r in mine if not r["flags"] & REC_PLUGIN), key=lambda r: r["seq"])
            dur = {}
            for r in mine:  # the plugin's timing wins over the occurrence's own
                if r["flags"] & REC_TIMED and (r["flags"] & REC_PLUGIN or r["seq"] not in dur):
                    dur[r["seq"]] = r["duration_ns"] / 1e3
            if len(occ) < warmup + len(per_call_us):
                return None
            for i, r in enumerate(occ):
                k = i - warmup
                if 0 <= k < len(per_call_us) and r["seq"] in dur and per_call_us[k] > 0:
                    diffs.append(100.0 * (dur[r["seq"]] - per_call_us[k]) / per_call_us[k])
        return diffs or None

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
            pred = lambda s: s["kind"] == ring.OP_GEMM and (s["m"], s["n"], s["k"]) == (m, n, k)
            durs, lats, _ = timed(pred)
            # The profiler's figure sums every kernel of the call; the timer
            # column shows how many there were and their span.
            kinfo = "%dk" % shape.get("kernels_per_call", 0)
            if shape.get("profiler_span_median_us"):
                kinfo += " span %.2f" % shape["profiler_span_median_us"]
            rows.append(row("gemm", "%dx%dx%d" % (shape["M"], shape["K"], shape["N"]), durs, lats,
                            shape["profiler_median_us"], kinfo,
                            per_call(pred, shape.get("profiler_per_call_us"), shape.get("warmup", 5))))
    for pf in sorted(glob.glob(os.path.join(a.profiler_dir, "allreduce_profiler.rank*.json"))):
        rank = int(pf.rsplit("rank", 1)[1].split(".")[0])
        for size in json.load(open(pf)):
            pred = lambda s: s["kind"] == ring.OP_ALLREDUCE and s["count"] == size["count"]
            durs, lats, plugin = timed(pred, rank)
            rows.append(row("allreduce", "%dMiB r%d" % (size["MiB"], rank), durs, lats,
                            size["profiler_median_us"], "plugin" if plugin else "events",
                            per_call(pred, size.get("profiler_per_call_us"), 5, rank)))
    title = "short-op timing" + (" (%s)" % a.label if a.label else "")
    print("%s: hook timed median vs torch.profiler median per call (sum of its kernels)" % title)
    print("%-10s %-16s %5s %11s %12s %8s %22s %14s %s" % (
        "op", "shape", "n", "hook_us", "profiler_us", "diff_%", "same-call diff_% [n]",
        "issue_lat_us", "timer"))
    for r in rows:
        f = lambda v, spec="%.2f": "-" if v is None else spec % v
        same = "-" if r["same_call_pct"] is None else "%+.1f [%d]" % (r["same_call_pct"], r["same_call_n"])
        print("%-10s %-16s %5d %11s %12s %8s %22s %14s %s" % (
            r["op"], r["shape"], r["n"], f(r["hook_us"]), f(r["profiler_us"]), f(r["diff_pct"], "%+.1f"),
            same, f(r["issue_latency_us"]), r["timer"]))
        # The same-call comparison when the occurrences line up (it is not
        # disturbed by how the durations of different calls vary), else the
        # medians.
        d = r["same_call_pct"] if r["same_call_pct"] is not None else r["diff_pct"]
        ok &= d is not None and abs(d) <= a.tolerance
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    if not rows:
        ok = False
        print("(no profiler results: the GPU runs failed, see their logs)")
    print("RESULT (%s):" % (a.label or "-"), "all within" if ok else "NOT all within", "%g%%" % a.tolerance)
    return 0 if ok else 1


def row(op, shape, durs, lats, profiler_us, timer, same_call):
    r = {"op": op, "shape": shape, "n": len(durs), "profiler_us": profiler_us, "timer": timer,
         "hook_us": statistics.median(durs) if durs else None,
         "issue_latency_us": statistics.median(lats) if lats else None, "diff_pct": None,
         "same_call_pct": statistics.median(same_call) if same_call else None,
         "same_call_n": len(same_call) if same_call else 0}
    if durs and profiler_us:
        r["diff_pct"] = 100.0 * (r["hook_us"] - profiler_us) / profiler_us
    return r


if __name__ == "__main__":
    sys.exit(main())
