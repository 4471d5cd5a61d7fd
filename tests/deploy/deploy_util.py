"""Helpers of the deployment kit's tests (tests/deploy/*_test.py).

Every test prints what it checked and ends with PASS, SKIP (exit 77, with
the reason: a tool missing on this machine) or FAIL (exit 1). Processes a
test starts die with it (PR_SET_PDEATHSIG) and are stopped on every exit
path; temporary directories go unless XPU_DEPLOY_KEEP=1.
"""
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SKIP = 77


class Failure(AssertionError):
    pass


class Skip(Exception):
    pass


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def skip(reason):
    raise Skip(reason)


def need(tool, why=""):
    """Path of a program on PATH, or skip the test saying which is missing."""
    path = shutil.which(tool)
    if not path:
        skip("%s not found%s" % (tool, (" (" + why + ")") if why else ""))
    return path


def wait_for(pred, timeout, what, interval=0.2):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        try:
            last = pred()
        except Exception as e:  # noqa: BLE001 - the predicate may race startup
            last = None
            err = e
        if last:
            return last
        time.sleep(interval)
    raise Failure("timed out after %ss waiting for %s" % (timeout, what))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def http_json(url, timeout=5):
    return json.loads(http_get(url, timeout))


def _die_with_parent():
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Procs:
    """Processes of one test, each with a log file in the work directory."""

    def __init__(self, name):
        self.dir = tempfile.mkdtemp(prefix="xpu-deploy-%s." % name)
        self.procs = []

    def spawn(self, name, argv, env=None, cwd=None):
        path = os.path.join(self.dir, name + ".log")
        f = open(path, "ab")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                             preexec_fn=_die_with_parent, start_new_session=True)
        f.close()
        p.log_path = path
        p.name = name
        self.procs.append(p)
        return p

    def log_text(self, p):
        try:
            with open(p.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, p, timeout=10):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except OSError:
                p.terminate()
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)

    def close(self, failed):
        for p in reversed(self.procs):
            self.stop(p)
        if failed:
            for p in self.procs:
                print("----- %s (%s) -----" % (p.name, p.log_path))
                print("\n".join(self.log_text(p).splitlines()[-40:]))
        if os.environ.get("XPU_DEPLOY_KEEP") == "1" or failed:
            print("kept %s" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def run(argv, check_rc=True, **kw):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if check_rc and r.returncode != 0:
        raise Failure("%s exited %d:\n%s" % (" ".join(argv), r.returncode, r.stdout[-4000:]))
    return r


def install_stack(procs, build):
    """The stack's programs as the images hold them: `make install-only` and
    `make install-demo` into the test's directory (PREFIX /opt/xputimer).
    Returns the installed tree and a token file per role (0600), as
    docker/stack.sh makes them."""
    root = os.path.join(procs.dir, "root")
    for t in ("install-only", "install-demo"):
        run(["make", "-C", REPO, "--no-print-directory", t, "BUILD=" + build, "PREFIX=/opt/xputimer",
             "DESTDIR=" + root])
    tokens = {}
    for role in ("read", "act", "admin", "ingest"):
        tokens[role] = os.path.join(procs.dir, "token-" + role)
        with open(tokens[role], "w") as f:
            f.write(os.urandom(16).hex())
        os.chmod(tokens[role], 0o600)
    return root + "/opt/xputimer", tokens


def engine_ports(procs, p, timeout=30):
    """(grpc port, metrics port) from the engine's start-up line."""
    def ports():
        m = re.search(r"\(port (\d+)\), metrics on port (\d+)", procs.log_text(p))
        if p.poll() is not None and not m:
            raise Failure("xpu-engine exited with %s" % p.returncode)
        return (int(m.group(1)), int(m.group(2))) if m else None
    return wait_for(ports, timeout, "xpu-engine to listen")


def podman_settings(image):
    """Global and run arguments podman needs on this host, found by running
    the engine image once; each fallback is printed with the error it fixes."""
    gargs, rargs = [], []
    for _ in range(3):
        r = subprocess.run(["podman"] + gargs + ["run", "--rm"] + rargs + ["--entrypoint", "/bin/true", image],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        if r.returncode == 0:
            return gargs, rargs
        err = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "rc %d" % r.returncode
        if "cgroups in hybrid mode not supported" in err and shutil.which("runc") and "--runtime" not in gargs:
            log("podman: crun says '%s': using --runtime runc" % err)
            gargs += ["--runtime", "runc"]
        elif "setrlimit" in err and not rargs:
            # This host forbids raising limits (no CAP_SYS_RESOURCE); podman
            # lowers its own, so ask for exactly those.
            lim = {}
            for line in open("/proc/self/limits"):
                if line.startswith("Max open files"):
                    lim["nofile"] = line.split()[4]
            lim["nproc"] = "32768"
            log("podman: '%s': passing --ulimit nofile=%s --ulimit nproc=%s" % (err, lim["nofile"], lim["nproc"]))
            rargs += ["--ulimit", "nofile=%s:%s" % (lim["nofile"], lim["nofile"]),
                      "--ulimit", "nproc=%s:%s" % (lim["nproc"], lim["nproc"])]
        else:
            skip("podman cannot run a container here: %s" % err)
    skip("podman cannot run a container here even with %s %s" % (gargs, rargs))


def main(name, body):
    """Runs body() and turns its outcome into the exit status."""
    try:
        body()
    except Skip as e:
        print("SKIP %s: %s" % (name, e), flush=True)
        sys.exit(SKIP)
    except Failure as e:
        print("FAIL %s: %s" % (name, e), flush=True)
        sys.exit(1)
    print("PASS %s" % name, flush=True)
    sys.exit(0)
