"""Issue-latency coverage of collectives in ring dumps (xpu-ring-dump --json
output, *.jsonl): for every collective occurrence (signature, seq), whether
some record of it carries a measured issue latency (XPU_REC_ISSUE_LAT_VALID),
and how many of them were GPU-timed and by whom (event pair or the NCCL
profiler plugin). Prints one JSON object per dump and a total.

Usage: issue_latency_coverage.py DUMP_DIR
Exit 0 when every collective occurrence has an issue latency.
"""
import glob
import json
import os
import sys

REC_TIMED, REC_PLUGIN, REC_ISSUE_LAT_VALID = 1 << 0, 1 << 8, 1 << 6
COLLECTIVE = range(16, 26)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    total = {"collectives": 0, "with_issue_latency": 0, "timed": 0, "plugin_timed": 0}
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
        sigs, occ = {}, {}
        for line in open(path):
            o = json.loads(line)
            if o.get("type") == "signature":
                sigs[o["id"]] = o
            elif o.get("type") == "record":
                s = sigs.get(o["sig_id"])
                if s is None or s.get("kind_id") not in COLLECTIVE:
                    continue
                a = occ.setdefault((o["sig_id"], o["seq"]), {"lat": False, "timed": False, "plugin": False})
                f = o["flags"]
                a["lat"] |= bool(f & REC_ISSUE_LAT_VALID)
                a["timed"] |= bool(f & REC_TIMED)
                a["plugin"] |= bool(f & REC_TIMED and f & REC_PLUGIN)
        row = {"dump": os.path.basename(path), "collectives": len(occ),
               "with_issue_latency": sum(a["lat"] for a in occ.values()),
               "timed": sum(a["timed"] for a in occ.values()),
               "plugin_timed": sum(a["plugin"] for a in occ.values())}
        print(json.dumps(row))
        for k in total:
            total[k] += row[k]
    print(json.dumps({"total": total}))
    return 0 if total["collectives"] and total["with_issue_latency"] == total["collectives"] else 1


if __name__ == "__main__":
    sys.exit(main())
