"""Compares the bus bandwidth the engine computes for a collective sweep
(`xpu timeline summary --json`, last-arrival method, per communicator, op and
size) with what bench/gpt/collective_sweep.py measured itself.

Usage: compare_busbw.py --script SWEEP.json --summary SUMMARY.json [--tolerance 5]
Exit 0 when every size the script measured has an engine figure within the
tolerance (percent) of the script's busbw over the same calls.
"""
import argparse
import json
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--script", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--tolerance", type=float, default=5.0)
    args = ap.parse_args()
    script = json.load(open(args.script))
    summary = json.load(open(args.summary))
    engine = {}
    for c in summary.get("communicators", []):
        key = (c["op"], c["bytes"])
        # Several communicators may run the same op and size (e.g. a barrier's);
        # the sweep's is the one with the most calls.
        if key not in engine or c["count"] > engine[key]["count"]:
            engine[key] = c
    ok, rows = True, []
    print(f"{'op':<14}{'size':>10}{'calls':>7}{'engine GB/s':>13}{'script GB/s':>13}{'diff':>9}   (loop avg GB/s)")
    for r in script["results"]:
        e = engine.get((r["op"], r["bytes"]))
        size = f"{r['bytes'] / 2**20:.0f} MiB"
        if e is None:
            ok = False
            print(f"{r['op']:<14}{size:>10}{'-':>7}{'missing':>13}{r['busbw_all_calls_GBps']:>13.1f}")
            rows.append({**r, "engine_busbw_GBps": None, "diff_pct": None})
            continue
        diff = (e["busbw_gbps"] / r["busbw_all_calls_GBps"] - 1) * 100
        ok &= abs(diff) <= args.tolerance
        print(f"{r['op']:<14}{size:>10}{e['count']:>7}{e['busbw_gbps']:>13.1f}{r['busbw_all_calls_GBps']:>13.1f}"
              f"{diff:>+8.1f}%   ({r['busbw_loop_GBps']:.1f})")
        rows.append({**r, "engine_busbw_GBps": e["busbw_gbps"], "engine_calls": e["count"], "diff_pct": diff})
    print("all within %.1f %%" % args.tolerance if ok else "NOT all within %.1f %%" % args.tolerance)
    json.dump(rows, sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
