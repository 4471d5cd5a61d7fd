#!/usr/bin/env python3
"""Fault: a second local user tries every read, act, admin and ingest call on
root's job, on a default engine (loopback, no token).

Root runs a 4-rank job under a daemon and an engine. A user created for the
test (or `nobody` where useradd is missing) then, through the real CLI:
reads the job's ranks and diagnoses, collects stacks, starts a profiling
window, dumps the timeline, uploads a calibration, and lists the engine's
jobs; and runs its own daemon and a job that claims root's job id (the
"fake rank" of a made-up daemon). Every read, act and admin call is refused
with a reason naming the permission; the status lists none of root's jobs;
the impostor's processes are refused and counted, and root's job keeps
exactly its own ranks. Root's job finishes (exit 0) with every record
accounted. Root's own calls keep working. The engine's database files are
0600: the user cannot read them even through a directory it may traverse.

The Python-stack trick: the user plants the faulthandler file of one of
root's ranks where root's daemon looks for it (/tmp/xpu-0/pystacks/
xpu-pystack-<pid>.txt, the daemon's default), with the first line the
Python side writes ("xputimer-pystacks pid P start T", both from the
world-readable /proc), then asks for stacks, and root asks too. Where the
user can create the directory, root's daemon does not trust the file (a
directory of another user): `xpu stacks` says so for that rank and the rank
is not signalled. Where /tmp/xpu-0 is root's already, the plant there fails
with EACCES, which is asserted, and the daemon is given a directory of the
same shape that does not exist yet (as on a fresh machine) for the planted
file to reach it. Either way the victim keeps running and the job finishes
with exit 0.

Needs root (to create the user and switch to it); otherwise it is skipped
(exit 77) with the reason.

usage: test_other_user.py PATHS_JSON
"""
import errno
import json
import os
import pwd
import shutil
import struct
import subprocess
import sys
import tempfile

from pipeline_harness import (Proc, check, check_engine_matches_rings, check_hook_accounting,
                              engine_ranks, log, metric, run_test, wait_for, wait_ranks_alive)

NPROC = 4
TRAIN = ["--steps", "300", "--layers", "2", "--hidden", "256", "--tokens", "256",
         "--step-sleep-ms", "40"]
SKIP = 77


def make_user():
    """(name, uid, gid, created)."""
    name = "xpuf%d" % (os.getpid() % 100000000)
    if shutil.which("useradd"):
        r = subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                            "/usr/sbin/nologin", name], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        if r.returncode == 0:
            pw = pwd.getpwnam(name)
            return name, pw.pw_uid, pw.pw_gid, True
        log("useradd failed (%s); using nobody" % r.stdout.decode(errors="replace").strip())
    pw = pwd.getpwnam("nobody")
    return "nobody", pw.pw_uid, pw.pw_gid, False


def as_user(uid, gid):
    def switch():
        os.setsid()
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    return switch


def calibration_report(path):
    """A CalibrationReport (proto/xpu/v1/history.proto) claiming 1,000,000
    TFLOPS bf16 on an H100, in protobuf wire format."""
    def field(num, wire, payload):
        return bytes([(num << 3) | wire]) + payload

    def string(num, s):
        b = s.encode()
        return field(num, 2, bytes([len(b)]) + b)

    gemm = string(1, "bf16") + field(2, 1, struct.pack("<d", 1e6))
    report = string(1, "NVIDIA H100 80GB HBM3") + string(2, "evil") + field(8, 2, bytes([len(gemm)]) + gemm)
    with open(path, "wb") as f:
        f.write(report)
    os.chmod(path, 0o644)


# Run as the other user: plants PATH with FIRST_LINE, creating its
# directories (0700) where it can. Prints one JSON line.
PLANT = r"""
import errno, json, os, sys
path, first = sys.argv[1], sys.argv[2]
made = []
try:
    d = os.path.dirname(path)
    for p in (os.path.dirname(d), d):
        if not os.path.isdir(p):
            os.mkdir(p, 0o700)
            made.append(p)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.write(fd, (first + "\n").encode())
    os.close(fd)
    print(json.dumps({"planted": True, "made": made}))
except OSError as e:
    print(json.dumps({"planted": False, "made": made, "errno": e.errno, "at": e.filename,
                      "error": str(e)}))
"""


