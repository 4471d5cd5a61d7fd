"""Summarizes the host-side (Python) records of a job from ring dumps
(`xpu-ring-dump --json` outputs, one *.jsonl per process): counts per kind
and rank, and step-marker durations against the training script's own
median step time (train_gpt.py --json-out).

Usage: python_records.py --dump-dir DIR [--script-summary FILE]
"""
import argparse
import collections
import glob
import json
import os
import statistics
import sys

from compare import load_dump


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dump-dir", required=True)
    ap.add_argument("--script-summary", default="")
    args = ap.parse_args()
    out = {"ranks": {}}
    for path in sorted(glob.glob(os.path.join(args.dump_dir, "*.jsonl"))):
        header, sigs, recs = load_dump(path)
        if header is None or not recs:
            continue
        counts = collections.Counter(r["kind"] for r in recs)
        steps = [r["duration_ns"] / 1e6 for r in recs if r["kind"] == "step"]
        out["ranks"][f"rank{header['rank']}_pid{header['pid']}"] = {
            "counts": dict(counts),
            "step_markers": len(steps),
            "step_median_ms": statistics.median(steps) if steps else None,
            "py_names": sorted({sigs[r["sig_id"]]["name"] for r in recs
                                if r["kind"].startswith("py_") and r["sig_id"] in sigs})[:20],
            "counters": header.get("counters"),
        }
    if args.script_summary and os.path.exists(args.script_summary):
        out["script"] = json.load(open(args.script_summary))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
