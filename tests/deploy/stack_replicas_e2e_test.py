#!/usr/bin/env python3
"""The compose stack's engine replicas end to end, as processes of this host.

usage: stack_replicas_e2e_test.py BUILD_DIR

The services of compose.yaml + compose.replicas.yaml (merged by
docker-compose config), started from those files as host processes on
loopback ports (service names mapped to 127.0.0.1 and free ports):

  - PostgreSQL 15 (Debian's server binaries) made as the stand-in image's
    entrypoint makes it: role and database of the compose file, network
    clients by password (scram-sha-256); the engines read the password from
    a libpq password file written as docker/stack.sh writes .secrets/pgpass;
  - every engine replica with its compose flags (--replica-id,
    --advertise-addr, --db without password, PGPASSFILE);
  - Prometheus with prometheus/prometheus.replicas.yml, Alertmanager with
    alertmanager/alertmanager.yml;
  - the demo job (docker/demo/xpu-demo-job, slow GPU on rank 2), its daemon
    given every replica as docker/stack.sh --replicas gives them.

Checked: the job is served by one replica (the other has none of its
records); its slow_gpu diagnosis reaches Alertmanager (team operations);
the serving replica is SIGKILLed; a live replica then ingests the job's
records and reports the diagnosis (times printed), xpu diagnose at it names
rank 2, Alertmanager still holds one xpu_slow_gpu alert of the job, and
Prometheus sees the killed replica down and the other up. Skips, saying
why, where docker-compose, PostgreSQL, Prometheus or Alertmanager are not
installed.
"""
import glob
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_util import (REPO, install_stack, Procs, check, engine_ports, free_port, http_get, http_json, log,  # noqa: E402
                         main, need, run, skip, wait_for)

import yaml  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
DOCKER = os.path.join(REPO, "docker")
SLOW_RANK = 2
WINDOW_S = "2"


def metric(text, name, **labels):
    """Sum of the samples of NAME whose labels include LABELS."""
    total, seen = 0.0, False
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0])) if "{" in line else {}
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
            seen = True
    return total if seen else None


