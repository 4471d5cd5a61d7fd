#!/usr/bin/env python3
"""End to end: `xpu timeline dump` and `xpu timeline summary` on a real job.

Four ranks of xpu-fake-train under libxpu_hook.so report to a real xpu-daemon
and xpu-engine. Rank 3 exits at step 6; ranks 0-2 then block forever in the
next collective (a missing member blocks the others), so the dump covers live
(hung) ranks and one that has exited, whose history only its daemon kept.
Checks: every rank answers; the Perfetto file is valid for an independent
decoder (xpu-trace-validate: protoc-generated code from Perfetto's protos);
the Chrome JSON parses with Python's json and follows the trace-event schema;
flows link each collective's kernels across the ranks; the manifest reports
the exited rank and the clock offsets; summary --in works on the dump;
--ranks/--last restrict what the daemon returns; once the daemon is gone the
engine serves the ranks from its own recent-record ring.

usage: test_timeline_dump.py PATHS_JSON
"""
import json
import os
import subprocess
import sys

from pipeline_harness import Failure, check, engine_ranks, log, run_test, wait_for

NPROC = 4
EXIT_RANK = 3
TRAIN = ["--steps", "400", "--layers", "2", "--hidden", "256", "--tokens", "256",
         "--step-sleep-ms", "10", "--exit-at", "6", "--fault-rank", str(EXIT_RANK)]


def paths_extra(pipe):
    with open(sys.argv[1]) as f:  # run_test read the same file into pipe.paths
        return json.load(f)


