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
  - the demo job's program is where install-demo puts it;
  - engine replicas (compose.yaml + compose.replicas.yaml, merged by
    docker-compose config): two or more engines, each with its own
    --replica-id and an --advertise-addr naming its own service and gRPC
    port; the --db URL names the postgres service, its role and database,
    and no password; the engines read the password from PGPASSFILE, a
    secret made by stack.sh (0600, the engines' user), the server from
    POSTGRES_PASSWORD_FILE, another; the server's data is a volume and its
    port is not published; Prometheus scrapes every replica and alerts the
    shared Alertmanager; the demo job's daemon (stack.sh --replicas) is
    given every replica; the PostgreSQL stand-in image is built by
    build-images.sh and named where stack.sh finds it.
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
    for files in (["compose.yaml"], ["compose.yaml", "compose.demo.yaml"], ["compose.yaml", "compose.replicas.yaml"],
                  ["compose.yaml", "compose.replicas.yaml", "compose.demo.yaml"]):
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

    check_replicas(known)


def merged(files, env=None):
    """docker-compose config of FILES: the merged model, paths made absolute."""
    dc = need("docker-compose", "Debian package docker-compose validates against the Compose schema")
    e = dict(os.environ)
    e.update(env or {})
    r = run([dc] + sum((["-f", f] for f in files), []) + ["config"], cwd=DOCKER, env=e)
    return yaml.safe_load(r.stdout)


def mount(v):
    """(source, target) of a volume entry of docker-compose config (short or long form)."""
    if isinstance(v, dict):
        return v.get("source"), v.get("target")
    parts = v.split(":")
    return parts[0], parts[1]


def flag_map(command):
    out = {}
    for a in command:
        k, _, v = a.partition("=")
        out[k] = v
    return out


def podman_compose_merged(files):
    """The services as podman-compose merges FILES (its own functions), or
    None where its module is not installed."""
    try:
        import podman_compose
    except ImportError:
        return None
    compose = {}
    for f in files:
        content = podman_compose.normalize(yaml.safe_load(open(os.path.join(DOCKER, f))))
        content = podman_compose.rec_subs(content, dict(os.environ))
        podman_compose.rec_merge(compose, content)
    return compose["services"]


def effective(command):
    """Flags as xpu-engine reads them: the last value of a flag given twice wins."""
    out = {}
    for a in command:
        k, _, v = a.partition("=")
        out[k] = v
    return out


def check_replicas(engine_flags_known):
    """The multi-replica layout: compose.yaml + compose.replicas.yaml."""
    files = ["compose.yaml", "compose.replicas.yaml"]
    c = merged(files)
    svcs = c["services"]
    engines = {n: s for n, s in svcs.items() if any(a.startswith("--replica-id=") for a in s.get("command", []))}
    check(len(engines) >= 2, "compose.replicas.yaml runs %d engine replica(s): %s" % (len(engines), sorted(engines)))
    check(not [n for n, s in svcs.items() if "engine" in s.get("image", "") and n not in engines],
          "an engine service without --replica-id beside the replicas")
    ids, adverts, urls = {}, {}, set()
    secrets = c.get("secrets", {})
    secret_file = {k: os.path.relpath(v["file"], DOCKER) for k, v in secrets.items()}
    for name, s in sorted(engines.items()):
        f = flag_map(s["command"])
        for k in f:
            check(k[2:] in engine_flags_known, "%s: flag %s unknown to xpu-engine --help" % (name, k))
        ids[name] = f["--replica-id"]
        adverts[name] = f["--advertise-addr"]
        host, _, port = f["--advertise-addr"].rpartition(":")
        check(host == name and port == f["--listen"].rsplit(":", 1)[1],
              "%s advertises %s, not its own service and gRPC port %s" % (name, f["--advertise-addr"], f["--listen"]))
        url = f["--db"]
        urls.add(url)
        m = re.fullmatch(r"postgresql://([\w-]+)@([\w.-]+):(\d+)/([\w-]+)", url)
        check(m, "%s: --db %s is not postgresql://USER@HOST:PORT/DB without a password or options" % (name, url))
        env = s.get("environment", {})
        pgpass = env.get("PGPASSFILE", "")
        sec = os.path.basename(pgpass)
        check(pgpass == "/run/secrets/" + sec and sec in [x["source"] if isinstance(x, dict) else x
                                                          for x in s.get("secrets", [])],
              "%s: PGPASSFILE=%s is not one of its secrets" % (name, pgpass))
        check(secret_file.get(sec) == os.path.join(".secrets", "pgpass"), "%s: password file from %s" % (
            name, secret_file.get(sec)))
        for role in ROLES:
            check(f.get("--%s-token-file" % role) == "/run/secrets/xpu-" + role, "%s: --%s-token-file %s" % (
                name, role, f.get("--%s-token-file" % role)))
        check(f.get("--alertmanager-url") == "http://alertmanager:9093", "%s: Alertmanager %s" % (
            name, f.get("--alertmanager-url")))
        check("healthcheck" in s, "%s has no health check" % name)
        for p in s.get("ports", []):
            check(str(p).startswith("127.0.0.1:"), "%s publishes %s beyond XPU_BIND" % (name, p))
    check(len(set(ids.values())) == len(ids), "replica ids not distinct: %s" % ids)
    check(len(set(adverts.values())) == len(adverts), "advertise addresses not distinct: %s" % adverts)
    check(len(urls) == 1, "replicas on different databases: %s" % urls)
    published = [str(p).split(":")[1] for s in svcs.values() for p in s.get("ports", [])]
    check(len(published) == len(set(published)), "host ports published twice: %s" % published)
    user, host, port, db = re.fullmatch(r"postgresql://([\w-]+)@([\w.-]+):(\d+)/([\w-]+)", urls.pop()).groups()
    log("replicas: %s; --db postgresql://%s@%s:%s/%s (no password), PGPASSFILE from .secrets/pgpass" % (
        ", ".join("%s=%s@%s" % (n, ids[n], adverts[n]) for n in sorted(engines)), user, host, port, db))

    # The database server.
    check(host in svcs, "--db names host %s, which is no service" % host)
    pg = svcs[host]
    env = pg.get("environment", {})
    check(env.get("POSTGRES_USER") == user and env.get("POSTGRES_DB") == db,
          "postgres makes role %s, database %s; engines use %s, %s" % (
              env.get("POSTGRES_USER"), env.get("POSTGRES_DB"), user, db))
    check("POSTGRES_PASSWORD" not in env, "the database password is inlined in the compose file")
    pwfile = env.get("POSTGRES_PASSWORD_FILE", "")
    check(pwfile.startswith("/run/secrets/") and
          secret_file.get(os.path.basename(pwfile)) == os.path.join(".secrets", "db-password"),
          "postgres reads its password from %s" % pwfile)
    check(not pg.get("ports"), "PostgreSQL published on the host: %s" % pg.get("ports"))
    data = [mount(v) for v in pg.get("volumes", []) if mount(v)[1] == "/var/lib/postgresql/data"]
    check(data and data[0][0] in c["volumes"],
          "PostgreSQL data not in a volume: %s" % pg.get("volumes"))
    check("healthcheck" in pg, "postgres has no health check")
    for name, s in engines.items():
        dep = s.get("depends_on", {})
        check(host in dep, "%s does not wait for %s" % (name, host))
    bases = env_file(os.path.join(DOCKER, "base-images.env"))
    raw = yaml.safe_load(open(os.path.join(DOCKER, "compose.replicas.yaml")))
    check(raw["services"][host]["image"] == "${POSTGRES_IMAGE:-%s}" % bases["POSTGRES_IMAGE"],
          "postgres image %s vs base-images.env %s" % (raw["services"][host]["image"], bases["POSTGRES_IMAGE"]))
    for pat in (r"password\s*=", r"postgresql://[^@\s]*:[^@\s]*@"):
        for f in ("compose.yaml", "compose.replicas.yaml", "compose.demo.yaml"):
            check(not re.search(pat, open(os.path.join(DOCKER, f)).read(), re.I), "%s holds a password (%s)" % (f, pat))

    # stack.sh: the password files, private, in the formats the two sides read.
    stack = open(os.path.join(DOCKER, "stack.sh")).read()
    check("umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \\n' >.secrets/db-password.tmp" in stack,
          "stack.sh does not make .secrets/db-password privately")
    pgline = re.search(r"printf '([^']*)\\n' \"\$\(head -n1 \.secrets/db-password\)\" >\.secrets/pgpass\.tmp", stack)
    check(pgline and "umask 077 && printf" in stack, "stack.sh does not write .secrets/pgpass privately")
    check(pgline.group(1) == "%s:%s:%s:%s:%%s" % (host, port, db, user),
          "stack.sh's pgpass line %s does not match --db" % pgline.group(1))
    check("hand_over .secrets/pgpass" in stack, "stack.sh does not give .secrets/pgpass to the engines' user")
    check("compose.replicas.yaml" in stack and "--replicas)" in stack, "stack.sh has no --replicas")
    log("postgres: role %s, database %s, password from .secrets/db-password (POSTGRES_PASSWORD_FILE), data in "
        "volume %s, not published; stack.sh writes pgpass %s:%s:%s:%s:*" % (
            user, db, data[0][0], host, port, db, user))

    # Prometheus scrapes every replica, alerts the one Alertmanager.
    prom = svcs["prometheus"]
    cfg = [a.split("=", 1)[1] for a in prom["command"] if a.startswith("--config.file=")][0]
    src = [mount(v)[0] for v in prom["volumes"] if mount(v)[1] == cfg]
    check(len(src) == 1, "Prometheus reads %s, mounted from %s" % (cfg, src))
    pcfg = yaml.safe_load(open(src[0]))
    scrape = sorted(t for sc in pcfg["scrape_configs"] if sc["job_name"] == "xpu-engine"
                    for st in sc["static_configs"] for t in st["targets"])
    want = sorted("%s:%s" % (n, flag_map(s["command"])["--metrics-addr"].rsplit(":", 1)[1]) for n, s in engines.items())
    check(scrape == want, "Prometheus scrapes %s; the replicas' metrics are %s" % (scrape, want))
    am = [t for a in pcfg["alerting"]["alertmanagers"] for st in a["static_configs"] for t in st["targets"]]
    check(am == ["alertmanager:9093"], "Prometheus alerts %s" % am)
    rules = [v for v in prom["volumes"] if mount(v)[1] == "/etc/prometheus/rules"]
    check(pcfg["rule_files"] == ["rules/*.yml"] and rules and os.path.dirname(cfg) == "/etc/prometheus",
          "rules not loaded (%s, %s)" % (pcfg["rule_files"], rules))
    log("Prometheus (%s): scrapes %s, alerts %s" % (os.path.basename(src[0]), ", ".join(scrape), am[0]))

    # podman-compose 1.0 appends an overlay's command to the base's instead
    # of replacing it, and keeps one mount per target: what each service
    # then runs must be what docker compose runs.
    pc = podman_compose_merged(files)
    if pc is None:
        log("podman-compose's merge: module podman_compose not installed, not compared")
    else:
        for name in engines:
            check(effective(pc[name]["command"]) == effective(svcs[name]["command"]),
                  "%s under podman-compose runs %s" % (name, pc[name]["command"]))
        for name in svcs:
            got = sorted(str(v).rsplit(":", 1)[0] if str(v).count(":") > 1 else str(v)
                         for v in pc[name].get("volumes", []))
            targets = [g.split(":")[1] for g in got if ":" in g]
            check(len(targets) == len(set(targets)), "%s under podman-compose mounts %s" % (name, got))
        pm = [v for v in pc["prometheus"]["volumes"] if ":%s" % cfg in v]
        check(len(pm) == 1 and pm[0].startswith("./prometheus/" + os.path.basename(src[0])),
              "Prometheus under podman-compose reads %s" % pm)
        check(pc["prometheus"]["command"] == svcs["prometheus"]["command"], "Prometheus's command differs")
        log("podman-compose's merge (command lists appended): every replica's flags, last value winning, and "
            "every mount as docker compose has them")

    # The demo job's daemon, as stack.sh --replicas starts it.
    m = re.search(r"export XPU_DEMO_ENGINE=\$\{XPU_DEMO_ENGINE:-(.*)\}$", stack, re.M)
    check(m, "stack.sh --replicas does not give the demo job's daemon the replicas")
    demo_engines = interpolate(m.group(1), {})
    dm = merged(files + ["compose.demo.yaml"], {"XPU_DEMO_ENGINE": demo_engines})
    got = dm["services"]["demo-job"]["environment"]["XPU_ENGINE"]
    check(sorted(got.split(",")) == sorted(adverts.values()),
          "the demo job's daemon is given %s; the replicas advertise %s" % (got, sorted(adverts.values())))
    job = open(os.path.join(DOCKER, "demo", "xpu-demo-job")).read()
    check('--engine "$ENGINE" --insecure' in job, "xpu-demo-job's daemon does not follow plaintext redirects")
    log("demo job's daemon: --engine %s" % got)

    # The stand-in image of PostgreSQL.
    standins = open(os.path.join(DOCKER, "standins.Dockerfile")).read()
    bi = open(os.path.join(DOCKER, "build-images.sh")).read()
    check(re.search(r"^FROM \$\{BASE_IMAGE\} AS postgres$", standins, re.M) and "postgresql-15" in standins,
          "standins.Dockerfile has no postgres target from Debian's postgresql-15")
    check("COPY docker/postgres/xpu-postgres-entrypoint" in standins and
          os.access(os.path.join(DOCKER, "postgres", "xpu-postgres-entrypoint"), os.X_OK),
          "the stand-in's entrypoint is not copied or not executable")
    check("for t in prometheus alertmanager postgres; do" in bi and
          "POSTGRES_IMAGE=localhost/xputimer-postgres-debian:bookworm" in bi,
          "build-images.sh --standins does not build the PostgreSQL stand-in or name it in images.env")
    entry = open(os.path.join(DOCKER, "postgres", "xpu-postgres-entrypoint")).read()
    for var in ("POSTGRES_USER", "POSTGRES_DB", "POSTGRES_PASSWORD_FILE"):
        check(var in entry, "the stand-in's entrypoint ignores %s" % var)
    check("--auth-host=scram-sha-256" in entry and "trust" not in entry.split("--auth-host")[1].split("\n")[0],
          "the stand-in lets network clients in without a password")
    log("PostgreSQL stand-in: standins.Dockerfile target postgres, built by build-images.sh --standins")


if __name__ == "__main__":
    main("compose_check", body)
