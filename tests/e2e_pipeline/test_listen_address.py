#!/usr/bin/env python3
"""Fault: addresses that would expose the engine or a daemon off the host.

The real xpu-engine and xpu-daemon are started with the addresses a careless
or misled operator would give, in a private network and mount namespace made
by this test: loopback carries a second, non-loopback address (198.51.100.7,
TEST-NET-2), and /etc/hosts (bind-mounted over in the namespace only) names
it `127.evil.example` (spelled like loopback) and `both.example` (loopback
and not). Checked through the programs' exit and output:

- the engine refuses to listen, without TLS or a token, on the plain
  address, on names that resolve to it (every resolved address counts), on
  0.0.0.0, [::] and an empty host; with a token file it listens there;
  on localhost it listens and answers the CLI;
- the engine refuses a non-loopback --metrics-addr (also by name) unless
  --metrics-allow-remote is given; then /metrics answers on that address;
- the daemon refuses plaintext to an engine whose name resolves off the
  host, and a non-loopback --metrics-addr without --metrics-allow-remote;
  it starts with localhost.

Needs root (namespaces, mounts); otherwise skipped (exit 77) with the reason.

usage: test_listen_address.py PATHS_JSON
"""
import os
import re
import subprocess
import sys
import time
import urllib.request

from pipeline_harness import Fatal, check, log, run_test, wait_for

SKIP = 77
OFF_HOST = "198.51.100.7"
HOSTS = """127.0.0.1 localhost
::1 localhost ip6-localhost
%s 127.evil.example
127.0.0.1 both.example
%s both.example
""" % (OFF_HOST, OFF_HOST)
LISTENING = re.compile(r"listening on (\S+) \(port (\d+)\), metrics on port (\d+)")


