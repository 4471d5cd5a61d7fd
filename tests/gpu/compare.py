"""Compares per-op GPU durations recorded by libxpu_hook.so (ring files read
back with `xpu-ring-dump --json`) with torch.profiler's kernel durations for
the same run (gemm_profile.py / allreduce_profile.py outputs).

Usage: compare.py --dump-dir DIR --profiler-dir DIR [--out FILE]
  DIR of dumps: *.jsonl files, one per ring, as written by xpu-ring-dump --json.
Prints a table per signature: hook median, profiler median, difference in %.
Exit status 0 when every compared signature is within --tolerance (default 5 %).
"""
import argparse
import glob
import json
import os
import statistics
import sys


def load_dump(path):
    header, sigs, recs = None, {}, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            o = json.loads(line)
            t = o.get("type")
            if t == "header":
                header = o
            elif t == "signature":
                sigs[o["id"]] = o
            elif t == "record":
                recs.append(o)
    return header, sigs, recs


def timed_durations_us(sigs, recs, pred):
    out = {}
    for r in recs:
        s = sigs.get(r["sig_id"])
        if s is None or not r.get("timed") or not pred(s):
            continue
        out.setdefault(r["sig_id"], []).append(r["duration_ns"] / 1e3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump-dir", required=True)
    ap.add_argument("--profiler-dir", required=True)
    ap.add_argument("--tolerance", type=float, default=5.0)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    dumps = [load_dump(p) for p in sorted(glob.glob(os.path.join(args.dump_dir, "*.jsonl")))]
    rows, ok = [], True

    gp = os.path.join(args.profiler_dir, "gemm_profiler.json")
    if os.path.exists(gp):
        for shape in json.load(open(gp)):
            m, n, k = shape["cublas_m"], shape["cublas_n"], shape["cublas_k"]
            best = None
            for header, sigs, recs in dumps:
                d = timed_durations_us(sigs, recs, lambda s: s["kind"] == "gemm" and
                                       (s["m"], s["n"], s["k"]) == (m, n, k))
                for sid, durs in d.items():
                    if best is None or len(durs) > len(best[1]):
                        best = (sigs[sid], durs)
            row = {"op": "gemm", "shape": f"{shape['M']}x{shape['K']}x{shape['N']}",
                   "profiler_us": shape["profiler_median_us"], "kernels_per_call": shape["kernels_per_call"]}
            if best is None or shape["profiler_median_us"] is None:
                row.update(hook_us=None, diff_pct=None, n=0, sig="(none)")
                ok = False
            else:
                hm = statistics.median(best[1])
                row.update(hook_us=hm, n=len(best[1]), sig=best[0]["name"],
                           diff_pct=100.0 * (hm - shape["profiler_median_us"]) / shape["profiler_median_us"],
                           hook_tflops=2.0 * m * n * k / (hm * 1e-6) / 1e12)
                ok &= abs(row["diff_pct"]) <= args.tolerance
            rows.append(row)

    for pf in sorted(glob.glob(os.path.join(args.profiler_dir, "allreduce_profiler.rank*.json"))):
        rank = int(pf.rsplit("rank", 1)[1].split(".")[0])
        mine = [d for d in dumps if d[0] and d[0].get("rank") == rank]
        for size in json.load(open(pf)):
            durs = []
            for header, sigs, recs in mine:
                for sid, ds in timed_durations_us(sigs, recs, lambda s: s["kind"] == "allreduce" and
                                                  s["count"] == size["count"]).items():
                    durs += ds
            row = {"op": "allreduce", "shape": f"{size['MiB']}MiB r{rank}",
                   "profiler_us": size["profiler_median_us"], "script_us": size["script_median_us"]}
            if not durs or size["profiler_median_us"] is None:
                row.update(hook_us=None, diff_pct=None, n=0)
                ok = False
            else:
                hm = statistics.median(durs)
                row.update(hook_us=hm, n=len(durs),
                           diff_pct=100.0 * (hm - size["profiler_median_us"]) / size["profiler_median_us"])
                ok &= abs(row["diff_pct"]) <= args.tolerance
            rows.append(row)

    print(f"{'op':<10} {'shape':<18} {'n':>4} {'hook_us':>10} {'profiler_us':>12} {'diff_%':>8}")
    for r in rows:
        fmt = lambda v: f"{v:.1f}" if isinstance(v, float) else str(v)
        print(f"{r['op']:<10} {r['shape']:<18} {r['n']:>4} {fmt(r['hook_us']):>10} "
              f"{fmt(r['profiler_us']):>12} {fmt(r['diff_pct']):>8}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    print("RESULT:", "all within" if ok else "NOT all within", f"{args.tolerance}%")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
