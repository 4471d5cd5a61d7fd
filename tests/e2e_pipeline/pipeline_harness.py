"""Harness for the end-to-end pipeline tests: hook -> daemon -> engine -> CLI.

Starts the real programs as separate processes (xpu-engine, xpu-daemon, an
N-rank xpu-fake-train job through xpu-fake-launch with libxpu_hook.so
preloaded on the GPU-less runtime) in a private temporary directory, on
ports the kernel picks (the engine listens on port 0 and logs the port it got),
and reads the results back the way an operator would: `xpu ... --json` as a
subprocess, /metrics over HTTP, and the hook's own ring files (XPU_RING_DIR)
through `xpu-ring-dump --json` as ground truth.

Cleanup: every child runs in its own session and gets SIGKILL when this
process dies (PR_SET_PDEATHSIG); `Pipeline.close()` (also run on SIGTERM,
which is how CTest stops a test that times out) kills each child's process
group by id, and any daemon auto-started for this pipeline's socket path
(found through /proc by the exact binary and socket path, never by name).

Thread-safety: single-threaded; one Pipeline per test process.
"""

import collections
import ctypes
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1

# APIs the hook records one record for (tests/fake_train issues these); the
# fake runtime's XPU_FAKE_CALL_COUNTS files count every call of each. Kind
# names as xpu-ring-dump prints them (common/record/op_kind.cc;
# op_kind_unittest checks every name here against that table).
TRACED_APIS = {
    "cublasGemmEx": "gemm",
    "cublasGemmStridedBatchedEx": "gemm",
    "cublasLtMatmul": "gemm",
    "ncclAllReduce": "allreduce",
    "ncclAllGather": "allgather",
    "ncclReduceScatter": "reducescatter",
    "ncclSend": "send",
    "ncclRecv": "recv",
    "ncclCommInitRank": "comm_init",
    "ncclCommDestroy": "comm_destroy",
    "cudaStreamSynchronize": "sync_stream",
    "cudaDeviceSynchronize": "sync_device",
}
# Kernel launch entry points; their records (XPU_KERNEL_SAMPLE_EVERY) carry
# the kernel's name.
LAUNCH_APIS = ("cudaLaunchKernel", "cuLaunchKernel", "__cudaLaunchKernel", "cudaLaunchKernelExC",
               "cuLaunchKernelEx")
# include/xpu/record.h: a record timed by the NCCL profiler plugin adds timing
# to an op that has its own record; it is not an occurrence.
XPU_REC_PLUGIN = 1 << 8
# A kernel execution CUPTI reported during a profiling window: not an
# occurrence of a traced op, and never forwarded to the engine.
XPU_REC_PROFILE_WINDOW = 1 << 14
# Ring-header counters of ops the hook did not write a record for.
HOOK_LOSS_COUNTERS = ("dropped_full", "event_pool_empty", "pending_full")