def proc_start_ticks(pid):
    """/proc/<pid>/stat field 22, as anyone can read it."""
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[19]


def daemon_pystack_dir():
    """(the daemon's default pystack directory, the one it is given here).
    Where the default's parent (/tmp/xpu-0) exists already, as root's, the
    plant there can only be refused; the daemon is then given a directory
    of the same shape that does not exist yet (a fresh machine's /tmp/xpu-0),
    so that the planted file itself reaches it."""
    default = "/tmp/xpu-%d/pystacks" % os.geteuid()
    if os.environ.get("XPU_PYSTACK_DIR"):
        return default, os.environ["XPU_PYSTACK_DIR"]
    if os.path.lexists(os.path.dirname(default)):
        return default, "/tmp/xpu-e2ep-%d-%d/pystacks" % (os.geteuid(), os.getpid())
    return default, default


def plant(path, first, uid, gid, env, name):
    # A system interpreter: the test's own may live in root's home.
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    r = subprocess.run([python, "-c", PLANT, path, first], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=30, env=env, cwd=env["HOME"],
                       preexec_fn=as_user(uid, gid))
    out = r.stdout.decode(errors="replace")
    check(r.returncode == 0, "the planting script failed: %s" % out)
    res = json.loads(out.strip().splitlines()[-1])
    log("%s plants %s (%r): %s" % (name, path, first, res))
    return res


def unplant(path, res, uid):
    """Removes only what the user made (theirs by owner)."""
    if os.path.lexists(path) and os.lstat(path).st_uid == uid:
        os.unlink(path)
    for d in reversed(res.get("made", [])):
        if os.path.isdir(d) and os.lstat(d).st_uid == uid:
            shutil.rmtree(d, ignore_errors=True)


def pystack_trick(pipe, engine, job, other, name, uid, gid, env, dirs):
    """The planted faulthandler file: never trusted, the victim never signalled."""
    default, given = dirs
    with open(os.path.join(job.dir, "pids")) as f:
        pids = {int(line.split()[0]): int(line.split()[1]) for line in f if line.strip()}
    victim_rank = sorted(pids)[0]
    victim = pids[victim_rank]
    first = "xputimer-pystacks pid %d start %s" % (victim, proc_start_ticks(victim))
    planted = {}
    try:
        for d in sorted({default, given}):
            path = os.path.join(d, "xpu-pystack-%d.txt" % victim)
            check(not os.path.lexists(path), "%s exists before the test planted it" % path)
            res = planted[path] = plant(path, first, uid, gid, env, name)
            if not res["planted"]:
                # Root's directory is there already: the user cannot write in it.
                check(res["errno"] == errno.EACCES, "planting failed with %s, want EACCES" % res)
                refusing = os.path.dirname(res["at"])  # where mkdir or open was refused
                st = os.lstat(refusing)
                check(st.st_uid == 0 and not (st.st_mode & 0o022),
                      "%s is not root's and private (uid %d mode %o)" % (refusing, st.st_uid,
                                                                          st.st_mode))
                log("the trick cannot be attempted at %s: refused (%s)" % (path, res["error"]))
        given_path = os.path.join(given, "xpu-pystack-%d.txt" % victim)
        check(planted[given_path]["planted"] or given == default,
              "the user could not plant in a directory that did not exist: %s" % planted[given_path])
        # The user asks (refused outright), then root asks: the daemon reads
        # the file only if it trusts its directory.
        rc, text = other("stacks", "--job", job.job, "--deadline-s", "5")
        check(rc != 0 and "may not act on" in text, "%s's `xpu stacks`: %s" % (name, text))
        r = pipe.cli(engine.addr, "stacks", "--job", job.job, "--deadline-s", "8", "--json")
        rep = json.loads(r.stdout.decode())
        check(rep.get("found"), "root's `xpu stacks` found nothing: %s" % rep)
        errors = {x.get("rank"): x.get("python_error", "") for x in rep.get("ranks", [])}
        log("python stacks of rank %d: %s" % (victim_rank, errors.get(victim_rank)))
        if planted[given_path]["planted"]:
            err = errors.get(victim_rank, "")
            check("not trusted" in err and "not signalled" in err,
                  "rank %d: the planted file was not refused: %r" % (victim_rank, err))
        os.kill(victim, 0)  # still there: not signalled
        check(job.proc.alive(), "root's job ended after the trick")
    finally:
        for path, res in planted.items():
            unplant(path, res, uid)


