#!/usr/bin/env python3
"""`make install DESTDIR=...` and the installed programs at work.

usage: install_e2e_test.py BUILD_DIR

1. `make install-only BUILD=BUILD_DIR PREFIX=/usr/local DESTDIR=<tmp>` (what
   `make install` runs after building): every file a host needs is there,
   the units name this prefix's binaries, and no test runtime came along.
2. The engine and the daemon are started as xpu-engine.service and
   xpu-daemon.service start them (ExecStart= of the installed units with
   their variables, paths moved under DESTDIR, loopback ports the kernel
   picks), ExecStartPost= opens the socket, and a 4-rank GPU-less job under
   the installed libxpu_hook.so registers every rank with the engine, read
   back with the installed `xpu` CLI.
3. With no daemon running, the installed hook starts the installed daemon by
   itself (found next to the hook as <prefix>/bin/xpu-daemon).
4. The installed hook puts the installed Python side on sys.path.
5. `make install-demo` and the demo job of the compose stack
   (share/xputimer/demo/xpu-demo-job): a slow GPU on rank 2 is diagnosed by
   the engine as slow_gpu on rank 2, team operations.
"""
import glob
import json
import os
import re
import shlex
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_util import (REPO, Failure, Procs, check, engine_ports, log, main, run,  # noqa: E402
                         wait_for)

BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(REPO, "build")
PREFIX = "/usr/local"

EXPECTED = [
    "bin/xpu-engine", "bin/xpu-daemon", "bin/xpu", "bin/xpu-calibrate", "bin/xpu-ring-dump",
    "bin/xpu-hook-install",
    "lib/libxpu_hook.so", "lib/libnccl-profiler-xpu.so",
    "share/xputimer/python/sitecustomize.py", "share/xputimer/python/xputimer/__init__.py",
    "lib/systemd/system/xpu-engine.service", "lib/systemd/system/xpu-daemon.service",
    "lib/sysusers.d/xputimer.conf", "libexec/xputimer/xpu-daemon-socket-access",
    "share/xputimer/systemd/engine.env", "share/xputimer/systemd/daemon.env",
    "share/xputimer/grafana/provisioning/datasources/prometheus.yaml",
    "share/xputimer/grafana/provisioning/dashboards/xpu.yaml",
    "share/xputimer/prometheus/prometheus.yml", "share/xputimer/prometheus/rules/xputimer.rules.yml",
    "share/xputimer/alertmanager/alertmanager.yml",
]


def unit(path):
    """{key: [values]} of a unit file's [Service] section."""
    out = {}
    section = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]" and "=" in line:
                k, v = line.split("=", 1)
                out.setdefault(k, []).append(v)
    return out


def unit_env(u):
    env = {}
    for v in u.get("Environment", []):
        for word in shlex.split(v):
            k, val = word.split("=", 1)
            env[k] = val
    return env


def expand(cmdline, env):
    """systemd's $VAR (split into words) and ${VAR} (one word) expansion."""
    out = []
    for word in shlex.split(cmdline):
        m = re.fullmatch(r"\$(\w+)", word)
        if m:
            out.extend(env.get(m.group(1), "").split())
            continue
        out.append(re.sub(r"\$\{(\w+)\}", lambda g: env.get(g.group(1), ""), word))
    return out