def body(pipe):
    extra = paths_extra(pipe)
    engine = pipe.start_engine()
    daemon = pipe.start_daemon(engine.addr)
    job = "e2etl-%d" % os.getpid()
    jdir = os.path.join(pipe.dir, "job")
    os.makedirs(os.path.join(jdir, "rings"))
    id_file = os.path.join(jdir, "nccl_id")
    procs = []
    try:
        # Ranks are started one by one (not through xpu-fake-launch, which
        # would stop the others when rank 3 fails).
        for r in range(NPROC):
            env = pipe.job_env(job, os.path.join(jdir, "rings"), os.path.join(jdir, "calls"))
            env.update({"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(NPROC),
                        "LOCAL_WORLD_SIZE": str(NPROC), "XPU_FAKE_NCCL_ID_FILE": id_file,
                        "LD_PRELOAD": pipe.paths.hook})
            procs.append(pipe.spawn("rank%d" % r, [pipe.paths.fake_train] + TRAIN, env))

        def rank3_gone():
            rc = procs[EXIT_RANK].popen.poll()
            return rc is not None and rc
        rc = wait_for(rank3_gone, 90, "rank %d to exit" % EXIT_RANK)
        check(rc == 3, "rank %d exited %s, want 3" % (EXIT_RANK, rc))
        check(all(p.alive() for p in procs[:EXIT_RANK]), "ranks 0-2 should hang, not exit")

        def engine_sees_exit():
            ranks = engine_ranks(pipe, engine.addr, job)
            return ranks if len(ranks) == NPROC and ranks[EXIT_RANK]["liveness"] == "exited" else None
        ranks = wait_for(engine_sees_exit, 60, "engine to report rank %d exited" % EXIT_RANK, 0.5)
        log("engine: %s" % {r: (v["liveness"], v["records"]) for r, v in ranks.items()})

        out = os.path.join(pipe.dir, "dump")
        r = pipe.cli(engine.addr, "timeline", "dump", "--job", job, "--out", out, "--format", "both",
                     "--deadline-s", "20")
        text = r.stdout.decode()
        log(text)
        check("%d/%d ranks" % (NPROC, NPROC) in text, "dump output: %s" % text)
        check("ranks answered" in r.stderr.decode(), "no progress on stderr: %s" % r.stderr.decode())

        with open(os.path.join(out, "dump.json")) as f:
            manifest = json.load(f)
        check(manifest["ranks_answered"] == NPROC and manifest["missing"] == [],
              "manifest: %s" % {k: manifest[k] for k in ("ranks_answered", "missing")})
        procs_by_rank = {p["rank"]: p for p in manifest["processes"]}
        check(sorted(procs_by_rank) == list(range(NPROC)), "processes: %s" % manifest["processes"])
        for rk, p in procs_by_rank.items():
            check(p["exited"] == (rk == EXIT_RANK), "rank %d exited=%s" % (rk, p["exited"]))
            check(p["records"] > 50, "rank %d has only %d records" % (rk, p["records"]))
        check(manifest["packed_bytes"] == 32 * manifest["ops"], "packed bytes != 32 per op")
        hosts = manifest["clock"]["hosts"]
        check(len(hosts) == 1 and hosts[0]["offset_ns"] == 0 and hosts[0]["aligned"],
              "one host, offset 0: %s" % hosts)
        raw = sorted(os.listdir(os.path.join(out, "raw")))
        check(raw == ["rank-%d.xpb" % i for i in range(NPROC)], "raw files: %s" % raw)

        # Perfetto: independent decoder.
        v = subprocess.run([extra["trace_validate"], "--perfetto", os.path.join(out, "trace.perfetto-trace")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        pv = json.loads(v.stdout)
        check(v.returncode == 0 and pv["ok"], "perfetto trace invalid: %s" % pv["errors"])
        check(pv["processes"] == NPROC, "perfetto processes: %s" % pv["process_names"])
        check(all(pv["events_by_pid"].get(str(rk + 1), 0) > 0 for rk in range(NPROC)),
              "events per process: %s" % pv["events_by_pid"])
        check("exited" in pv["process_names"][str(EXIT_RANK + 1)], "rank 3 not marked exited")
        check("exited" not in pv["process_names"]["1"], "rank 0 marked exited")
        gemms = sum(n for name, n in pv["names"].items() if name.startswith("cublas"))
        colls = sum(n for name, n in pv["names"].items() if name.startswith(("allreduce", "allgather",
                                                                              "reducescatter")))
        check(gemms > 0 and colls > 0, "names: %s" % list(pv["names"])[:20])
        check(pv["flows"] > 0, "no collective flows")
        log("perfetto: %d slices, %d instants, %d flows, %d processes" %
            (pv["slices"], pv["instants"], pv["flows"], pv["processes"]))

        # Chrome JSON: Python's parser and the trace-event schema.
        with open(os.path.join(out, "trace.json")) as f:
            trace = json.load(f)
        events = trace["traceEvents"]
        flows = {}
        xs = 0
        for e in events:
            for k in ("name", "ph", "pid", "tid"):
                check(k in e, "event without %s: %s" % (k, e))
            if e["ph"] == "M":
                continue
            check(isinstance(e["ts"], (int, float)), "ts: %s" % e)
            if e["ph"] == "X":
                check(isinstance(e["dur"], (int, float)) and e["dur"] >= 0, "dur: %s" % e)
                xs += 1
            elif e["ph"] in ("s", "t", "f"):
                flows.setdefault(e["id"], []).append(e["ph"])
            else:
                check(e["ph"] == "i", "unexpected ph: %s" % e)
        check(xs == pv["slices"], "json X events %d != perfetto slices %d" % (xs, pv["slices"]))
        check(len(flows) == pv["flows"], "json flows %d != perfetto flows %d" % (len(flows), pv["flows"]))
        for fid, phs in flows.items():
            check(phs.count("s") == 1 and phs.count("f") == 1, "flow %s: %s" % (fid, phs))
        jv = subprocess.run([extra["trace_validate"], "--json", os.path.join(out, "trace.json")],
                            stdout=subprocess.PIPE, timeout=60)
        check(jv.returncode == 0, "json trace invalid: %s" % jv.stdout[:2000])

        # Summary of the dump.
        s = pipe.cli(engine.addr, "timeline", "summary", "--in", out, "--json")
        summary = json.loads(s.stdout)
        check(len(summary["ranks"]) == NPROC, "summary ranks: %s" % summary["ranks"])
        check(summary["top"] and summary["ops"] == manifest["ops"], "summary: %s" % summary["top"][:3])
        check(any(t["kind"] == "gemm" for t in summary["top"]), "no GEMM in top: %s" % summary["top"])
        check(next(r for r in summary["ranks"] if r["rank"] == EXIT_RANK)["exited"], "summary exited flag")
        text = pipe.cli(engine.addr, "timeline", "summary", "--in", out).stdout.decode()
        check("Top signatures by time" in text and "(exited)" in text, text)

        # Only rank 3, its last 50 records.
        out2 = os.path.join(pipe.dir, "dump2")
        pipe.cli(engine.addr, "timeline", "dump", "--job", job, "--ranks", str(EXIT_RANK), "--last", "50",
                 "--out", out2, "--format", "json")
        with open(os.path.join(out2, "dump.json")) as f:
            m2 = json.load(f)
        check([(p["rank"], p["records"]) for p in m2["processes"]] == [(EXIT_RANK, 50)],
              "rank 3 last 50: %s" % m2["processes"])
        check(not os.path.exists(os.path.join(out2, "trace.perfetto-trace")), "format json wrote perfetto")

        # An unknown rank is reported, not waited for.
        r = pipe.cli(engine.addr, "timeline", "dump", "--job", job, "--ranks", "0,99", "--out",
                     os.path.join(pipe.dir, "dump3"))
        check("rank 99 did not answer" in r.stderr.decode(), r.stderr.decode())
        pipe.cli(engine.addr, "timeline", "dump", "--job", "no-such-job", "--out",
                 os.path.join(pipe.dir, "dump4"), expect_rc=1)

        # The daemon dies: every rank still comes, from the engine's own ring.
        daemon.kill()
        r = pipe.cli(engine.addr, "timeline", "dump", "--job", job, "--out", os.path.join(pipe.dir, "dump5"),
                     "--deadline-s", "5")
        err = r.stderr.decode()
        check("%d/%d ranks" % (NPROC, NPROC) in r.stdout.decode(), r.stdout.decode() + err)
        check(err.count("from the engine's recent-record ring") == NPROC, err)
        with open(os.path.join(pipe.dir, "dump5", "dump.json")) as f:
            m5 = json.load(f)
        check(len(m5["from_engine"]) == NPROC and m5["missing"] == [], "dump5: %s" % m5["from_engine"])
        check(next(p for p in m5["processes"] if p["rank"] == EXIT_RANK)["exited"], "rank 3 exited (engine)")
        pipe.cli(engine.addr, "timeline", "dump", "--job", job, "--out", os.path.join(pipe.dir, "dump6"),
                 "--deadline-s", "5", "--no-engine-fallback", expect_rc=1)
    finally:
        for p in procs:
            p.kill()
        try:
            with open(id_file) as f:
                ident = f.read(32)
            if len(ident) == 32:
                os.unlink("/dev/shm/xpu_fake_nccl_" + ident)
        except OSError:
            pass


if __name__ == "__main__":
    run_test("timeline", body)
