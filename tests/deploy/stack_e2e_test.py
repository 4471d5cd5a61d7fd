#!/usr/bin/env python3
"""The one-command stack end to end: a GPU-less job with a slow GPU is
diagnosed, and the diagnosis reaches Alertmanager with its team.

usage: stack_e2e_test.py BUILD_DIR host|containers

containers  `podman run` of the demo image (its own 8-rank demo), then
            docker/stack.sh demo (compose.yaml + compose.demo.yaml) with
            podman-compose on free host ports, from the
            images of `make images`; skipped, saying so, when a tool or an
            image is missing. Grafana runs only when its image is there.
host        the same services as processes of this host, started from the
            same files: the engine with compose.yaml's flags, Debian's
            prometheus with docker/prometheus/ (targets moved to the free
            loopback ports), Debian's prometheus-alertmanager with
            docker/alertmanager/alertmanager.yml, and the demo job
            (docker/demo/xpu-demo-job from `make install-demo`).

Both check, within a time limit:
  - Alertmanager holds xpu_slow_gpu for the demo job with team=operations,
    routed to the receiver operations (/api/v2/alerts);
  - Prometheus scrapes the engine (up == 1) and fires XPUTimerDiagnosisActive
    with team operations and kind slow_gpu, which Alertmanager receives and
    inhibits while the engine's own alert fires;
  - `xpu diagnose` (with the stack's token) names slow_gpu on rank 2.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_util import (REPO, install_stack, Failure, Procs, check, engine_ports, free_port, http_json, log,  # noqa: E402
                         main, need, podman_settings, run, skip, wait_for)

import yaml  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
MODE = sys.argv[2]
DOCKER = os.path.join(REPO, "docker")
SLOW_RANK = 2
WINDOW_S = "2"


def check_alerts(am_url, prom_url, job, diagnose):
    """The checks of both modes; am_url and prom_url are http://host:port."""
    def engine_alert():
        for a in http_json(am_url + "/api/v2/alerts"):
            l = a["labels"]
            if l.get("alertname") == "xpu_slow_gpu" and l.get("xpu_job") == job:
                return a
        return None
    a = wait_for(engine_alert, 150, "xpu_slow_gpu of job %s in Alertmanager" % job, 1)
    check(a["labels"]["team"] == "operations", "team %s" % a["labels"])
    receivers = [r["name"] for r in a["receivers"]]
    check(receivers == ["operations"], "routed to %s" % receivers)
    log("Alertmanager: %s team=%s ranks=%s -> receiver %s (%s)" % (
        a["labels"]["alertname"], a["labels"]["team"], a["annotations"].get("ranks"), receivers[0],
        a["annotations"].get("summary")))

    def engine_up():
        r = http_json(prom_url + "/api/v1/query?query=up%7Bjob%3D%22xpu-engine%22%7D")["data"]["result"]
        return r and r[0]["value"][1] == "1"
    wait_for(engine_up, 60, "Prometheus to scrape the engine (up == 1)", 1)

    def prom_alert():
        for a in http_json(prom_url + "/api/v1/alerts")["data"]["alerts"]:
            l = a["labels"]
            if (l.get("alertname") == "XPUTimerDiagnosisActive" and l.get("xpu_job") == job and
                    l.get("kind") == "slow_gpu" and a["state"] == "firing"):
                return a
        return None
    pa = wait_for(prom_alert, 90, "XPUTimerDiagnosisActive firing in Prometheus", 1)
    check(pa["labels"].get("team") == "operations", "Prometheus alert labels %s" % pa["labels"])
    log("Prometheus: up{job=xpu-engine} 1; XPUTimerDiagnosisActive firing (team %s, kind %s)" % (
        pa["labels"]["team"], pa["labels"]["kind"]))

    # Alertmanager marks an alert inhibited when its group is processed
    # (after group_wait).
    seen = {}

    # The engine's alerts of the job: one per subject (on 2 busy cores a
    # healthy rank is now and then found slow for a window too); the copy is
    # inhibited by one of them.
    def inhibited():
        src, copy = {}, None
        for a in http_json(am_url + "/api/v2/alerts?inhibited=true"):
            l = a["labels"]
            if l.get("xpu_job") == job and l.get("kind") == "slow_gpu":
                seen[l["alertname"]] = a["status"]
                if l["alertname"] == "xpu_slow_gpu":
                    src[a["fingerprint"]] = a
                elif (l["alertname"] == "XPUTimerDiagnosisActive" and a["status"]["state"] == "suppressed" and
                      a["status"]["inhibitedBy"]):
                    copy = a
        return (copy, src) if copy else None
    try:
        ia, src = wait_for(inhibited, 90, "XPUTimerDiagnosisActive to be inhibited in Alertmanager", 1)
    except Failure:
        raise Failure("Prometheus's copy not inhibited: %s" % (seen or "never received"))
    check(set(ia["status"]["inhibitedBy"]) & set(src), "inhibited by %s, not by an xpu_slow_gpu alert %s" % (
        ia["status"]["inhibitedBy"], sorted(src)))
    log("Alertmanager: XPUTimerDiagnosisActive %s, inhibited by the engine's alert" % ia["status"]["state"])

    d = wait_for(diagnose, 30, "slow_gpu in xpu diagnose", 1)
    check(d["ranks"] == [SLOW_RANK] and d["team"] == "operations", "xpu diagnose: %s" % d)
    log("xpu diagnose: slow_gpu ranks %s team %s" % (d["ranks"], d["team"]))