def enter_namespace():
    """Re-runs this script in new network and mount namespaces (exit 77 when
    they cannot be made); inside, brings up loopback with the extra address
    and the test's /etc/hosts."""
    if os.environ.get("XPU_LISTEN_TEST_IN_NS") != "1":
        if os.geteuid() != 0:
            log("SKIP: needs root for a private network namespace")
            sys.exit(SKIP)
        probe = subprocess.run(["unshare", "--net", "--mount", "--propagation", "private", "true"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if probe.returncode != 0:
            log("SKIP: cannot create namespaces: %s" % probe.stdout.decode(errors="replace"))
            sys.exit(SKIP)
        env = dict(os.environ, XPU_LISTEN_TEST_IN_NS="1")
        os.execvpe("unshare", ["unshare", "--net", "--mount", "--propagation", "private",
                               sys.executable] + sys.argv, env)


def setup_namespace(tmp):
    hosts = os.path.join(tmp, "hosts")
    with open(hosts, "w") as f:
        f.write(HOSTS)
    for cmd in (["ip", "link", "set", "lo", "up"],
                ["ip", "addr", "add", OFF_HOST + "/32", "dev", "lo"],
                ["mount", "--bind", hosts, "/etc/hosts"]):
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        check(r.returncode == 0, "%s: %s" % (" ".join(cmd), r.stdout.decode(errors="replace")))


def run_until(pipe, name, argv, ready_pat, timeout=20):
    """Starts argv; returns (proc, match) once ready_pat shows in its output,
    or (proc, None) once it exited. The caller stops a ready one."""
    proc = pipe.spawn(name, argv)

    def settled():
        m = re.search(ready_pat, proc.log_text())
        if m:
            return (m,)
        if not proc.alive():
            return (None,)
        return None

    m = wait_for(settled, timeout, "%s to start or exit" % name, 0.1)[0]
    return proc, m


def expect_refused(pipe, name, argv, ready_pat, *phrases):
    proc, m = run_until(pipe, name, argv, ready_pat)
    text = proc.log_text()
    if m:
        proc.kill()
        raise Fatal("%s started with %s:\n%s" % (name, " ".join(argv[1:]), text))
    rc = proc.popen.wait(5)
    check(rc != 0, "%s exited 0 without starting: %s" % (name, text))
    for p in phrases:
        check(p in text, "%s: %r not in its refusal:\n%s" % (name, p, text))
    log("%s refused (exit %d): %s" % (name, rc, text.strip().splitlines()[-1]))


def expect_started(pipe, name, argv, ready_pat):
    proc, m = run_until(pipe, name, argv, ready_pat)
    check(m is not None, "%s did not start with %s:\n%s" % (name, " ".join(argv[1:]),
                                                          proc.log_text()))
    return proc, m


def engine_argv(pipe, name, listen, metrics="127.0.0.1:0", extra=()):
    return [pipe.paths.engine, "--listen=" + listen, "--metrics-addr=" + metrics,
            "--db=" + os.path.join(pipe.dir, name + ".db")] + list(extra)


def check_engine(pipe, token):
    e = lambda name, listen, *extra, metrics="127.0.0.1:0": engine_argv(pipe, name, listen,
                                                                        metrics, extra)
    for name, listen, phrase in (
            ("plain", OFF_HOST + ":0", "198.51.100.7"),
            ("spelled-loopback", "127.evil.example:0", "resolves to 198.51.100.7"),
            ("mixed", "both.example:0", "resolves to 198.51.100.7"),
            ("any-v4", "0.0.0.0:0", "0.0.0.0"),
            ("any-v6", "[::]:0", "not loopback"),
            ("no-host", ":0", "no host")):
        expect_refused(pipe, "engine-" + name, e(name, listen), LISTENING.pattern,
                       "refusing to listen", phrase)
    # Loopback by name: listens, and the CLI reaches it.
    proc, m = expect_started(pipe, "engine-localhost", e("localhost", "localhost:0"),
                             LISTENING.pattern)
    r = subprocess.run([pipe.paths.cli, "--engine", "localhost:" + m.group(2), "status"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    check(r.returncode == 0, "xpu status on localhost: %s" % r.stdout.decode(errors="replace"))
    proc.kill()
    # Protected by a token: the off-host address is allowed.
    proc, m = expect_started(pipe, "engine-token", e("token", OFF_HOST + ":0",
                                                     "--token-file=" + token), LISTENING.pattern)
    check(m.group(1).startswith(OFF_HOST), "listening on %s" % m.group(1))
    log("with a token file the engine listens on %s" % m.group(1))
    proc.kill()
    # /metrics: loopback unless allowed, by address and by name.
    for name, addr in (("metrics-plain", OFF_HOST + ":0"), ("metrics-name", "127.evil.example:0")):
        expect_refused(pipe, "engine-" + name, e(name, "127.0.0.1:0", metrics=addr),
                       LISTENING.pattern, "refusing to serve /metrics", "--metrics-allow-remote")
    proc, m = expect_started(pipe, "engine-metrics-allowed",
                             e("metrics-allowed", "127.0.0.1:0", "--metrics-allow-remote",
                               metrics=OFF_HOST + ":0"), LISTENING.pattern)
    url = "http://%s:%s/healthz" % (OFF_HOST, m.group(3))
    with urllib.request.urlopen(url, timeout=10) as resp:
        check(resp.status == 200, "%s: HTTP %d" % (url, resp.status))
    log("with --metrics-allow-remote /healthz answers on %s" % url)
    return proc  # left running for the daemon checks (loopback gRPC)


def check_daemon(pipe, engine_port):
    sock_dir = os.path.join(pipe.dir, "d")
    os.makedirs(sock_dir, mode=0o700)

    def d(name, *extra):
        return [pipe.paths.daemon, "--foreground", "--socket", os.path.join(sock_dir, name),
                "--flush-ms", "200"] + list(extra)

    ready = r"xpu-daemon ready"
    expect_refused(pipe, "daemon-spelled-loopback",
                   d("a.sock", "--engine", "127.evil.example:%d" % engine_port), ready,
                   "refusing plaintext to non-loopback engine")
    for name, addr in (("plain", OFF_HOST + ":0"), ("name", "127.evil.example:0"),
                       ("any", "0.0.0.0:0")):
        expect_refused(pipe, "daemon-metrics-" + name,
                       d("b.sock", "--engine", "127.0.0.1:%d" % engine_port,
                         "--metrics-addr", addr), ready,
                       "refusing to serve /metrics", "--metrics-allow-remote")
    proc, _ = expect_started(pipe, "daemon-metrics-allowed",
                             d("c.sock", "--engine", "localhost:%d" % engine_port,
                               "--metrics-addr", OFF_HOST + ":0", "--metrics-allow-remote"),
                             ready)
    log("the daemon starts with localhost and an allowed off-host /metrics")
    proc.kill()


def body(pipe):
    setup_namespace(pipe.dir)
    token = os.path.join(pipe.dir, "token")
    fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"%s\n" % os.urandom(16).hex().encode())
    os.close(fd)
    engine = check_engine(pipe, token)
    m = LISTENING.search(engine.log_text())
    check_daemon(pipe, int(m.group(2)))
    engine.kill()
    time.sleep(0.1)


if __name__ == "__main__":
    enter_namespace()
    run_test("listen-address", body)