def body(pipe):
    if os.geteuid() != 0:
        print("SKIPPED: needs root to create a second local user and switch to it")
        sys.exit(SKIP)
    name, uid, gid, created = make_user()
    try:
        run(pipe, name, uid, gid)
    finally:
        if created:
            subprocess.run(["userdel", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run(pipe, name, uid, gid):
    engine = pipe.start_engine()
    dirs = daemon_pystack_dir()
    saved = os.environ.get("XPU_PYSTACK_DIR")
    os.environ["XPU_PYSTACK_DIR"] = dirs[1]  # the daemon's (its default, where possible)
    try:
        pipe.start_daemon(engine.addr)
    finally:
        if saved is None:
            del os.environ["XPU_PYSTACK_DIR"]
        else:
            os.environ["XPU_PYSTACK_DIR"] = saved
    job = pipe.start_job("e2ep-other-user-%d" % os.getpid(), NPROC, TRAIN)
    wait_ranks_alive(pipe, engine.addr, job.job, NPROC, job_proc=job.proc)

    # The other user's own corner: the pipeline's directory is root's (0700).
    home = tempfile.mkdtemp(prefix="xpu-e2ep-other.")
    os.chown(home, uid, gid)
    report = os.path.join(home, "calibration.pb")
    calibration_report(report)
    env = {"PATH": "/usr/bin:/bin", "HOME": home}

    def other(*args):
        argv = [pipe.paths.cli, "--engine", engine.addr] + list(args)
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
                           env=env, cwd=home, preexec_fn=as_user(uid, gid))
        out = (r.stdout + r.stderr).decode(errors="replace")
        log("%s: xpu %s -> exit %d: %s" % (name, " ".join(args), r.returncode,
                                           out.strip().splitlines()[-1:] or ""))
        return r.returncode, out

    refusals = [
        (("ranks", "--job", job.job), "may not read"),
        (("diagnose", "--job", job.job), "may not read"),
        (("stacks", "--job", job.job, "--deadline-s", "5"), "may not act on"),
        (("profile", "--job", job.job, "--seconds", "1"), "may not act on"),
        # The dump first reads the job (its suspects, to choose the ranks of a
        # large job), so the read is what is refused.
        (("timeline", "dump", "--job", job.job, "--out", os.path.join(home, "dump")),
         ("may not act on", "may not read")),
        (("calibrate", "--from", report), "may not administer"),
    ]
    for args, want in refusals:
        rc, out = other(*args)
        check(rc != 0, "%s: `xpu %s` succeeded:\n%s" % (name, " ".join(args), out))
        wants = want if isinstance(want, tuple) else (want,)
        check(any(w in out for w in wants), "%s: `xpu %s` says %r, want %r" % (
            name, " ".join(args), out, want))
    check(not os.path.exists(os.path.join(home, "dump")), "a timeline dump was written")
    cal = pipe.cli_json(engine.addr, "calibrate", "--show")
    check("evil" not in str(cal), "the calibration was stored: %s" % cal)
    pystack_trick(pipe, engine, job, other, name, uid, gid, env, dirs)

    # Status answers, but lists none of root's jobs.
    rc, out = other("status", "--json")
    check(rc == 0, "status as %s failed: %s" % (name, out))
    check(job.job not in out, "status shows root's job to %s:\n%s" % (name, out))
    check(("uid %d" % uid) in out, "status does not name the caller uid %d:\n%s" % (uid, out))

    # The engine's database: private files (0600), so the other user cannot
    # read them even through a directory they may traverse.
    db = os.path.join(pipe.dir, "engine.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            mode = os.stat(db + suffix).st_mode & 0o777
            check(mode & 0o077 == 0, "%s%s is mode %o" % (db, suffix, mode))
    saved_mode = os.stat(pipe.dir).st_mode & 0o777
    os.chmod(pipe.dir, 0o711)
    try:
        r = subprocess.run(["/usr/bin/head", "-c", "16", db], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30, env=env, cwd=home,
                           preexec_fn=as_user(uid, gid))
    finally:
        os.chmod(pipe.dir, saved_mode)
    log("%s: read the engine's database -> exit %d: %s" % (
        name, r.returncode, r.stderr.decode(errors="replace").strip()))
    check(r.returncode != 0 and b"Permission denied" in r.stderr,
          "%s read the engine's database: %r" % (name, r.stdout))

    # Ingest: the user's own daemon, and a job claiming root's job id.
    sock_dir = os.path.join(home, "run")
    os.mkdir(sock_dir, 0o700)
    os.chown(sock_dir, uid, gid)
    sock = os.path.join(sock_dir, "daemon.sock")
    dlog = os.path.join(home, "daemon.log")
    with open(dlog, "wb") as out:
        os.chown(dlog, uid, gid)
        popen = subprocess.Popen(
            [pipe.paths.daemon, "--foreground", "--socket", sock, "--engine", engine.addr,
             "--flush-ms", "200", "--drain-ms", "5"], stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=env, cwd=home, preexec_fn=as_user(uid, gid))
    impostor_daemon = Proc("other-daemon", popen, dlog)
    pipe.procs.append(impostor_daemon)
    wait_for(lambda: "xpu-daemon ready" in impostor_daemon.log_text(), 30,
             "%s's daemon to be ready" % name)
    jdir = os.path.join(home, "job")
    os.mkdir(jdir, 0o700)
    os.chown(jdir, uid, gid)
    jenv = dict(env, XPU_JOB=job.job, XPU_DAEMON_SOCKET=sock, XPU_DAEMON="off",
                LD_LIBRARY_PATH=pipe.paths.fake_lib_dir)
    jlog = os.path.join(home, "job.log")
    with open(jlog, "wb") as out:
        os.chown(jlog, uid, gid)
        ip = subprocess.Popen(
            [pipe.paths.fake_launch, "--nproc", "2", "--timeout", "60",
             "--env", "LD_PRELOAD=" + pipe.paths.hook, "--", pipe.paths.fake_train,
             "--steps", "40", "--layers", "1", "--hidden", "128", "--tokens", "128",
             "--step-sleep-ms", "20"], stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=jenv, cwd=jdir, preexec_fn=as_user(uid, gid))
    impostor = Proc("other-job", ip, jlog)
    pipe.procs.append(impostor)
    check(ip.wait(90) == 0, "%s's job failed:\n%s" % (name, impostor.log_text()))

    def rejected():
        m = pipe.metrics(engine)
        n = metric(m, "xpu_ingest_rejected_records_total", reason="job_owner") or 0
        return n if n > 0 else None

    n = wait_for(rejected, 30, "the engine to refuse the impostor's records (job_owner)", 0.5)
    log("the engine refused %d records of %s's processes claiming job %s" % (n, name, job.job))
    ranks = engine_ranks(pipe, engine.addr, job.job)
    check(len(ranks) == NPROC, "root's job has %d ranks after the impostor: %s" % (
        len(ranks), sorted(ranks)))
    impostor_daemon.kill()

    # Root's job is unharmed and every record is accounted.
    check(job.wait() == 0, "root's job failed")
    rings = job.rings()
    check_hook_accounting(job, rings)
    check_engine_matches_rings(pipe, engine.addr, job, rings)
    # Root still acts on its own job.
    pipe.cli(engine.addr, "ranks", "--job", job.job)
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    run_test("other-user", body)