def host_mode():
    am_bin = need("prometheus-alertmanager", "Debian package prometheus-alertmanager")
    prom_bin = need("prometheus", "Debian package prometheus")
    compose = yaml.safe_load(open(os.path.join(DOCKER, "compose.yaml")))
    procs = Procs("stack-host")
    failed = True
    try:
        tree, tokens = install_stack(procs, BUILD)

        am_port = free_port()
        am_args = []
        for a in compose["services"]["alertmanager"]["command"]:
            k, _, v = a.partition("=")
            v = {"--config.file": os.path.join(DOCKER, "alertmanager", "alertmanager.yml"),
                 "--storage.path": os.path.join(procs.dir, "alertmanager"),
                 "--web.listen-address": "127.0.0.1:%d" % am_port}.get(k, v)
            am_args.append("%s=%s" % (k, v))
        procs.spawn("alertmanager", [am_bin] + am_args)
        am_url = "http://127.0.0.1:%d" % am_port
        wait_for(lambda: http_json(am_url + "/api/v2/status"), 30, "Alertmanager to answer")

        eng_args = []
        for a in compose["services"]["xpu-engine"]["command"]:
            k, _, v = a.partition("=")
            v = {"--listen": "127.0.0.1:0", "--metrics-addr": "127.0.0.1:0",
                 "--db": os.path.join(procs.dir, "engine.db"),
                 "--alertmanager-url": am_url}.get(k, v)
            if k.endswith("-token-file"):
                v = tokens[k[2:-len("-token-file")]]
            eng_args.append("%s=%s" % (k, v.replace("${XPU_WINDOW_S:-10}", WINDOW_S)))
        engine = procs.spawn("engine", [os.path.join(tree, "bin", "xpu-engine")] + eng_args)
        port, mport = engine_ports(procs, engine)
        log("engine %s (compose.yaml's flags, loopback ports %d/%d)" % (" ".join(eng_args), port, mport))

        prom_dir = os.path.join(procs.dir, "prometheus")
        shutil.copytree(os.path.join(DOCKER, "prometheus"), prom_dir)
        cfg = open(os.path.join(prom_dir, "prometheus.yml")).read()
        cfg = cfg.replace("xpu-engine:9464", "127.0.0.1:%d" % mport).replace("alertmanager:9093", "127.0.0.1:%d" % am_port)
        cfg = cfg.replace("scrape_interval: 10s", "scrape_interval: 2s").replace(
            "evaluation_interval: 10s", "evaluation_interval: 2s")
        with open(os.path.join(prom_dir, "prometheus.yml"), "w") as f:
            f.write(cfg)
        prom_port = free_port()
        prom_args = []
        for a in compose["services"]["prometheus"]["command"]:
            k, _, v = a.partition("=")
            v = {"--config.file": os.path.join(prom_dir, "prometheus.yml"),
                 "--storage.tsdb.path": os.path.join(procs.dir, "tsdb"),
                 "--web.listen-address": "127.0.0.1:%d" % prom_port}.get(k, v)
            prom_args.append("%s=%s" % (k, v))
        procs.spawn("prometheus", [prom_bin] + prom_args)
        prom_url = "http://127.0.0.1:%d" % prom_port
        wait_for(lambda: http_json(prom_url + "/api/v1/status/buildinfo"), 30, "Prometheus to answer")
        log("Prometheus %s, Alertmanager %s (Debian's, from docker/prometheus and docker/alertmanager)" % (
            prom_url, am_url))

        job = "stack-demo-%d" % os.getpid()
        env = {k: v for k, v in os.environ.items() if not k.startswith("XPU_") and k != "LD_PRELOAD"}
        env.update(XPU_ENGINE="127.0.0.1:%d" % port, XPU_TOKEN_FILE=tokens["ingest"], XPU_DEMO_SECONDS="300",
                   XPU_DEMO_JOB=job, XPU_DEMO_SLOW_RANK=str(SLOW_RANK))
        procs.spawn("demo-job", [os.path.join(tree, "share/xputimer/demo/xpu-demo-job")], env=env)
        cli = os.path.join(tree, "bin", "xpu")

        def diagnose():
            r = run([cli, "--engine", "127.0.0.1:%d" % port, "--token-file", tokens["read"], "diagnose", "--job", job,
                     "--json"], check_rc=False)
            ds = [d for d in json.loads(r.stdout)["diagnoses"] if d["kind"] == "slow_gpu" and
                  d["ranks"] == [SLOW_RANK]] if r.returncode == 0 else []
            return ds[0] if ds else None
        check_alerts(am_url, prom_url, job, diagnose)
        log("Grafana: not run here (not packaged by Debian); its provisioning is checked by deploy_grafana_check")
        failed = False
    finally:
        procs.close(failed)


