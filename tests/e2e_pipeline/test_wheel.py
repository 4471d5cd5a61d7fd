#!/usr/bin/env python3
"""The pip wheel, as a user gets it: tools/make_wheel.sh from this build, a
fresh venv (/usr/bin/python3 -m venv, no system site-packages), `pip install
--no-index --no-deps` of the wheel, then

    python -m xputimer run -- xpu-fake-launch --nproc 2 -- xpu-fake-train ...

with nothing else set up but the engine's address: the hook from the wheel
auto-starts the daemon from the wheel (exactly one, whose binary lies in the
venv), every rank reaches the engine with the records its hook wrote, the
launcher (a process that never touches the GPU) is no rank of the job, and
the wheel's `xpu` CLI talks to the engine. The launcher runs under a Python
agent with host activity of its own (as torchrun's agent): it is no job.

usage: test_wheel.py PATHS_JSON
"""
import glob
import json
import os
import subprocess

from pipeline_harness import (check, check_engine_matches_rings, check_hook_accounting, log, run_test,
                              wait_for, wait_ranks_alive, Job)

NPROC = 2
TRAIN = ["--steps", "150", "--layers", "2", "--hidden", "256", "--tokens", "256",
         "--step-sleep-ms", "30"]
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def venv_daemons(venv):
    """Live xpu-daemon processes whose binary lies inside the venv."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            exe = os.readlink("/proc/%s/exe" % pid)
            with open("/proc/%s/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if exe.startswith(venv + "/") and exe.endswith("/xpu-daemon") and state != "Z":
            found.append(int(pid))
    return sorted(found)


def body(pipe):
    build = os.path.dirname(os.path.dirname(pipe.paths.hook))
    out = os.path.join(pipe.dir, "wheel")
    r = subprocess.run([os.path.join(REPO, "tools", "make_wheel.sh"), build, out], cwd=REPO,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240,
                       env=dict(os.environ, BUNDLE_PY312="off"))
    check(r.returncode == 0, "make_wheel.sh failed:\n%s" % r.stdout.decode(errors="replace"))
    wheels = glob.glob(os.path.join(out, "xputimer-*.whl"))
    check(len(wheels) == 1, "wheels made: %s" % wheels)
    log("wheel %s (%d bytes)" % (os.path.basename(wheels[0]), os.path.getsize(wheels[0])))

    venv = os.path.join(pipe.dir, "venv")
    subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True, timeout=120)
    py = os.path.join(venv, "bin", "python")
    r = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-deps", wheels[0]],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check(r.returncode == 0, "pip install failed:\n%s" % r.stdout.decode(errors="replace"))
    pkg = subprocess.run([py, "-c", "import os, xputimer; print(os.path.dirname(xputimer.__file__))"],
                         stdout=subprocess.PIPE, check=True, timeout=30,
                         cwd="/").stdout.decode().strip()
    check(pkg.startswith(venv + "/"), "xputimer imported from %s, not the venv" % pkg)

    engine = pipe.start_engine()
    job = "e2ep-wheel-%d" % os.getpid()
    jdir = os.path.join(pipe.dir, "job-" + job)
    ring_dir = os.path.join(jdir, "rings")
    os.makedirs(ring_dir)
    calls = os.path.join(jdir, "calls")
    # Only what a user sets: the engine. XPU_DAEMON_BIN is not set: the hook
    # finds the daemon next to itself in the wheel.
    env = pipe.job_env(job, ring_dir, calls, "on", {"XPU_ENGINE": engine.addr})
    env.pop("XPU_DAEMON_BIN", None)
    # The launcher runs under a Python agent, as under torchrun: a Python
    # process with the hook and its Python side loaded, no RANK, no GPU work,
    # but host activity (garbage collections) of its own.
    agent = os.path.join(jdir, "agent.py")
    with open(agent, "w") as f:
        f.write("import gc, subprocess, sys\n"
                "for _ in range(200):\n"
                "    [object() for _ in range(1000)]\n"
                "    gc.collect()\n"
                "sys.exit(subprocess.call(sys.argv[1:]))\n")
    argv = [py, "-m", "xputimer", "run", "--", py, agent, pipe.paths.fake_launch, "--nproc", str(NPROC),
            "--timeout", "90", "--pid-file", os.path.join(jdir, "pids"), "--",
            pipe.paths.fake_train] + TRAIN
    proc = pipe.spawn("job-" + job, argv, env)
    try:
        check_job(pipe, engine, venv, proc, job, jdir, ring_dir, calls)
    finally:
        for pid in venv_daemons(venv):  # started in their own session by the hook
            os.kill(pid, 15)


def check_job(pipe, engine, venv, proc, job, jdir, ring_dir, calls):
    j = Job(pipe, job, NPROC, proc, jdir, ring_dir, calls, TRAIN)

    pids = wait_for(lambda: venv_daemons(venv), 30, "a daemon auto-started from the wheel", 0.2)
    daemon_exe = os.readlink("/proc/%d/exe" % pids[0])
    log("auto-started daemon pid(s) %s: %s" % (pids, daemon_exe))
    wait_ranks_alive(pipe, engine.addr, job, NPROC, job_proc=proc)
    check(j.wait() == 0, "job failed:\n%s" % proc.log_text()[-3000:])
    check(len(venv_daemons(venv)) <= 1, "daemons from the wheel: %s" % venv_daemons(venv))
    rings = j.rings()
    # The agent wrote host records into a ring of its own (rank -1, same job
    # id through XPU_JOB) that was never handed to the daemon.
    agent_ring = rings.pop(-1, None)
    check(agent_ring is not None and agent_ring.records > 0,
          "the agent's ring (rank -1) holds no host records: the test shows nothing")
    log("agent: %d host records in its ring, none handed over" % agent_ring.records)
    check_hook_accounting(j, rings)
    check_engine_matches_rings(pipe, engine.addr, j, rings)

    # The wheel's CLI.
    xpu = os.path.join(venv, "bin", "xpu")
    r = subprocess.run([xpu, "--engine", engine.addr, "ranks", "--job", job, "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    check(r.returncode == 0, "xpu ranks from the wheel: %s" % r.stdout.decode(errors="replace"))
    ranks = json.loads(r.stdout)["ranks"]
    check(sorted(x["rank"] for x in ranks) == list(range(NPROC)),
          "ranks of the job (the launcher must not be one): %s" %
          [(x.get("rank"), x.get("pid")) for x in ranks])
    r = subprocess.run([xpu, "--engine", engine.addr, "jobs", "--all", "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    check(r.returncode == 0, "xpu jobs: %s" % r.stdout.decode(errors="replace"))
    jobs = sorted(x.get("job", "") for x in json.loads(r.stdout).get("jobs", []))
    check(jobs == [job], "jobs in the engine (the agent must not be one): %s" % jobs)
    log("wheel: daemon auto-started from %s, %d ranks traced, xpu CLI from the wheel works" %
        (os.path.dirname(daemon_exe), NPROC))


if __name__ == "__main__":
    run_test("wheel", body)
