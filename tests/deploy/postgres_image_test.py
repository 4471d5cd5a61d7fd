#!/usr/bin/env python3
"""The compose stack's PostgreSQL image, run as compose.replicas.yaml runs it.

usage: postgres_image_test.py

With podman and the image POSTGRES_IMAGE (docker/.local-bases/images.env
after `make images --standins`, else base-images.env): a container with the
postgres service's environment, its password as a secret file (mode 0600,
as docker/stack.sh makes .secrets/db-password) and a fresh named volume for
the data. Checked: the service's health check passes; the role and
database of the engines' --db exist and take the password over TCP; a wrong
password is refused; the server runs as an unprivileged user and the
temporary copy of the password is gone; after a restart the data and the
password are still there. Skips, saying so, without podman or the image.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_util import REPO, check, log, main, need, podman_settings, run, skip, wait_for  # noqa: E402

import yaml  # noqa: E402

DOCKER = os.path.join(REPO, "docker")


def image_name():
    out = {}
    for f in (os.path.join(DOCKER, ".local-bases", "images.env"), os.path.join(DOCKER, "base-images.env")):
        if os.path.exists(f):
            for line in open(f):
                if "=" in line and not line.startswith("#"):
                    k, v = line.strip().split("=", 1)
                    out.setdefault(k, v)
    return out["POSTGRES_IMAGE"]


def body():
    need("podman", "make image-deps")
    image = image_name()
    if subprocess.run(["podman", "image", "exists", image]).returncode != 0:
        skip("image %s not built or pulled: run `make images` first" % image)
    svc = yaml.safe_load(open(os.path.join(DOCKER, "compose.replicas.yaml")))["services"]["postgres"]
    env = svc["environment"]
    engine = yaml.safe_load(open(os.path.join(DOCKER, "compose.replicas.yaml")))["services"]["xpu-engine"]
    url = [a.split("=", 1)[1] for a in engine["command"] if a.startswith("--db=")][0]
    m = re.search(r"postgresql://([\w-]+)@[^/]+/([\w-]+)", url.split(":-", 1)[-1])
    user, db = m.groups()
    gargs, rargs = podman_settings(image)
    name = "xpu-pg-test-%d" % os.getpid()
    volume = name + "-data"
    tmp = tempfile.mkdtemp(prefix="xpu-deploy-pgimg.")
    pwfile = os.path.join(tmp, "db-password")
    password = os.urandom(32).hex()
    with open(pwfile, "w") as f:
        f.write(password)
    os.chmod(pwfile, 0o600)
    podman = ["podman"] + gargs
    try:
        argv = podman + ["run", "-d", "--name", name] + rargs
        for k, v in env.items():
            argv += ["-e", "%s=%s" % (k, v)]
        argv += ["-v", "%s:%s:ro" % (pwfile, env["POSTGRES_PASSWORD_FILE"]),
                 "-v", "%s:/var/lib/postgresql/data" % volume, image]
        run(argv, timeout=120)
        health = svc["healthcheck"]["test"]
        check(health[0] == "CMD", "health check %s" % health)

        def healthy():
            return run(podman + ["exec", name] + health[1:], check_rc=False, timeout=30).returncode == 0
        t0 = time.time()
        wait_for(healthy, 90, "the postgres health check (%s)" % " ".join(health[1:]), 1)
        log("%s: healthy after %.0f s (%s)" % (image, time.time() - t0, " ".join(health[1:])))

        def psql(pw, sql):
            return run(podman + ["exec", "-e", "PGPASSWORD=" + pw, name, "psql", "-v", "ON_ERROR_STOP=1", "-qAt",
                                 "postgresql://%s@127.0.0.1:5432/%s" % (user, db), "-c", sql],
                       check_rc=False, timeout=30)
        r = psql(password, "SELECT current_user || ' ' || current_database(); "
                           "CREATE TABLE kept (x int); INSERT INTO kept VALUES (7441)")
        check(r.returncode == 0 and r.stdout.split()[:2] == [user, db], "password login: %s" % r.stdout)
        r = psql("wrong", "SELECT 1")
        check(r.returncode != 0 and "password authentication failed" in r.stdout, "a wrong password: %s" % r.stdout)
        log("role %s, database %s: the secret's password accepted over TCP (scram-sha-256), a wrong one refused" % (
            user, db))
        r = run(podman + ["exec", name, "sh", "-c", "awk '/^Uid:/ {print $2}' /proc/1/status; "
                          "ls -A /run/postgresql; stat -c '%u %a' /var/lib/postgresql/data"], timeout=30)
        lines = r.stdout.split("\n")
        check(lines[0].strip() != "0", "the server runs as root")
        check(".xpu-initdb-password" not in r.stdout, "the password's temporary copy is left: %s" % r.stdout)
        check(r.stdout.strip().splitlines()[-1].endswith(" 700"), "data directory mode: %s" % r.stdout)
        log("server uid %s, data directory %s, no copy of the password left" % (
            lines[0].strip(), r.stdout.strip().splitlines()[-1]))
        run(podman + ["restart", name], timeout=120)
        wait_for(healthy, 90, "postgres healthy after a restart", 1)
        r = psql(password, "SELECT x FROM kept")
        check(r.returncode == 0 and r.stdout.strip() == "7441", "after a restart: %s" % r.stdout)
        log("after a restart: the data and the password kept (volume %s)" % volume)
    finally:
        subprocess.run(podman + ["rm", "-f", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(podman + ["volume", "rm", "-f", volume], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        os.unlink(pwfile)
        os.rmdir(tmp)


if __name__ == "__main__":
    main("postgres_image", body)
