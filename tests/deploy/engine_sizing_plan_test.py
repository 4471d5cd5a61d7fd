#!/usr/bin/env python3
"""deploy/engine_sizing.py --plan: replicas from the per-rank costs of docs/scale.md.

usage: engine_sizing_plan_test.py

  - on a table of known figures: the costliest row per rank is used (CPU
    and memory each), the replicas needed follow from the replica's size,
    utilization and spares, and a job larger than one replica is refused
    (exit status 1);
  - on docs/scale.md itself: every table row is read (the tables are what
    the rank simulator's benchmark writes) and a plan comes out (or the
    refusal of a job larger than one default replica, as the figures say).
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_util import REPO, check, log, main  # noqa: E402

TOOL = os.path.join(REPO, "deploy", "engine_sizing.py")
HEADER = ("| ranks | run | hosts | engine CPU µs per rank per window | engine cores for real time | "
          "engine RSS per rank (KiB) | wire bytes per rank per step |\n|---|---|---|---|---|---|---|\n")


def plan(*args):
    r = subprocess.run([sys.executable, TOOL, "--plan"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return r.returncode, r.stdout


def body():
    with tempfile.TemporaryDirectory() as d:
        doc = os.path.join(d, "scale.md")
        with open(doc, "w") as f:
            # Per rank: 10 µs (1,000 ranks at 0.01 cores), 20 µs (10,000 at 0.2), 100 KiB at most.
            f.write("text\n\n" + HEADER + "| 1000 | healthy | 125 | 100 | 0.010 | 100.0 | 2000 |\n"
                    "| 10000 | slow_gpu | 1250 | 200 | 0.200 | 50.0 | 2000 |\n\nmore text\n")
        # A replica of 2 cores at 50 %: 1 core / 20 µs = 50,000 ranks by CPU;
        # 4 GiB - 32 MiB = 4,064 MiB / 100 KiB = 41,615 ranks by memory.
        rc, out = plan("100000", "--largest-job", "30000", "--scale-doc", doc)
        check(rc == 0, "rc %d:\n%s" % (rc, out))
        check("20.0 µs" in out and "(10000 ranks, slow_gpu" in out, "CPU per rank not the costliest row:\n" + out)
        check("100 KiB per rank (1000 ranks, healthy)" in out, "memory per rank not the largest:\n" + out)
        check("serves about 41615 ranks" in out, "ranks per replica:\n" + out)
        check("100000 ranks: 3 replica(s) carry them, 4 with 1 lost: run 4" in out, "replicas:\n" + out)
        check("30000 ranks: one replica needs 1.2 cores and 2.9 GiB" in out, "largest job:\n" + out)
        log("known table: 20 µs and 100 KiB per rank -> 41,615 ranks per replica, 100,000 ranks: run 4")
        rc, out = plan("100000", "--largest-job", "50000", "--spare", "2", "--scale-doc", doc)
        check(rc == 1 and "more than one replica of this size" in out and "run 5" in out,
              "a 50,000-rank job on 41,615-rank replicas: rc %d\n%s" % (rc, out))
        log("a job larger than one replica: exit status 1, said so")
    rc, out = plan("10000")
    m = re.search(r"the largest of (\d+) runs in docs/scale.md", out)
    # Rows of the simulator tables: ranks, run name, hosts, ...
    rows = sum(1 for l in open(os.path.join(REPO, "docs", "scale.md"))
               if re.match(r"\| \d+ \| [^|]+ \| \d+ \|", l))
    # A plan either way: the replicas that carry the ranks, or (exit status
    # 1) that a 10,000-rank job needs a replica larger than the default.
    check(rc in (0, 1) and m and int(m.group(1)) == rows and "replica(s) carry them" in out,
          "docs/scale.md: %s of %d rows read, rc %d\n%s" % (m and m.group(1), rows, rc, out))
    log("docs/scale.md: %d rows read; %s" % (rows, [l for l in out.splitlines() if "ranks:" in l][0]))


if __name__ == "__main__":
    main("engine_sizing_plan", body)