def body():
    procs = Procs("install")
    failed = True
    try:
        root = os.path.join(procs.dir, "root")
        tree = root + PREFIX
        log("make install-only BUILD=%s PREFIX=%s DESTDIR=%s" % (BUILD, PREFIX, root))
        run(["make", "-C", REPO, "--no-print-directory", "install-only", "BUILD=" + BUILD,
             "PREFIX=" + PREFIX, "DESTDIR=" + root])
        for rel in EXPECTED:
            check(os.path.exists(os.path.join(tree, rel)), "not installed: %s%s/%s" % (root, PREFIX, rel))
        dashboards = glob.glob(os.path.join(tree, "share/xputimer/grafana/dashboards/*.json"))
        check(len(dashboards) == len(glob.glob(os.path.join(REPO, "docker/grafana/dashboards/*.json"))),
              "dashboards installed: %s" % dashboards)
        check(not glob.glob(os.path.join(tree, "**/libcudart*"), recursive=True) and
              not os.path.exists(os.path.join(tree, "bin/xpu-fake-train")),
              "the GPU-less test runtime was installed by make install")
        for rel in ("bin/xpu-engine", "bin/xpu-daemon", "bin/xpu", "libexec/xputimer/xpu-daemon-socket-access"):
            check(os.access(os.path.join(tree, rel), os.X_OK), "%s is not executable" % rel)
        log("installed: %d files" % sum(len(f) for _, _, f in os.walk(root)))

        eu = unit(os.path.join(tree, "lib/systemd/system/xpu-engine.service"))
        du = unit(os.path.join(tree, "lib/systemd/system/xpu-daemon.service"))
        check(eu["ExecStart"][0].startswith(PREFIX + "/bin/xpu-engine "), "engine ExecStart %s" % eu["ExecStart"])
        check(du["ExecStart"][0].startswith(PREFIX + "/bin/xpu-daemon "), "daemon ExecStart %s" % du["ExecStart"])
        check(du["ExecStartPost"][0].startswith(PREFIX + "/libexec/xputimer/xpu-daemon-socket-access "),
              "daemon ExecStartPost %s" % du["ExecStartPost"])
        check(eu.get("User") == ["xpu"] and eu.get("NoNewPrivileges") == ["yes"], "engine unit user/hardening")
        check(any(l.startswith("u xpu ") for l in open(os.path.join(tree, "lib/sysusers.d/xputimer.conf"))),
              "sysusers.d does not create the user xpu")

        # --- 2. engine and daemon as their units start them --------------------------------
        def moved(argv):
            return [root + a if a.startswith(PREFIX + "/") else a for a in argv]
        env = unit_env(eu)
        # engine.env's way of replacing the flags: loopback, ports picked by the kernel.
        db = os.path.join(procs.dir, "engine.db")
        env["XPU_ENGINE_ARGS"] = ("--listen=127.0.0.1:0 --metrics-addr=127.0.0.1:0 --db=%s --window-s=2" % db)
        engine_argv = moved(expand(eu["ExecStart"][0], env))
        log("engine: %s" % " ".join(engine_argv))
        engine = procs.spawn("engine", engine_argv)
        port, mport = engine_ports(procs, engine)
        addr = "127.0.0.1:%d" % port
        cli = os.path.join(tree, "bin/xpu")

        sock_dir = os.path.join(procs.dir, "run-xpu")
        os.mkdir(sock_dir, 0o755)  # RuntimeDirectory=xpu, RuntimeDirectoryMode=0755
        sock = os.path.join(sock_dir, "daemon.sock")
        denv = unit_env(du)
        denv["XPU_DAEMON_ARGS"] = "--engine=%s --flush-ms=500" % addr
        daemon_argv = [a.replace("/run/xpu/daemon.sock", sock) for a in moved(expand(du["ExecStart"][0], denv))]
        log("daemon: %s" % " ".join(daemon_argv))
        daemon = procs.spawn("daemon", daemon_argv)
        post = [a.replace("/run/xpu/daemon.sock", sock) for a in moved(expand(du["ExecStartPost"][0], denv))]
        r = run(post)
        log("ExecStartPost: %s" % r.stdout.strip())
        mode = stat.S_IMODE(os.stat(sock).st_mode)
        check(mode == int(denv["XPU_SOCKET_MODE"], 8), "socket mode %o, unit says %s" % (mode, denv["XPU_SOCKET_MODE"]))
        wait_for(lambda: "xpu-daemon ready" in procs.log_text(daemon), 20, "the daemon to be ready")

        hook = os.path.join(tree, "lib/libxpu_hook.so")
        fake_train = os.path.join(BUILD, "fake_runtime/bin/xpu-fake-train")
        fake_launch = os.path.join(BUILD, "fake_runtime/bin/xpu-fake-launch")
        check(os.access(fake_train, os.X_OK), "%s missing (build the GPU-less runtime)" % fake_train)
        base_env = {k: v for k, v in os.environ.items()
                    if not k.startswith("XPU_") and k not in ("LD_PRELOAD", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")}

        def job(name, nproc, extra_env, steps=60):
            e = dict(base_env)
            e.update({"XPU_JOB": name, "XPU_JOB_NAME": "deploy-test"})
            e.update(extra_env)
            return procs.spawn("job-" + name, [
                fake_launch, "--nproc", str(nproc), "--timeout", "120", "--env", "LD_PRELOAD=" + hook, "--",
                fake_train, "--steps", str(steps), "--layers", "2", "--hidden", "256", "--tokens", "256",
                "--step-sleep-ms", "20"], env=e)

        def ranks(name):
            r = run([cli, "--engine", addr, "ranks", "--job", name, "--json"], check_rc=False)
            return json.loads(r.stdout)["ranks"] if r.returncode == 0 else []

        j = job("sys-%d" % os.getpid(), 4, {"XPU_DAEMON": "off", "XPU_DAEMON_SOCKET": sock})
        got = wait_for(lambda: len(ranks("sys-%d" % os.getpid())) >= 4 and ranks("sys-%d" % os.getpid()),
                       60, "4 ranks of the job in `xpu ranks`")
        check(j.wait(150) == 0, "the job through the unit's daemon exited %s" % j.returncode)
        log("job through the system daemon: %d ranks registered, exit 0" % len(got))
        procs.stop(daemon)

        # --- 3. the installed hook starts the installed daemon ------------------------------
        auto_dir = os.path.join(procs.dir, "auto")
        os.mkdir(auto_dir, 0o700)
        auto_sock = os.path.join(auto_dir, "daemon.sock")
        name = "auto-%d" % os.getpid()
        j = job(name, 2, {"XPU_DAEMON_SOCKET": auto_sock, "XPU_ENGINE": addr})
        wait_for(lambda: len(ranks(name)) >= 2, 60, "2 ranks of the autostart job in `xpu ranks`")
        check(j.wait(150) == 0, "the autostart job exited %s" % j.returncode)
        spawned = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                exe = os.readlink("/proc/%s/exe" % pid)
                cmd = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
            except OSError:
                continue
            if auto_sock.encode() in cmd:
                spawned.append((int(pid), exe))
        check(spawned, "no daemon serving %s found" % auto_sock)
        for pid, exe in spawned:
            check(exe == os.path.join(tree, "bin/xpu-daemon"), "the hook started %s, not the installed daemon" % exe)
            os.kill(pid, 15)
        log("the installed hook started %s by itself" % spawned[0][1])

        # --- 4. the Python side -------------------------------------------------------------
        e = dict(base_env, LD_PRELOAD=hook, XPU_DAEMON="off", XPU_ENABLE="1", XPU_LOG="off")  # no notice lines
        r = run(["/usr/bin/python3", "-c", "import sys, xputimer; print(xputimer.__file__); print(sys.path)"], env=e)
        pydir = os.path.join(tree, "share/xputimer/python")
        check(r.stdout.splitlines()[0].startswith(pydir), "xputimer imported from %s, expected under %s" % (
            r.stdout.splitlines()[0], pydir))
        log("python3 under the installed hook imports %s" % r.stdout.splitlines()[0])

        # --- 5. the compose stack's demo job ------------------------------------------------
        run(["make", "-C", REPO, "--no-print-directory", "install-demo", "BUILD=" + BUILD, "PREFIX=" + PREFIX,
             "DESTDIR=" + root])
        demo_job = "demo-%d" % os.getpid()
        e = dict(base_env, XPU_ENGINE=addr, XPU_TOKEN_FILE="/nonexistent", XPU_DEMO_SECONDS="45",
                 XPU_DEMO_JOB=demo_job, XPU_DEMO_SLOW_RANK="2")
        demo = procs.spawn("demo-job", [os.path.join(tree, "share/xputimer/demo/xpu-demo-job")], env=e)

        def slow_gpu():
            r = run([cli, "--engine", addr, "diagnose", "--job", demo_job, "--json"], check_rc=False)
            if r.returncode != 0:
                return None
            # Rank 2's (on 2 busy cores a healthy rank is now and then found
            # slow for a window too: shown, not counted).
            ds = [d for d in json.loads(r.stdout)["diagnoses"] if d["kind"] == "slow_gpu"]
            seen[:] = ds
            return [d for d in ds if d["ranks"] == [2]] or None
        seen = []
        try:
            found = wait_for(slow_gpu, 120, "slow_gpu on rank 2 in `xpu diagnose --job %s`" % demo_job, 1)
        except Failure:
            raise Failure("no slow_gpu on rank 2; slow_gpu diagnoses: %s" % seen)
        check(found[0]["team"] == "operations", "diagnosis %s" % found[0])
        log("demo job: slow_gpu on ranks %s, team %s: %s" % (found[0]["ranks"], found[0]["team"],
                                                           found[0].get("evidence", "")[:160]))
        procs.stop(demo)
        failed = False
    finally:
        procs.close(failed)


if __name__ == "__main__":
    main("install_e2e", body)
