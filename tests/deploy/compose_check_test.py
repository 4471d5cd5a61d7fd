#!/usr/bin/env python3
"""The compose stack's files agree with each other and with the programs.

usage: compose_check_test.py BUILD_DIR

  - docker-compose config (Debian's docker-compose carries the Compose
    specification's schema; no container engine needed) accepts
    compose.yaml alone and with compose.demo.yaml;
  - every bind-mounted file exists, every port is published on
    ${XPU_BIND:-127.0.0.1};
  - credentials: one secret per role (read, act, admin, ingest), each the
    file docker/stack.sh creates (0600, 0700 directory); the engine takes
    each with its role's flag (--read-token-file, ...; no shared
    --token-file); the demo job's daemon gets only the ingest token;
  - images: ours are the tags docker/build-images.sh gives (version from
    CMakeLists.txt), the others the defaults of base-images.env;
  - the engine's flags are flags of the built xpu-engine (--help), its
    Alertmanager URL names the alertmanager service and its port;
    prometheus.yml scrapes the engine service's metrics port and alerts the
    alertmanager service; Grafana's datasource URL and dashboard path are
    where the compose file puts Prometheus and the dashboards;
  - the demo job's program is where install-demo puts it.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_util import REPO, check, log, main, need, run  # noqa: E402

import yaml  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
DOCKER = os.path.join(REPO, "docker")


def interpolate(s, env):
    def sub(m):
        name, default = m.group(1), m.group(3) or ""
        return env.get(name, default)
    return re.sub(r"\$\{(\w+)(:-([^}]*))?\}", sub, s)


def env_file(path):
    out = {}
    for l in open(path):
        l = l.strip()
        if l and not l.startswith("#") and "=" in l:
            k, v = l.split("=", 1)
            out[k] = v
    return out


ROLES = ("read", "act", "admin", "ingest")


def check_credentials(c, demo):
    """A secret per role, made by stack.sh; the daemon (demo job) gets ingest only."""
    want = {"xpu-" + r: "./.secrets/" + r for r in ROLES}
    got = {k: v.get("file") for k, v in c["secrets"].items()}
    check(got == want, "secrets %s, want %s" % (got, want))
    engine = c["services"]["xpu-engine"]
    check(sorted(engine.get("secrets", [])) == sorted(want), "engine secrets %s" % engine.get("secrets"))
    job = demo["services"]["demo-job"]
    check(job.get("secrets") == ["xpu-ingest"], "demo job (a daemon) gets %s, want only xpu-ingest" %
          job.get("secrets"))
    check(job["environment"].get("XPU_TOKEN_FILE") == "/run/secrets/xpu-ingest",
          "demo job's XPU_TOKEN_FILE %s" % job["environment"].get("XPU_TOKEN_FILE"))
    check(not demo.get("secrets"), "compose.demo.yaml declares secrets of its own: %s" % demo.get("secrets"))
    # stack.sh makes exactly these files, private, and runs the CLI with a
    # role's token, never a shared one.
    stack = open(os.path.join(DOCKER, "stack.sh")).read()
    check("ROLES=(read act admin ingest)" in stack and '".secrets/$r"' in stack,
          "stack.sh does not create a token file per role")
    check("umask 077" in stack and "chmod 0700 .secrets" in stack, "stack.sh's token files are not private")
    check("/run/secrets/xpu-token" not in stack, "stack.sh still uses the shared token")
    used = set(re.findall(r"--token-file /run/secrets/(xpu-\w+)", stack))
    check(used and used <= set(want), "stack.sh's CLI uses %s" % used)
    uid = re.search(r"^XPU_UID=(\d+)$", stack, re.M)
    dockerfile = open(os.path.join(DOCKER, "Dockerfile")).read()
    check(uid and ("--uid %s " % uid.group(1)) in dockerfile,
          "stack.sh hands the tokens to uid %s, not the engine image's user" % (uid and uid.group(1)))
    check(job.get("user") == "%s:%s" % (uid.group(1), uid.group(1)),
          "demo job runs as %s, not the token files' owner %s" % (job.get("user"), uid.group(1)))
    log("credentials: %s; the demo job's daemon gets xpu-ingest only" % ", ".join(sorted(want)))


def body():
    dc = need("docker-compose", "Debian package docker-compose validates against the Compose schema")
    for files in (["compose.yaml"], ["compose.yaml", "compose.demo.yaml"]):
        argv = [dc] + sum((["-f", f] for f in files), []) + ["config", "-q"]
        r = run(argv, cwd=DOCKER, check_rc=False)
        check(r.returncode == 0, "docker-compose config %s:\n%s" % (files, r.stdout))
        log("docker-compose config -q %s: valid" % " ".join(files))
    c = yaml.safe_load(open(os.path.join(DOCKER, "compose.yaml")))
    demo = yaml.safe_load(open(os.path.join(DOCKER, "compose.demo.yaml")))
    svcs = c["services"]
    check(set(svcs) == {"xpu-engine", "prometheus", "alertmanager", "grafana"}, "services %s" % sorted(svcs))

    # Mounts, secrets, ports.
    for name, s in list(svcs.items()) + list(demo["services"].items()):
        for v in s.get("volumes", []):
            src = v.split(":")[0]
            if src.startswith("."):
                check(os.path.exists(os.path.join(DOCKER, src)), "%s mounts missing %s" % (name, src))
            else:
                check(src in c["volumes"], "%s mounts undeclared volume %s" % (name, src))
        for p in s.get("ports", []):
            check(p.startswith("${XPU_BIND:-127.0.0.1}:"), "%s publishes %s beyond XPU_BIND" % (name, p))
    check_credentials(c, demo)

    # Images.
    version = re.search(r"project\(xputimer VERSION ([0-9.]+)", open(os.path.join(REPO, "CMakeLists.txt")).read()).group(1)
    bases = env_file(os.path.join(DOCKER, "base-images.env"))
    images = {n: interpolate(s["image"], {}) for n, s in list(svcs.items()) + list(demo["services"].items())}
    check(images["xpu-engine"] == "localhost/xputimer-engine:" + version, "engine image %s" % images["xpu-engine"])
    check(images["demo-job"] == "localhost/xputimer-demo:" + version, "demo image %s" % images["demo-job"])
    bi = open(os.path.join(DOCKER, "build-images.sh")).read()
    check("${XPU_IMAGE_REPO:-localhost/xputimer}" in bi and '"$IMAGE_REPO-$t:$VERSION"' in bi,
          "build-images.sh names images differently from compose.yaml")
    for svc, var in (("prometheus", "PROMETHEUS_IMAGE"), ("alertmanager", "ALERTMANAGER_IMAGE"),
                     ("grafana", "GRAFANA_IMAGE")):
        check(svcs[svc]["image"] == "${%s:-%s}" % (var, bases[var]), "%s image %s vs base-images.env %s" % (
            svc, svcs[svc]["image"], bases[var]))
    log("images: %s" % ", ".join("%s=%s" % kv for kv in sorted(images.items())))

    # The engine's flags and its peers.
    engine = os.path.join(BUILD, "engine", "xpu-engine")
    check(os.access(engine, os.X_OK), "%s not built" % engine)
    helptext = subprocess.run([engine, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    known = set(re.findall(r"--([a-z][a-z0-9-]*)", helptext))
    flags = {}
    for a in svcs["xpu-engine"]["command"]:
        k, _, v = interpolate(a, {}).partition("=")
        check(k[2:] in known, "engine flag %s unknown to xpu-engine --help" % k)
        flags[k] = v
    check("--token-file" not in flags, "the engine takes a shared --token-file: %s" % flags)
    for role in ROLES:
        want = "/run/secrets/xpu-" + role
        check(flags.get("--%s-token-file" % role) == want, "--%s-token-file is %s, want %s" % (
            role, flags.get("--%s-token-file" % role), want))
    m = re.fullmatch(r"http://([\w-]+):(\d+)", flags["--alertmanager-url"])
    check(m and m.group(1) in svcs, "alertmanager URL %s names no service" % flags["--alertmanager-url"])
    am_listen = [a for a in svcs["alertmanager"]["command"] if a.startswith("--web.listen-address=")][0]
    check(am_listen.endswith(":" + m.group(2)), "alertmanager listens on %s, engine posts to %s" % (am_listen, m.group(0)))
    metrics_port = flags["--metrics-addr"].rsplit(":", 1)[1]
    prom = yaml.safe_load(open(os.path.join(DOCKER, "prometheus", "prometheus.yml")))
    scrape = [t for sc in prom["scrape_configs"] if sc["job_name"] == "xpu-engine"
              for st in sc["static_configs"] for t in st["targets"]]
    check(scrape == ["xpu-engine:%s" % metrics_port], "Prometheus scrapes %s, engine metrics on xpu-engine:%s" % (
        scrape, metrics_port))
    # The engine names the training job in xpu_job; `job` must stay the
    # scrape job's, so the engine's series are not allowed to override it.
    check(not any(sc.get("honor_labels") for sc in prom["scrape_configs"] if sc["job_name"] == "xpu-engine"),
          "honor_labels on xpu-engine: not needed (series carry xpu_job) and it would let targets rewrite `job`")
    am = [t for a in prom["alerting"]["alertmanagers"] for st in a["static_configs"] for t in st["targets"]]
    check(am == ["alertmanager:" + m.group(2)], "Prometheus alerts %s" % am)
    rules_mount = [v for v in svcs["prometheus"]["volumes"] if v.startswith("./prometheus/rules:")]
    check(rules_mount and prom["rule_files"] == ["rules/*.yml"] and
          rules_mount[0].split(":")[1] == "/etc/prometheus/rules", "rules mount %s / rule_files %s" % (
              rules_mount, prom["rule_files"]))
    log("engine flags known to xpu-engine; engine -> %s; Prometheus scrapes %s, alerts %s" % (
        m.group(0), scrape[0], am[0]))

    # Grafana.
    g = svcs["grafana"]
    ds = yaml.safe_load(open(os.path.join(DOCKER, "grafana/provisioning/datasources/prometheus.yaml")))
    url = ds["datasources"][0]["url"]
    check("XPU_PROMETHEUS_URL" in url and g["environment"]["XPU_PROMETHEUS_URL"] == "http://prometheus:9090",
          "Grafana datasource %s with XPU_PROMETHEUS_URL=%s" % (url, g["environment"].get("XPU_PROMETHEUS_URL")))
    prov = yaml.safe_load(open(os.path.join(DOCKER, "grafana/provisioning/dashboards/xpu.yaml")))
    path = prov["providers"][0]["options"]["path"]
    check(any(v.startswith("./grafana/dashboards:" + path) for v in g["volumes"]),
          "dashboards provider reads %s, compose mounts %s" % (path, g["volumes"]))
    check(any(v.startswith("./grafana/provisioning:/etc/grafana/provisioning") for v in g["volumes"]),
          "provisioning not mounted at /etc/grafana/provisioning")

    # Demo job.
    cmd = demo["services"]["demo-job"]["command"][0]
    check(cmd == "/opt/xputimer/share/xputimer/demo/xpu-demo-job", "demo command %s" % cmd)
    inst = open(os.path.join(DOCKER, "demo", "install-demo.sh")).read()
    check('"$HERE/xpu-demo-job" "$ROOT/share/xputimer/demo/"' in inst, "install-demo.sh does not install xpu-demo-job")
    check("PREFIX=/opt/xputimer" in open(os.path.join(DOCKER, "Dockerfile")).read(), "images not under /opt/xputimer")
    log("Grafana: datasource %s, dashboards at %s; demo job %s" % (url, path, cmd))


if __name__ == "__main__":
    main("compose_check", body)
