#!/usr/bin/env python3
"""Scores one run of the fault catalogue and writes the accuracy table.

  catalogue_eval.py row ROWS_JSONL --case NAME --cls CLASS --world W --shape S
        --expect KIND[:SUBJECT][|KIND...] --ranks R[,R] --team TEAM --t0 UNIX_S
        [--hang HANG_JSON] [--diag DIAG_JSON] [--seen-s S]
      appends one scored row to ROWS_JSONL and prints it. --expect none: a
      healthy run, correct when nothing is diagnosed. A hang is read from
      `xpu hang --json` (classification "non-communication" -> kind
      hang_non_communication), anything else from `xpu diagnose --all --json`.
      The time to diagnosis is the report's time (or --seen-s, when the
      caller polled) minus --t0, the moment of the fault.
  catalogue_eval.py table ROWS_JSONL [--doc DOC --section NAME]
      prints the markdown table; with --doc replaces the text between
      "<!-- catalogue:NAME begin -->" and "<!-- catalogue:NAME end -->".

Scoring (per row): detected = a diagnosis of an expected kind (and subject,
when given) exists; culprit correct = its ranks are exactly the expected
ones; team correct = its team is the expected one. Diagnoses of other kinds
are listed as "also" (a healthy run must have none at all).
"""
import argparse
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def diagnoses(a):
    out = []
    h = load(a.hang) if a.hang else {}
    if h.get("found"):
        out.append({"kind": "hang_" + h.get("classification", "").replace("-", "_"), "subject": "",
                    "team": h.get("team", ""), "ranks": sorted(h.get("culprits", [])),
                    "t": (h.get("diagnosed_ns", 0) or 0) / 1e9, "first_t": (h.get("first_diagnosed_ns", 0) or
                                                                          h.get("diagnosed_ns", 0) or 0) / 1e9,
                    "reason": h.get("reason", "")})
    d = load(a.diag) if a.diag else {}
    for x in d.get("diagnoses", []):
        if x.get("kind", "").startswith("hang_") and out:
            continue  # the hang report above speaks for it
        out.append({"kind": x.get("kind", ""), "subject": x.get("subject", ""), "team": x.get("team", ""),
                    "ranks": sorted(x.get("ranks", [])), "t": x.get("first_seen_ns", 0) / 1e9,
                    "first_t": x.get("first_seen_ns", 0) / 1e9, "reason": str(x.get("evidence", ""))[:200]})
    return out


def matches(d, spec):
    kind, _, subject = spec.partition(":")
    return d["kind"] == kind and (not subject or d["subject"] == subject)


def row(a):
    ds = diagnoses(a)
    want_ranks = sorted(int(x) for x in a.ranks.split(",") if x != "") if a.ranks else []
    r = {"case": a.case, "class": a.cls, "world": a.world, "shape": a.shape, "expect": a.expect,
         "found": [("%s(%s)" % (d["kind"], d["subject"]) if d["subject"] else d["kind"]) +
                   " %s %s" % (d["team"], d["ranks"]) for d in ds]}
    if a.no_run:
        r.update(found=["run failed to start"], detected=False, culprit=False, team=False, time_s=None,
                 healthy=a.expect == "none")
    elif a.expect == "none":
        r.update(detected=not ds, culprit=not ds, team=not ds, time_s=None, healthy=True)
    else:
        specs = a.expect.split("|")
        hit = [d for d in ds if any(matches(d, s) for s in specs)]
        # The best of the hits: right ranks and team first.
        hit.sort(key=lambda d: (d["ranks"] != want_ranks, d["team"] != a.team, d["first_t"]))
        h = hit[0] if hit else None
        t = None
        if h is not None:
            t = (a.seen_s if a.seen_s is not None else h["first_t"] - a.t0)
        r.update(detected=h is not None, culprit=bool(h) and h["ranks"] == want_ranks,
                 team=bool(h) and h["team"] == a.team, time_s=None if t is None else round(t, 1), healthy=False,
                 named=h and ("%s %s %s" % (h["kind"], h["team"], h["ranks"])))
    with open(a.rows, "a") as f:
        f.write(json.dumps(r) + "\n")
    print("ROW " + json.dumps(r))


def yes(v):
    return "yes" if v else "**no**"


def table(a):
    rows = []
    with open(a.rows) as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    lines = ["| class | world | shape | detected | culprit correct | team correct | time to diagnosis | what the engine said |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        said = "; ".join(r["found"]) or "nothing"
        if r.get("healthy"):
            det = "no diagnosis" if r["detected"] else "**%d diagnoses**" % len(r["found"])
            lines.append("| %s | %s | %s | %s | - | - | - | %s |" % (r["class"], r["world"], r["shape"], det, said))
            continue
        t = "-" if r["time_s"] is None else "%.1f s" % r["time_s"]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["class"], r["world"], r["shape"], yes(r["detected"]), yes(r["culprit"]), yes(r["team"]), t,
            said.replace("|", "/")))
    n = [r for r in rows if not r.get("healthy")]
    hl = [r for r in rows if r.get("healthy")]
    lines.append("")
    lines.append("Faults: %d of %d detected, culprit correct in %d, team correct in %d; healthy runs: %d of %d "
                 "without any diagnosis." % (sum(r["detected"] for r in n), len(n), sum(r["culprit"] for r in n),
                                             sum(r["team"] for r in n), sum(r["detected"] for r in hl), len(hl)))
    text = "\n".join(lines) + "\n"
    if a.doc:
        begin, end = "<!-- catalogue:%s begin -->" % a.section, "<!-- catalogue:%s end -->" % a.section
        with open(a.doc) as f:
            doc = f.read()
        if begin in doc and end in doc:
            head, rest = doc.split(begin, 1)
            doc = head + begin + "\n" + text + end + rest.split(end, 1)[1]
        else:
            doc += "\n" + begin + "\n" + text + end + "\n"
        with open(a.doc + ".tmp", "w") as f:
            f.write(doc)
        os.replace(a.doc + ".tmp", a.doc)
    sys.stdout.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("row")
    r.add_argument("rows")
    for k in ("case", "cls", "shape", "expect", "team"):
        r.add_argument("--" + k, required=True)
    r.add_argument("--world", type=int, required=True)
    r.add_argument("--ranks", default="")
    r.add_argument("--t0", type=float, default=0.0)
    r.add_argument("--seen-s", type=float, default=None)
    r.add_argument("--hang", default="")
    r.add_argument("--diag", default="")
    r.add_argument("--no-run", action="store_true", help="the run failed to start: scored as not detected")
    t = sub.add_parser("table")
    t.add_argument("rows")
    t.add_argument("--doc", default="")
    t.add_argument("--section", default="gpu")
    a = ap.parse_args()
    row(a) if a.cmd == "row" else table(a)


if __name__ == "__main__":
    main()