def start_postgres(procs, user, db, password):
    """A PostgreSQL server on a loopback port with ROLE/DB and the password,
    as docker/postgres/xpu-postgres-entrypoint makes it; returns its port."""
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        skip("PostgreSQL server binaries not installed (Debian postgresql-15)")
    bindir = os.path.dirname(bins[-1])
    # Its own directory: the server's user cannot enter the test's.
    pgdir = tempfile.mkdtemp(prefix="xpu-deploy-pg.")
    procs.pg_dir = pgdir
    preexec = pw = None
    if os.geteuid() == 0:  # PostgreSQL refuses root
        for name in ("postgres", "nobody"):
            try:
                pw = pwd.getpwnam(name)
                break
            except KeyError:
                pass
        check(pw is not None, "running as root and no user postgres/nobody for PostgreSQL")
        os.chown(pgdir, pw.pw_uid, pw.pw_gid)

        def preexec():
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
    pwfile = os.path.join(pgdir, "pw")
    with open(pwfile, "w") as f:
        f.write(password + "\n")
    if pw is not None:
        os.chown(pwfile, pw.pw_uid, pw.pw_gid)
    os.chmod(pwfile, 0o600)
    # The entrypoint's own initdb line, read from it.
    entry = open(os.path.join(DOCKER, "postgres", "xpu-postgres-entrypoint")).read()
    check("--auth-local=trust --auth-host=scram-sha-256" in entry, "the entrypoint's authentication changed")
    port = free_port()
    data = os.path.join(pgdir, "data")

    def as_pg(argv):
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           stdin=subprocess.DEVNULL, preexec_fn=preexec, cwd=pgdir)
        check(r.returncode == 0, "%s failed (rc %d): %s" % (argv[0], r.returncode, r.stdout[-2000:]))

    as_pg([bindir + "/initdb", "-D", data, "-U", user, "--pwfile=" + pwfile, "--encoding=UTF8", "--locale=C.UTF-8",
           "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync"])
    with open(os.path.join(data, "pg_hba.conf"), "a") as f:
        f.write("host all all all scram-sha-256\n")
    os.unlink(pwfile)
    as_pg([bindir + "/pg_ctl", "-D", data, "-l", os.path.join(pgdir, "server.log"), "-w", "-t", "60", "-o",
           "-k %s -c listen_addresses=127.0.0.1 -p %d -c fsync=off -c shared_buffers=16MB" % (pgdir, port), "start"])
    procs.pg_stop = lambda: subprocess.call([bindir + "/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            preexec_fn=preexec, cwd=pgdir)
    as_pg([bindir + "/psql", "-v", "ON_ERROR_STOP=1", "-qAt", "-h", pgdir, "-p", str(port), "-U", user, "-d",
           "postgres", "-c", 'CREATE DATABASE "%s" OWNER "%s"' % (db, user)])
    log("PostgreSQL (%s) on 127.0.0.1:%d: role %s, database %s, scram-sha-256" % (bindir, port, user, db))
    return port


def body():
    dc = need("docker-compose", "Debian package docker-compose merges the compose files")
    am_bin = need("prometheus-alertmanager", "Debian package prometheus-alertmanager")
    prom_bin = need("prometheus", "Debian package prometheus")
    r = run([dc, "-f", "compose.yaml", "-f", "compose.replicas.yaml", "config"], cwd=DOCKER)
    c = yaml.safe_load(r.stdout)
    svcs = c["services"]
    engines = sorted(n for n, s in svcs.items() if any(a.startswith("--replica-id=") for a in s.get("command", [])))
    check(len(engines) >= 2, "compose.replicas.yaml has %d replica(s)" % len(engines))
    stack = open(os.path.join(DOCKER, "stack.sh")).read()
    procs = Procs("stack-replicas")
    procs.pg_stop = procs.pg_dir = None
    failed = True
    try:
        tree, tokens = install_stack(procs, BUILD)

        # The database, and the engines' password file as stack.sh writes it.
        first = dict(a.split("=", 1) for a in svcs[engines[0]]["command"] if "=" in a)
        user, host, pg_port, db = re.fullmatch(r"postgresql://([\w-]+)@([\w.-]+):(\d+)/([\w-]+)",
                                               first["--db"]).groups()
        password = os.urandom(32).hex()
        port = start_postgres(procs, user, db, password)
        fmt = re.search(r"printf '([^']*)\\n' \"\$\(head -n1 \.secrets/db-password\)\" >\.secrets/pgpass\.tmp",
                        stack)
        check(fmt, "stack.sh's pgpass line not found")
        pgpass = os.path.join(procs.dir, "pgpass")
        with open(pgpass, "w") as f:
            f.write((fmt.group(1) % password).replace("%s:%s:" % (host, pg_port), "127.0.0.1:%d:" % port) + "\n")
        os.chmod(pgpass, 0o600)

        am_port = free_port()
        am_args = []
        for a in svcs["alertmanager"]["command"]:
            k, _, v = a.partition("=")
            v = {"--config.file": os.path.join(DOCKER, "alertmanager", "alertmanager.yml"),
                 "--storage.path": os.path.join(procs.dir, "alertmanager"),
                 "--web.listen-address": "127.0.0.1:%d" % am_port}.get(k, v)
            am_args.append("%s=%s" % (k, v))
        procs.spawn("alertmanager", [am_bin] + am_args)
        am_url = "http://127.0.0.1:%d" % am_port
        wait_for(lambda: http_json(am_url + "/api/v2/status"), 30, "Alertmanager to answer")

        # The replicas, one after the other (the first creates the schema).
        # The one that compose.yaml already has runs with the command that
        # podman-compose 1.0 gives it (compose.yaml's, then the overlay's:
        # the last value of each flag must win); the others with docker
        # compose's merge.
        grpc = {n: free_port() for n in engines}
        addr_of = {"%s:7441" % n: "127.0.0.1:%d" % grpc[n] for n in engines}
        running = {}
        raw = [yaml.safe_load(open(os.path.join(DOCKER, f)))["services"]
               for f in ("compose.yaml", "compose.replicas.yaml")]
        for n in engines:
            command = svcs[n]["command"]
            if n in raw[0]:
                command = [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", a)
                           for a in raw[0][n]["command"] + raw[1][n]["command"]]
            args = []
            for a in command:
                k, _, v = a.partition("=")
                if k == "--db":
                    v = ("postgresql://%s@127.0.0.1:%d/%s" % (user, port, db) if v.startswith("postgresql://")
                         else os.path.join(procs.dir, "%s.db" % n))
                v = {"--listen": "127.0.0.1:%d" % grpc[n], "--metrics-addr": "127.0.0.1:0",
                     "--advertise-addr": addr_of.get(v, v), "--alertmanager-url": am_url,
                     "--window-s": WINDOW_S}.get(k, v)
                if k.endswith("-token-file"):
                    v = tokens[k[2:-len("-token-file")]]
                args.append("%s=%s" % (k, v))
            env = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_", "PG")) and k != "LD_PRELOAD"}
            check(svcs[n]["environment"].get("PGPASSFILE"), "%s has no PGPASSFILE" % n)
            env["PGPASSFILE"] = pgpass
            p = procs.spawn(n, [os.path.join(tree, "bin", "xpu-engine")] + args, env=env)
            gport, mport = engine_ports(procs, p)
            running[n] = (p, gport, mport)
            log("%s: %s%s" % (n, " ".join(a for a in args if a.startswith(("--replica-id", "--advertise", "--db"))),
                               " (podman-compose's appended command)" if n in raw[0] else ""))

        prom_dir = os.path.join(procs.dir, "prometheus")
        shutil.copytree(os.path.join(DOCKER, "prometheus"), prom_dir)
        cfg_name = [a.split("=", 1)[1] for a in svcs["prometheus"]["command"] if a.startswith("--config.file=")][0]
        # The file mounted there (compose.replicas.yaml's, over compose.yaml's).
        src = [v.split(":")[0] for v in svcs["prometheus"]["volumes"] if v.split(":")[1] == cfg_name]
        check(len(src) == 1, "Prometheus's %s mounted from %s" % (cfg_name, src))
        cfg_path = os.path.join(prom_dir, os.path.basename(src[0]))
        cfg = open(cfg_path).read()
        targets = {}
        for n in engines:
            targets["127.0.0.1:%d" % running[n][2]] = n
            cfg = cfg.replace('"%s:9464"' % n, '"127.0.0.1:%d"' % running[n][2])
        cfg = cfg.replace("alertmanager:9093", "127.0.0.1:%d" % am_port)
        cfg = cfg.replace("scrape_interval: 10s", "scrape_interval: 2s").replace(
            "evaluation_interval: 10s", "evaluation_interval: 2s")
        with open(cfg_path, "w") as f:
            f.write(cfg)
        log("Prometheus with %s" % os.path.relpath(src[0], REPO))
        prom_port = free_port()
        prom_args = []
        for a in svcs["prometheus"]["command"]:
            k, _, v = a.partition("=")
            v = {"--config.file": cfg_path, "--storage.tsdb.path": os.path.join(procs.dir, "tsdb"),
                 "--web.listen-address": "127.0.0.1:%d" % prom_port}.get(k, v)
            prom_args.append("%s=%s" % (k, v))
        procs.spawn("prometheus", [prom_bin] + prom_args)
        prom_url = "http://127.0.0.1:%d" % prom_port
        wait_for(lambda: http_json(prom_url + "/api/v1/status/buildinfo"), 30, "Prometheus to answer")

        # The demo job, its daemon given every replica as stack.sh --replicas does.
        m = re.search(r"export XPU_DEMO_ENGINE=\$\{XPU_DEMO_ENGINE:-(.*)\}$", stack, re.M)
        check(m, "stack.sh --replicas does not give the demo job the replicas")
        listed = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", m.group(1)).split(",")
        check(sorted(listed) == sorted(addr_of), "stack.sh gives the daemon %s; replicas at %s" % (
            listed, sorted(addr_of)))
        job = "stack-replicas-%d" % os.getpid()
        env = {k: v for k, v in os.environ.items() if not k.startswith("XPU_") and k != "LD_PRELOAD"}
        env.update(XPU_ENGINE=",".join(addr_of[a] for a in listed), XPU_TOKEN_FILE=tokens["ingest"],
                   XPU_DEMO_SECONDS="240", XPU_DEMO_JOB=job, XPU_DEMO_SLOW_RANK=str(SLOW_RANK))
        demo = procs.spawn("demo-job", [os.path.join(tree, "share/xputimer/demo/xpu-demo-job")], env=env)
        log("demo job %s, its daemon --engine %s" % (job, env["XPU_ENGINE"]))

        def records(n):
            return metric(http_get("http://127.0.0.1:%d/metrics" % running[n][2]), "xpu_ingest_records_total",
                          xpu_job=job) or 0

        def owner():
            check(demo.poll() is None, "the demo job ended")
            have = [n for n in engines if n in running and records(n) > 0]
            return have if have else None
        have = wait_for(owner, 90, "a replica to ingest the job's records", 0.5)
        check(len(have) == 1, "the job's records reach %s, not one replica" % have)
        serving = have[0]

        # The slow rank's alert (on 2 busy cores a healthy rank is now and
        # then found slow for a window or two: other subjects are only shown).
        subject = "rank:%d" % SLOW_RANK

        def engine_alerts(all_subjects=False):
            return [a for a in http_json(am_url + "/api/v2/alerts?active=true")
                    if a["labels"].get("alertname") == "xpu_slow_gpu" and a["labels"].get("xpu_job") == job and
                    (all_subjects or a["labels"].get("subject") == subject)]
        alerts = wait_for(engine_alerts, 150, "xpu_slow_gpu of job %s, %s, in Alertmanager" % (job, subject), 1)
        check(alerts[0]["labels"]["team"] == "operations", "team %s" % alerts[0]["labels"])
        others = [n for n in engines if n != serving]
        check(all(records(n) == 0 for n in others), "another replica ingested records of the job")
        log("%s serves the job; xpu_slow_gpu in Alertmanager (team operations); %s hold none of its records" % (
            serving, ", ".join(others)))

        # The serving replica dies.
        p = running.pop(serving)[0]
        os.killpg(p.pid, signal.SIGKILL)
        t_kill = time.monotonic()
        p.wait(10)
        served = {}

        def moved():
            check(demo.poll() is None, "the demo job ended before a replica took it over")
            now = time.monotonic() - t_kill
            for n in others:
                text = http_get("http://127.0.0.1:%d/metrics" % running[n][2])
                if "records" not in served and (metric(text, "xpu_ingest_records_total", xpu_job=job) or 0) > 0:
                    served["records"] = (n, now)
                if "diagnosis" not in served and (metric(text, "xpu_diagnosis_active", xpu_job=job,
                                                         kind="slow_gpu") or 0) >= 1:
                    served["diagnosis"] = (n, now)
            return len(served) == 2 or None
        wait_for(moved, 60, "a live replica to take the job over (records and diagnosis)", 0.2)
        log("failover: %s ingested the job's records %.1f s and reported slow_gpu %.1f s after %s was SIGKILLed "
            "(--window-s %s, lease TTL its default)" % (served["records"][0], served["records"][1],
                                                        served["diagnosis"][1], serving, WINDOW_S))
        new = served["records"][0]
        cli = os.path.join(tree, "bin", "xpu")

        def diagnose():
            r = run([cli, "--engine", "127.0.0.1:%d" % running[new][1], "--token-file", tokens["read"], "diagnose",
                     "--job", job, "--json"], check_rc=False)
            ds = [d for d in json.loads(r.stdout)["diagnoses"] if d["kind"] == "slow_gpu" and
                  d["ranks"] == [SLOW_RANK]] if r.returncode == 0 else []
            return ds[0] if ds else None
        d = wait_for(diagnose, 30, "slow_gpu in xpu diagnose at %s" % new, 1)
        check(d["ranks"] == [SLOW_RANK] and d["team"] == "operations", "xpu diagnose at %s: %s" % (new, d))
        # Still active, with the same identity (severity may have risen
        # as the diagnosis went on: a label of its own).
        def ident(a):
            return {k: v for k, v in a["labels"].items() if k != "severity"}
        after = engine_alerts()
        check(after and all(ident(a) == ident(alerts[0]) for a in after),
              "Alertmanager holds %s for %s after the failover, before %s" % (
                  [a["labels"] for a in after], subject, alerts[0]["labels"]))
        extra = [a["labels"].get("subject") for a in engine_alerts(True) if a["labels"].get("subject") != subject]
        log("xpu diagnose at %s: slow_gpu ranks %s team %s; Alertmanager: the %s alert of the job still active "
            "(severity %s before, %s after)%s" % (
                new, d["ranks"], d["team"], subject, alerts[0]["labels"].get("severity"),
                sorted(a["labels"].get("severity") for a in after),
                "; also slow_gpu on %s (busy cores)" % extra if extra else ""))

        def scraped():
            res = http_json(prom_url + "/api/v1/query?query=up%7Bjob%3D%22xpu-engine%22%7D")["data"]["result"]
            up = {targets.get(x["metric"]["instance"]): x["value"][1] for x in res}
            want = {n: ("1" if n in running else "0") for n in engines}
            return up if up == want else None
        up = wait_for(scraped, 60, "Prometheus to see the killed replica down and the others up", 1)
        log("Prometheus: up{job=xpu-engine} %s" % up)
        failed = False
    finally:
        if procs.pg_stop:
            procs.pg_stop()
        if procs.pg_dir and not failed and os.environ.get("XPU_DEPLOY_KEEP") != "1":
            shutil.rmtree(procs.pg_dir, ignore_errors=True)
        elif procs.pg_dir:
            print("kept %s" % procs.pg_dir)
        procs.close(failed)


if __name__ == "__main__":
    main("stack_replicas_e2e", body)