def containers_mode():
    need("podman", "make image-deps")
    need("podman-compose", "make image-deps")
    version = re.search(r"project\(xputimer VERSION ([0-9.]+)", open(os.path.join(REPO, "CMakeLists.txt")).read()).group(1)
    env_files = {}
    for f in (os.path.join(DOCKER, ".local-bases", "images.env"), os.path.join(DOCKER, "base-images.env")):
        if os.path.exists(f):
            for l in open(f):
                if "=" in l and not l.startswith("#"):
                    k, v = l.strip().split("=", 1)
                    env_files.setdefault(k, v)
    images = {"engine": "localhost/xputimer-engine:" + version, "demo": "localhost/xputimer-demo:" + version,
              "prometheus": env_files["PROMETHEUS_IMAGE"], "alertmanager": env_files["ALERTMANAGER_IMAGE"]}
    for name, img in images.items():
        if subprocess.run(["podman", "image", "exists", img]).returncode != 0:
            skip("image %s (%s) not built or pulled: run `make images` first" % (img, name))
    gargs, rargs = podman_settings(images["engine"])
    # The demo image alone: tools/demo.sh on its install tree, as user demo.
    r = run(["podman"] + gargs + ["run", "--rm"] + rargs + [images["demo"]], check_rc=False, timeout=300)
    check(r.returncode == 0 and "==> done: ran on the GPU-less test runtime" in r.stdout,
          "podman run %s (rc %d):\n%s" % (images["demo"], r.returncode, r.stdout[-3000:]))
    log("podman run %s: %s" % (images["demo"], [l for l in r.stdout.splitlines() if l.startswith("==> done")][0]))
    services = ["xpu-engine", "prometheus", "alertmanager", "demo-job"]
    grafana = subprocess.run(["podman", "image", "exists", env_files["GRAFANA_IMAGE"]]).returncode == 0
    if grafana:
        services.append("grafana")
    else:
        log("Grafana: image %s not here and no registry reachable: the stack runs without it "
            "(provisioning checked by deploy_grafana_check)" % env_files["GRAFANA_IMAGE"])
    project = "xputimer-test-%d" % os.getpid()
    ports = {k: free_port() for k in ("XPU_ENGINE_PORT", "XPU_METRICS_PORT", "XPU_PROMETHEUS_PORT",
                                      "XPU_ALERTMANAGER_PORT", "XPU_GRAFANA_PORT")}
    env = dict(os.environ, XPU_STACK_PROJECT=project, XPU_COMPOSE="podman-compose", XPU_WINDOW_S=WINDOW_S,
               XPU_DEMO_SECONDS="400", XPU_DEMO_JOB=project, XPU_DEMO_SLOW_RANK=str(SLOW_RANK),
               XPU_PODMAN_ARGS=" ".join(gargs), XPU_PODMAN_RUN_ARGS=" ".join(rargs),
               **{k: str(v) for k, v in ports.items()})
    stack = os.path.join(DOCKER, "stack.sh")
    t0 = time.time()
    try:
        r = run([stack, "demo"] + services, env=env, check_rc=False, timeout=400)
        log("docker/stack.sh demo %s: rc %d in %.0f s" % (" ".join(services), r.returncode, time.time() - t0))
        check(r.returncode == 0, "stack.sh demo failed:\n%s" % r.stdout[-3000:])
        am_url = "http://127.0.0.1:%d" % ports["XPU_ALERTMANAGER_PORT"]
        prom_url = "http://127.0.0.1:%d" % ports["XPU_PROMETHEUS_PORT"]
        wait_for(lambda: http_json(am_url + "/api/v2/status"), 90, "Alertmanager to answer", 1)
        health = wait_for(lambda: "ok" in subprocess.run(
            ["curl", "-sf", "http://127.0.0.1:%d/healthz" % ports["XPU_METRICS_PORT"]],
            stdout=subprocess.PIPE, text=True).stdout, 60, "engine /healthz", 1)
        log("engine /healthz ok through the published port %d" % ports["XPU_METRICS_PORT"])

        def diagnose():
            r = run([stack, "xpu", "diagnose", "--job", project, "--json"], env=env, check_rc=False)
            ds = [d for d in json.loads(r.stdout)["diagnoses"] if d["kind"] == "slow_gpu" and
                  d["ranks"] == [SLOW_RANK]] if r.returncode == 0 else []
            return ds[0] if ds else None
        check_alerts(am_url, prom_url, project, diagnose)
        r = run([stack, "status"], env=env, check_rc=False)
        log("docker/stack.sh status:\n%s" % r.stdout.strip())
        if grafana:
            dash = wait_for(lambda: http_json("http://admin:admin@127.0.0.1:%d/api/search?type=dash-db" %
                                              ports["XPU_GRAFANA_PORT"]), 60, "Grafana's dashboards", 1)
            check(len(dash) >= 3, "Grafana lists %s" % dash)
            log("Grafana lists %s" % [d["title"] for d in dash])
    except Failure:
        for svc in services:
            r = run(["podman"] + gargs + ["logs", "--tail", "30", "%s_%s_1" % (project, svc)], check_rc=False,
                    timeout=60)
            print("----- %s -----\n%s" % (svc, "\n".join(l for l in r.stdout.splitlines() if " step " not in l)))
        raise
    finally:
        r = run([stack, "down", "-v"], env=env, check_rc=False, timeout=300)
        log("docker/stack.sh down -v: rc %d" % r.returncode)


if __name__ == "__main__":
    main("stack_e2e_" + MODE, host_mode if MODE == "host" else containers_mode)