def _die_with_parent():
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def log(msg):
    sys.stdout.write("[%s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stdout.flush()


class Failure(AssertionError):
    pass


class Fatal(Failure):
    """A failure wait_for must not retry."""


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def wait_for(pred, timeout, what, interval=0.2):
    """Polls pred() until it returns a true value; fails after timeout s."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = pred()
        except Fatal:
            raise
        except Failure:
            last = None
        if last:
            return last
        if time.monotonic() > deadline:
            raise Failure("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


class Paths:
    """Locations of the programs, from the JSON file the build generates."""

    def __init__(self, paths_file):
        with open(paths_file) as f:
            p = json.load(f)
        self.engine = p["engine"]
        self.daemon = p["daemon"]
        self.cli = p["cli"]
        self.ring_dump = p["ring_dump"]
        self.sim = p.get("sim")  # only tests/e2e_pipeline lists it
        self.hook = p["hook"]
        self.fake_train = p["fake_train"]
        self.fake_launch = p["fake_launch"]
        self.fake_lib_dir = p["fake_lib_dir"]
        for name, path in p.items():
            check(os.path.exists(path), "%s not built: %s" % (name, path))


class Proc:
    def __init__(self, name, popen, log_path):
        self.name = name
        self.popen = popen
        self.log_path = log_path

    def alive(self):
        return self.popen.poll() is None

    def log_text(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def kill(self, sig=signal.SIGKILL):
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass


class Engine:
    def __init__(self, proc, port, metrics_port):
        self.proc = proc
        self.port = port
        self.metrics_port = metrics_port

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port


class Pipeline:
    def __init__(self, paths, name):
        self.paths = paths
        self.dir = tempfile.mkdtemp(prefix="xpu-e2ep-%s." % name)
        self.procs = []
        self.socket = os.path.join(self.dir, "daemon", "daemon.sock")
        os.makedirs(os.path.dirname(self.socket), mode=0o700)
        self.keep = os.environ.get("XPU_E2E_KEEP") == "1"
        self.pg = None  # (bin dir, data dir, preexec) of start_postgres's server
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum, frame):
        log("signal %d: cleaning up" % signum)
        self.close()
        os._exit(128 + signum)

    # ----------------------------------------------------------- processes
    def spawn(self, name, argv, env=None):
        log_path = os.path.join(self.dir, "%s.log" % name)
        out = open(log_path, "ab")
        full_env = dict(os.environ)
        # Our job ids must win: the hook prefers these to XPU_JOB.
        for var in ("LD_PRELOAD", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
            full_env.pop(var, None)
        if env:
            full_env.update(env)
        popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env=full_env, start_new_session=True, preexec_fn=_die_with_parent)
        out.close()
        p = Proc(name, popen, log_path)
        self.procs.append(p)
        return p

    def start_engine(self, name="engine", port=0, db=None, extra=(), wrap=(), window_s=1):
        """wrap: a command that execs the engine (argv appended), e.g. to put
        it in a namespace; the engine keeps the spawned process's pid."""
        db = db or os.path.join(self.dir, "engine.db")
        # No automatic profiling windows unless a test asks for them
        # (tests/e2e_profile): their kernel records would upset exact counts.
        env = {"XPU_PROFILE_AUTO": os.environ.get("XPU_PROFILE_AUTO", "0")}
        proc = self.spawn(name, list(wrap) + [self.paths.engine, "--listen=127.0.0.1:%d" % port,
                                 "--metrics-addr=127.0.0.1:0", "--db=%s" % db,
                                 "--window-s=%g" % window_s, "--silent-after-s=30"]
                          + list(extra), env)
        pat = re.compile(r"listening on \S+ \(port (\d+)\), metrics on port (\d+)")

        def ready():
            check(proc.alive(), "%s exited early:\n%s" % (name, proc.log_text()))
            return pat.search(proc.log_text())

        m = wait_for(ready, 30, "%s to listen" % name)
        engine = Engine(proc, int(m.group(1)), int(m.group(2)))
        log("%s pid %d on %s, metrics on port %d" % (name, proc.popen.pid, engine.addr,
                                                    engine.metrics_port))
        return engine

    def start_postgres(self):
        """Starts a throwaway PostgreSQL server (unix socket only, in its own
        directory) and returns the --db URL of its database; None when the
        server binaries (Debian postgresql-15) are not installed."""
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not bins:
            return None
        bindir = os.path.dirname(bins[-1])
        pgdir = tempfile.mkdtemp(prefix="xpu-e2ep-pg.")
        preexec = None
        if os.geteuid() == 0:  # PostgreSQL refuses root
            import pwd
            pw = None
            for user in ("postgres", "nobody"):
                try:
                    pw = pwd.getpwnam(user)
                    break
                except KeyError:
                    pass
            check(pw is not None, "running as root and no user postgres/nobody for PostgreSQL")
            os.chown(pgdir, pw.pw_uid, pw.pw_gid)

            def preexec():
                os.setgroups([])
                os.setgid(pw.pw_gid)
                os.setuid(pw.pw_uid)
        self.pg = (bindir, pgdir, preexec)
        setup_log = open(os.path.join(self.dir, "postgres-setup.log"), "ab")
        for argv in ([bindir + "/initdb", "-D", pgdir + "/data", "-U", "xpu", "--auth=trust",
                      "-E", "UTF8", "--locale=C", "--no-sync"],
                     [bindir + "/pg_ctl", "-D", pgdir + "/data", "-l", pgdir + "/server.log", "-w",
                      "-t", "60", "-o", "-k %s -c listen_addresses='' -c fsync=off "
                      "-c full_page_writes=off -c shared_buffers=16MB" % pgdir, "start"]):
            rc = subprocess.call(argv, stdout=setup_log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, preexec_fn=preexec, cwd=pgdir)
            check(rc == 0, "%s failed (rc %d): see postgres-setup.log" % (argv[0], rc))
        setup_log.close()
        log("PostgreSQL (%s) on a unix socket in %s" % (bindir, pgdir))
        return "postgresql://xpu@/postgres?host=%s" % pgdir

    def _stop_postgres(self):
        if self.pg is None:
            return
        bindir, pgdir, preexec = self.pg
        self.pg = None
        subprocess.call([bindir + "/pg_ctl", "-D", pgdir + "/data", "-m", "immediate", "-w",
                         "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                        stdin=subprocess.DEVNULL, preexec_fn=preexec, cwd=pgdir)
        if self.keep:
            log("kept %s" % pgdir)
        else:
            shutil.rmtree(pgdir, ignore_errors=True)

    def start_daemon(self, engine_addr, name="daemon", extra=()):
        proc = self.spawn(name, [self.paths.daemon, "--foreground", "--socket", self.socket,
                                 "--engine", engine_addr, "--flush-ms", "200", "--drain-ms", "5"]
                          + list(extra))

        def ready():
            check(proc.alive(), "%s exited early:\n%s" % (name, proc.log_text()))
            return "xpu-daemon ready" in proc.log_text()

        wait_for(ready, 30, "%s to be ready" % name)
        log("%s pid %d on %s" % (name, proc.popen.pid, self.socket))
        return proc

    def job_env(self, job, ring_dir, calls_prefix, daemon="off", extra=None, job_var="XPU_JOB"):
        env = {
            job_var: job,
            "XPU_DAEMON_SOCKET": self.socket,
            "XPU_DAEMON": daemon,
            "XPU_RING_DIR": ring_dir,
            "XPU_FAKE_CALL_COUNTS": calls_prefix,
            "LD_LIBRARY_PATH": self.paths.fake_lib_dir,
        }
        env.update(extra or {})
        return env

    def start_job(self, job, nproc, train_args, daemon="off", extra_env=None, timeout=90,
                  job_var="XPU_JOB"):
        """Starts an nproc-rank xpu-fake-train job under the hook; the job id is
        passed in job_var (XPU_JOB or TORCHELASTIC_RUN_ID)."""
        jdir = os.path.join(self.dir, "job-" + job)
        ring_dir = os.path.join(jdir, "rings")
        os.makedirs(ring_dir)
        calls = os.path.join(jdir, "calls")
        env = self.job_env(job, ring_dir, calls, daemon, extra_env, job_var)
        argv = [self.paths.fake_launch, "--nproc", str(nproc), "--timeout", str(timeout),
                "--pid-file", os.path.join(jdir, "pids"),
                "--env", "LD_PRELOAD=" + self.paths.hook, "--", self.paths.fake_train] + list(train_args)
        proc = self.spawn("job-" + job, argv, env)
        log("job %s: %d ranks, pid %d: %s" % (job, nproc, proc.popen.pid, " ".join(train_args)))
        return Job(self, job, nproc, proc, jdir, ring_dir, calls, train_args)

    def autostarted_daemons(self):
        """Live xpu-daemon processes serving this pipeline's socket."""
        found = []
        real = os.path.realpath(self.paths.daemon)
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                exe = os.readlink("/proc/%s/exe" % pid)
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
                with open("/proc/%s/stat" % pid) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state == "Z":
                continue
            if os.path.realpath(exe) == real and self.socket.encode() in argv:
                found.append(int(pid))
        return found

    # ---------------------------------------------------------- observation
    def cli(self, engine_addr, *args, expect_rc=0):
        argv = [self.paths.cli, "--engine", engine_addr] + list(args)
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                           env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
        check(expect_rc is None or r.returncode == expect_rc,
              "%s exited %d (want %s): %s" % (" ".join(args), r.returncode, expect_rc,
                                                 r.stderr.decode(errors="replace")))
        return r

    def cli_json(self, engine_addr, *args):
        r = self.cli(engine_addr, *(list(args) + ["--json"]))
        return json.loads(r.stdout)

    def metrics(self, engine):
        url = "http://127.0.0.1:%d/metrics" % engine.metrics_port
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        return parse_metrics(text)

    def close(self):
        # SIGTERM first, so that xpu-fake-launch removes its shared memory and
        # the daemon and engine shut down cleanly; SIGKILL whatever is left.
        for p in reversed(self.procs):
            p.kill(signal.SIGTERM)
        deadline = time.monotonic() + 5
        while any(p.alive() for p in self.procs) and time.monotonic() < deadline:
            time.sleep(0.1)
        for p in reversed(self.procs):
            try:
                os.killpg(p.popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in self.autostarted_daemons():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.procs:
            try:
                p.popen.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self._stop_postgres()
        if self.keep:
            log("kept %s" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def dump_logs(self):
        for p in self.procs:
            text = p.log_text()
            sys.stdout.write("----- %s (%s) last lines -----\n" % (p.name, p.log_path))
            sys.stdout.write("\n".join(text.splitlines()[-40:]) + "\n")
        dlog = os.path.join(os.path.dirname(self.socket), "daemon.log")
        if os.path.exists(dlog):
            with open(dlog, errors="replace") as f:
                sys.stdout.write("----- auto-started daemon.log -----\n" + f.read()[-4000:])
        sys.stdout.flush()


class Job:
    def __init__(self, pipeline, job, nproc, proc, jdir, ring_dir, calls, train_args):
        self.p = pipeline
        self.job = job
        self.nproc = nproc
        self.proc = proc
        self.dir = jdir
        self.ring_dir = ring_dir
        self.calls_prefix = calls
        self.train_args = train_args
        self.started = time.monotonic()

    def wait(self, timeout=100):
        try:
            rc = self.proc.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise Failure("job %s still running after %d s" % (self.job, timeout))
        log("job %s exited %d" % (self.job, rc))
        return rc

    def plan(self):
        """Per-step counts from `xpu-fake-train --print-plan` with the job's options."""
        r = subprocess.run([self.p.paths.fake_train, "--print-plan"] + list(self.train_args),
                           stdout=subprocess.PIPE, timeout=30,
                           env=dict(os.environ, LD_LIBRARY_PATH=self.p.paths.fake_lib_dir))
        plan = {"per_step": {}}
        for line in r.stdout.decode().splitlines():
            f = line.split()
            if f[:2] == ["plan", "steps"]:
                plan["steps"] = int(f[2])
            elif f[:2] == ["plan", "per_step"]:
                plan["per_step"][f[2]] = int(f[3])
        check("steps" in plan, "no plan from --print-plan: %r" % r.stdout)
        return plan

    def call_counts(self, rank):
        path = "%s.rank%d" % (self.calls_prefix, rank)
        check(os.path.exists(path), "no call counts for rank %d (%s)" % (rank, path))
        counts = {}
        with open(path) as f:
            for line in f:
                api, n = line.split()
                counts[api] = int(n)
        return counts

    def rings(self):
        """{rank: RingDump} from the job's XPU_RING_DIR."""
        out = {}
        for name in sorted(os.listdir(self.ring_dir)):
            d = RingDump(self.p.paths.ring_dump, os.path.join(self.ring_dir, name))
            if d.header["job"] != self.job:
                continue
            check(d.header["rank"] not in out, "two rings for rank %d" % d.header["rank"])
            out[d.header["rank"]] = d
        return out


class RingDump:
    def __init__(self, tool, path, records=True):
        argv = [tool, "--json"] + ([] if records else ["--no-records"]) + [path]
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        check(r.returncode == 0, "xpu-ring-dump %s: %s" % (path, r.stderr.decode()))
        self.header = None
        self.signatures = 0
        self.records_by_name = collections.Counter()
        self.kernel_records = 0
        self.plugin_records = 0
        self.window_records = 0
        self.records = 0
        for line in r.stdout.decode().splitlines():
            o = json.loads(line)
            if o["type"] == "header":
                self.header = o
            elif o["type"] == "signature":
                self.signatures += 1
            elif o["type"] == "record":
                self.records += 1
                if o["flags"] & XPU_REC_PLUGIN:
                    self.plugin_records += 1  # timing of an op recorded already
                elif o["flags"] & XPU_REC_PROFILE_WINDOW:
                    self.window_records += 1  # CUPTI activity, summarized on the node
                elif o["kind"] == "kernel":
                    self.kernel_records += 1  # named after the kernel, not the API
                else:
                    self.records_by_name[o["name"]] += 1
        check(self.header is not None, "no header in %s" % path)

    @property
    def written(self):
        return self.header["write_index"]

    def counter(self, name):
        return self.header["counters"][name]


def parse_metrics(text):
    """{(name, frozenset(labels)): value} of a Prometheus text exposition."""
    out = {}
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = line_re.match(line)
        if not m:
            continue
        labels = frozenset(label_re.findall(m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


# Labels every series of a job carries besides those a test names.
_JOB_LABELS = {"xpu_job_name"}


def _labels(labels):
    # `job=` is the job id, exported as xpu_job (docs/metrics.md).
    labels = dict(labels)
    if "job" in labels:
        labels["xpu_job"] = labels.pop("job")
    return labels


def metric(metrics, name, **labels):
    """The value of the one series of `name` with `labels` (job= means xpu_job);
    a job's series may carry xpu_job_name too. None when absent."""
    want = set(_labels(labels).items())
    for (n, l), v in metrics.items():
        if n == name and want <= set(l) and {k for k, _ in set(l) - want} <= _JOB_LABELS:
            return v
    return None


def metric_series(metrics, name, **labels):
    """All series of `name` whose labels include `labels`: [(labels dict, value)]."""
    want = set(_labels(labels).items())
    return [(dict(l), v) for (n, l), v in metrics.items() if n == name and want <= set(l)]


def metric_sum(metrics, name, **labels):
    """The sum over every series of `name` whose labels include `labels`
    (xpu_records_dropped_total has one per loss reason)."""
    return sum(v for _, v in metric_series(metrics, name, **labels))


def run_test(name, body):
    """Entry point: argv = [script, paths.json]; exit 0 on success."""
    paths = Paths(sys.argv[1])
    pipe = Pipeline(paths, name)
    ok = False
    try:
        body(pipe)
        ok = True
    except Failure as e:
        log("FAIL: %s" % e)
    except Exception as e:  # noqa: BLE001 - report anything with the logs
        log("ERROR: %r" % e)
        import traceback
        traceback.print_exc()
    finally:
        if not ok:
            pipe.dump_logs()
        pipe.close()
    log("PASS" if ok else "FAILED")
    sys.exit(0 if ok else 1)


def engine_ranks(pipe, engine_addr, job):
    """{rank: rank json} from `xpu ranks --job J --json`."""
    reply = pipe.cli_json(engine_addr, "ranks", "--job", job)
    check(reply.get("job") == job, "ranks reply for %r, want %r" % (reply.get("job"), job))
    out = {}
    for r in reply["ranks"]:
        check(r["rank"] not in out, "rank %d listed twice for job %s: %s" % (r["rank"], job, reply))
        out[r["rank"]] = r
    return out


def wait_ranks_alive(pipe, engine_addr, job, nproc, timeout=60, job_proc=None):
    """Waits until nproc ranks of `job` are alive with records; job_proc (the
    launcher) ending first fails at once."""
    def alive():
        if job_proc is not None and not job_proc.alive():
            raise Fatal("job %s ended before %d ranks were seen alive (machine too loaded? "
                          "the job needs to run longer)" % (job, nproc))
        ranks = engine_ranks(pipe, engine_addr, job)
        n = sum(1 for r in ranks.values() if r["liveness"] == "alive" and r["records"] > 0)
        return ranks if n == nproc else None

    ranks = wait_for(alive, timeout, "%d ranks of %s alive with records" % (nproc, job), 0.5)
    log("job %s: %d ranks alive in the engine" % (job, nproc))
    return ranks


def check_hook_accounting(job, rings):
    """Ground truth: every op the program issued (XPU_FAKE_CALL_COUNTS, tied to
    the --print-plan counts) is either a record in the ring or counted by the
    hook as not written; the ring's records match its own counters."""
    plan = job.plan()
    check(sorted(rings) == list(range(job.nproc)),
          "ring files for ranks %s, want 0..%d" % (sorted(rings), job.nproc - 1))
    for rank, ring in sorted(rings.items()):
        calls = job.call_counts(rank)
        for api, per_step in plan["per_step"].items():
            if api in TRACED_APIS and api.startswith(("nccl", "cublas")):
                check(calls.get(api, 0) == per_step * plan["steps"],
                      "rank %d: %d %s calls, plan says %d x %d" % (
                          rank, calls.get(api, 0), api, per_step, plan["steps"]))
        h = ring.header
        check(ring.written <= h["ring_capacity"], "rank %d: ring wrapped (%d records, capacity %d): "
              "the test needs a larger XPU_RING_CAPACITY" % (rank, ring.written, h["ring_capacity"]))
        check(h["world_size"] == job.nproc, "rank %d ring: world_size %d" % (rank, h["world_size"]))
        check(ring.written == h["counters"]["records_written"] == ring.records,
              "rank %d ring: write_index %d, records_written %d, records read %d" % (
                  rank, ring.written, h["counters"]["records_written"], ring.records))
        missing = 0
        for api in TRACED_APIS:
            got = ring.records_by_name.get(api, 0)
            check(got <= calls.get(api, 0), "rank %d: %d %s records for %d calls" % (
                rank, got, api, calls.get(api, 0)))
            missing += calls.get(api, 0) - got
        unexpected = set(ring.records_by_name) - set(TRACED_APIS)
        check(not unexpected, "rank %d: records of unexpected APIs %s" % (rank, unexpected))
        launches = sum(calls.get(api, 0) for api in LAUNCH_APIS)
        check(ring.kernel_records <= launches, "rank %d: %d kernel records for %d launches" % (
            rank, ring.kernel_records, launches))
        if ring.kernel_records > 0:  # kernels are traced (sampled): the rest is counted untraced
            missing += launches - ring.kernel_records
            counted_untraced = h["counters"]["launches_untraced"]
        else:
            counted_untraced = 0
        counted = sum(h["counters"][c] for c in HOOK_LOSS_COUNTERS) + counted_untraced
        check(missing <= counted,
              "rank %d: %d traced calls have no record but the hook counted only %d (%s)" % (
                  rank, missing, counted, {c: h["counters"][c] for c in HOOK_LOSS_COUNTERS}))
        check(ring.written > 0, "rank %d wrote no record" % rank)
    total = sum(r.written for r in rings.values())
    log("job %s: hook wrote %d records in %d rings; ops without a record all counted by the hook" % (
        job.job, total, len(rings)))
    return total


def check_engine_matches_rings(pipe, engine_addr, job, rings, state="exited"):
    """The engine holds exactly what each hook wrote: nothing lost, nothing doubled."""
    def settled():
        ranks = engine_ranks(pipe, engine_addr, job.job)
        if len(ranks) != job.nproc:
            return None
        for rank, ring in rings.items():
            r = ranks.get(rank)
            if r is None or r["records"] != ring.written or (state and r["liveness"] != state):
                return None
        return ranks

    try:
        ranks = wait_for(settled, 30, "engine counts of %s to match the rings" % job.job, 0.5)
    except Failure:
        ranks = engine_ranks(pipe, engine_addr, job.job)
        detail = ["rank %s: engine %s" % (k, {f: v[f] for f in ("records", "dropped", "liveness", "pid")})
                  for k, v in sorted(ranks.items())]
        detail += ["rank %d: ring write_index %d pid %d" % (k, v.written, v.header["pid"])
                   for k, v in sorted(rings.items())]
        raise Failure("engine does not hold what the hooks wrote for %s:\n  %s" % (
            job.job, "\n  ".join(detail)))
    for rank, ring in rings.items():
        r = ranks[rank]
        check(r["pid"] == ring.header["pid"], "rank %d: engine pid %d, ring pid %d" % (
            rank, r["pid"], ring.header["pid"]))
        check(r["local_rank"] == ring.header["local_rank"], "rank %d: local_rank" % rank)
        check(r["signatures"] == ring.signatures, "rank %d: engine %d signatures, ring %d" % (
            rank, r["signatures"], ring.signatures))
        check(r["dropped"] == 0, "rank %d: %d dropped" % (rank, r["dropped"]))
    log("job %s: engine holds exactly the %d records the hooks wrote" % (
        job.job, sum(r.written for r in rings.values())))
    return ranks
