"""Summarizes bench/overhead/run_overhead.sh: median step time per shape and
mode, overhead vs `none` (medians of the interleaved runs) with a 95 %
bootstrap interval (steps of all runs of a mode resampled, ratio of medians),
and trace bytes per rank per step. Usage: summarize.py WORKDIR STEPS"""
import collections
import glob
import json
import os
import random
import statistics
import sys


def overhead_interval(steps, base_steps, n=2000, seed=1):
    """95 % bootstrap interval of (median(steps) / median(base_steps) - 1) in %."""
    if len(steps) < 5 or len(base_steps) < 5:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(n):
        a = statistics.median(rng.choices(steps, k=len(steps)))
        b = statistics.median(rng.choices(base_steps, k=len(base_steps)))
        ratios.append(100.0 * (a - b) / b)
    ratios.sort()
    return ratios[int(0.025 * n)], ratios[int(0.975 * n) - 1]


def main() -> int:
    work, steps = sys.argv[1], int(sys.argv[2])
    step_ms = collections.defaultdict(list)
    all_steps = collections.defaultdict(list)
    trace_bytes = collections.defaultdict(list)
    for d in sorted(glob.glob(os.path.join(work, "*.*.*"))):
        shape, mode, _ = os.path.basename(d).split(".")
        try:
            s = json.load(open(os.path.join(d, "summary.json")))
        except (OSError, ValueError):
            continue
        if s.get("median_step_ms"):
            step_ms[(shape, mode)].append(s["median_step_ms"])
            all_steps[(shape, mode)].extend(s.get("step_ms") or [])
        if mode == "profiler" and s.get("trace_bytes_per_rank"):
            trace_bytes[(shape, mode)].append(s["trace_bytes_per_rank"] / (steps + 5))
        for h in glob.glob(os.path.join(d, "*.hdr.json")):
            hdr = json.load(open(h))
            if hdr.get("rank", -1) >= 0:  # training ranks only
                trace_bytes[(shape, mode)].append(hdr["counters"]["records_written"] * 32 / (steps + 5))
    print(f"{'shape':<8} {'mode':<9} {'runs':>4} {'median_step_ms':>15} {'overhead_%':>11} "
          f"{'95%_interval':>17} {'trace_B/rank/step':>18}")
    for shape in sorted({k[0] for k in step_ms}):
        base = statistics.median(step_ms[(shape, "none")]) if step_ms[(shape, "none")] else None
        for mode in ("none", "sampled", "all", "profiler"):
            v = step_ms.get((shape, mode))
            if not v:
                continue
            m = statistics.median(v)
            ov = f"{100.0 * (m - base) / base:+.2f}" if base else "-"
            ci = overhead_interval(all_steps[(shape, mode)], all_steps[(shape, "none")]) \
                if mode != "none" else None
            ci_s = f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "-"
            tb = statistics.median(trace_bytes[(shape, mode)]) if trace_bytes[(shape, mode)] else 0
            print(f"{shape:<8} {mode:<9} {len(v):>4} {m:>15.3f} {ov:>11} {ci_s:>17} {tb:>18.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
