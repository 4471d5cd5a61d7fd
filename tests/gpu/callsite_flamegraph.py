"""Kernel-to-Python flame graph of a traced run: every sampled GEMM and
collective launch joined to its Python call site (record.h,
XPU_OP_PY_CALLSITE), from the ring files of the run.

    callsite_flamegraph.py --ring-dir DIR [--model FILE] [--out-dir OUT]

Writes OUT/callsites.folded (one "outermost;...;innermost;[op] count" line per
distinct stack and op, the format of flamegraph.pl and speedscope) and
OUT/callsites.json, and prints a summary: sampled launches with and without a
call site, the backward launches labelled as such, and, when --model names
the model's source file (bench/gpt/train_gpt.py), which of its lines the
forward GEMMs are attributed to. With --model, the exit status says whether
the forward GEMMs name the model's attention, MLP and output-head lines.
"""
import argparse
import collections
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from xputimer import ring  # noqa: E402

REC_PLUGIN, REC_TIMED, REC_SAMPLED = 1 << 8, 1, 1 << 2
BACKWARD = "backward, forward call site unknown"


def model_lines(path):
    """Line numbers of the model's GEMM call sites, by what they call."""
    want = {"attention qkv": r"self\.qkv\(", "attention proj": r"self\.proj\(",
            "mlp fc1/fc2": r"self\.fc[12]\(", "output head": r"self\.head\("}
    found = {}
    for i, line in enumerate(open(path), 1):
        for label, pat in want.items():
            if re.search(pat, line):
                found.setdefault(label, set()).add(i)
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ring-dir", required=True)
    ap.add_argument("--model", default="")
    ap.add_argument("--out-dir", default="")
    a = ap.parse_args()
    folded = collections.Counter()
    by_model_line = collections.Counter()
    totals = collections.Counter()
    for path in sorted(glob.glob(os.path.join(a.ring_dir, "*.bin"))):
        try:
            data = ring.read_ring(path)
        except Exception as e:
            print("skip %s: %s" % (path, e), file=sys.stderr)
            continue
        sigs = data["signatures"]
        links = ring.callsites(data)
        linked = {(l["launch_sig_id"], l["seq"], l["stream"]) for l in links}
        # Sampled launches: GEMMs and collectives the sampler picked (the
        # timed ones carry XPU_REC_SAMPLED; plugin-timed collectives are
        # counted from their occurrence records, which carry no flag of the
        # pick, so only GEMMs are counted here).
        for r in data["records"]:
            s = sigs.get(r["sig_id"])
            if s is None or s["kind"] != ring.OP_GEMM or r["flags"] & REC_PLUGIN:
                continue
            if r["flags"] & REC_SAMPLED:
                totals["sampled gemm launches"] += 1
                if (r["sig_id"], r["seq"], r["stream"]) in linked:
                    totals["sampled gemm launches with a call site"] += 1
        for l in links:
            s = sigs.get(l["launch_sig_id"], {})
            op = "[%s %s]" % ({ring.OP_GEMM: "gemm"}.get(s.get("kind"), "op%s" % s.get("kind")),
                              s.get("name", "?"))
            frames = list(reversed(l["frames"]))  # outermost first
            folded[";".join(frames + [op])] += 1
            totals["call-site links"] += 1
            if l["frames"] and l["frames"][0].startswith(BACKWARD):
                totals["backward launches (labelled)"] += 1
                continue
            if a.model and s.get("kind") == ring.OP_GEMM:
                base = os.path.basename(a.model)
                for f in l["frames"]:  # innermost model frame
                    func, _, rest = f.partition("@")
                    file, _, line = rest.rpartition(":")
                    if os.path.basename(file) == base:
                        by_model_line[(func, int(line))] += 1
                        break
                else:
                    totals["gemm links without a model frame"] += 1
    out = a.out_dir or a.ring_dir
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "callsites.folded"), "w") as fh:
        for stack, n in folded.most_common():
            fh.write("%s %d\n" % (stack, n))
    print("call sites:", ", ".join("%s %d" % kv for kv in sorted(totals.items())))
    print("top stacks (outermost ... innermost; op):")
    for stack, n in folded.most_common(12):
        parts = stack.split(";")
        print("  %6d  %s" % (n, " ; ".join(ring_short(p) for p in parts[-5:])))
    ok = True
    report = {"totals": dict(totals), "model_lines": {}}
    if a.model:
        lines = model_lines(a.model)
        ok = bool(lines)
        print("forward GEMM call sites in %s:" % os.path.basename(a.model))
        for (func, line), n in sorted(by_model_line.items(), key=lambda kv: -kv[1]):
            label = ", ".join(k for k, v in lines.items() if line in v) or "-"
            print("  %6d  %s:%d  (%s)" % (n, func, line, label))
        for label, want in sorted(lines.items()):
            n = sum(c for (f, line), c in by_model_line.items() if line in want)
            report["model_lines"][label] = n
            print("  %-16s lines %s: %d launches" % (label, sorted(want), n))
            ok &= n > 0
        print("RESULT:", "the model's attention, MLP and head lines are named" if ok
              else "NOT every model line is named")
    with open(os.path.join(out, "callsites.json"), "w") as fh:
        json.dump(report, fh, indent=1)
    return 0 if ok else 1


def ring_short(frame):
    if not frame.startswith("[") and "@" in frame:
        func, _, rest = frame.partition("@")
        file, _, line = rest.rpartition(":")
        return "%s@%s:%s" % (func, os.path.basename(file), line)
    return frame


if __name__ == "__main__":
    sys.exit(main())
