#!/usr/bin/env bash
# The pip wheel on a GPU machine: a fresh venv over the machine's PyTorch
# (--system-site-packages from $TORCH_PY, default /opt/torch/.venv/bin/python),
# `pip install --no-index --no-deps` of the wheel in $WHEEL_DIR (default
# .whl-xpu/, made by tools/make_wheel.sh), an engine from the wheel, and a
# short one-rank torchrun job (matmuls + a one-rank all-reduce) through
#   python -m xputimer run -- torchrun --nproc-per-node 1 ...
# with the daemon auto-started by the hook from the wheel. Reports what
# happened: the install, which native parts loaded, the auto-started daemon's
# binary, the jobs and ranks the engine saw (the torchrun agent must not be a
# job of its own), records per rank, and anything the hook printed.
# Results: $OUT/wheel_check.txt (everything) and $OUT/summary.txt (PASS/FAIL
# lines). Ends within about 2 minutes.
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
RES=${OUT:-$PWD/wheel-results}; mkdir -p "$RES"
LOG=$RES/wheel_check.txt; SUM=$RES/summary.txt; : >"$LOG"; : >"$SUM"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
TORCH_PY=${TORCH_PY:-/opt/torch/.venv/bin/python}
WHEEL_DIR=${WHEEL_DIR:-$REPO/.whl-xpu}
W=$(mktemp -d /tmp/xpu-wheel-check.XXXXXX)
say() { echo "$*" | tee -a "$LOG"; }
result() { echo "$1 $2" | tee -a "$SUM" >>"$LOG"; }
section() { echo; echo "=== $*"; } >>"$LOG"
cleanup() {
  [ -n "${ENGINE_PID:-}" ] && kill "$ENGINE_PID" 2>/dev/null
  # The daemon the hook started, by its pid file-less identity: the binary of
  # this venv serving this run's socket.
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case "$exe" in "$W"/*xpu-daemon) kill "${p#/proc/}" 2>/dev/null ;; esac
  done
}
trap cleanup EXIT

section "machine"
{ uname -a; nvidia-smi -L 2>&1 | head -8; "$TORCH_PY" -V; } >>"$LOG" 2>&1
WHEEL=$(ls "$WHEEL_DIR"/xputimer-*.whl 2>/dev/null | head -1)
if [ -z "$WHEEL" ]; then
  result FAIL "no wheel in $WHEEL_DIR (tools/make_wheel.sh build .whl-xpu)"; exit 1
fi
say "wheel: $(basename "$WHEEL")"

section "venv + pip install --no-index --no-deps"
if ! timeout 60 "$TORCH_PY" -m venv --system-site-packages "$W/venv" >>"$LOG" 2>&1; then
  result FAIL "venv creation from $TORCH_PY"; exit 1
fi
PY=$W/venv/bin/python
if timeout 60 "$PY" -m pip install --no-index --no-deps "$WHEEL" >>"$LOG" 2>&1; then
  result PASS "pip install --no-index --no-deps $(basename "$WHEEL")"
else
  result FAIL "pip install of the wheel (see wheel_check.txt)"; exit 1
fi
PKG=$("$PY" -c 'import os, xputimer; print(os.path.dirname(xputimer.__file__))' 2>>"$LOG")
say "package: $PKG"
"$PY" - >>"$LOG" 2>&1 <<'EOF'
import sys, xputimer
try:
    from xputimer import _xputimer_native  # noqa: F401
    print("native module: loaded under Python %d.%d" % sys.version_info[:2])
except Exception as e:
    print("native module: not loaded (%s); xputimer uses ctypes" % e)
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())
EOF
for b in xpu-daemon xpu-engine xpu; do
  if [ -x "$PKG/_bundle/bin/$b" ] && "$PKG/_bundle/bin/$b" --version >>"$LOG" 2>&1; then
    result PASS "$b from the wheel runs (--version)"
  else
    result FAIL "$b from the wheel does not run"; ldd "$PKG/_bundle/bin/$b" >>"$LOG" 2>&1
  fi
done
ldd "$PKG/_bundle/lib/libxpu_hook.so" | grep -i "not found" >>"$LOG" &&
  result FAIL "libxpu_hook.so has unresolved libraries"

section "engine (from the wheel)"
PORT=17710
"$PKG/_bundle/bin/xpu-engine" --listen 127.0.0.1:$PORT --metrics-addr 127.0.0.1:$((PORT + 1)) \
  --db "$W/engine.db" >"$W/engine.log" 2>&1 &
ENGINE_PID=$!
sleep 2
X="$W/venv/bin/xpu --engine 127.0.0.1:$PORT"

section "job: python -m xputimer run -- torchrun --nproc-per-node 1 train.py"
cat >"$W/train.py" <<'EOF'
import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
torch.cuda.set_device(dev)
a = torch.randn(2048, 2048, device=dev)
g = torch.ones(1 << 20, device=dev)
for step in range(60):
    for _ in range(4):
        a = torch.tanh(a @ a)
    dist.all_reduce(g)
    torch.cuda.synchronize()
    time.sleep(0.1)
dist.destroy_process_group()
print("train.py done")
EOF
export XPU_ENGINE=127.0.0.1:$PORT XPU_DAEMON_SOCKET=$W/sock/daemon.sock XPU_JOB=wheel-check-$$
mkdir -p "$W/sock"
TORCHRUN=$(dirname "$TORCH_PY")/torchrun
[ -x "$TORCHRUN" ] || TORCHRUN="$PY -m torch.distributed.run"
t0=$(date +%s)
timeout 75 "$PY" -m xputimer run -- $TORCHRUN --nproc-per-node 1 --master-port 29533 \
  "$W/train.py" >"$W/job.out" 2>"$W/job.err"
rc=$?
say "job exit $rc after $(( $(date +%s) - t0 )) s"
{ echo "--- stdout"; tail -20 "$W/job.out"; echo "--- stderr (the hook's own lines start with xputimer:)"; tail -40 "$W/job.err"; } >>"$LOG"
[ $rc = 0 ] && result PASS "torchrun job under python -m xputimer run (exit 0)" ||
  result FAIL "torchrun job exit $rc"
grep -h "^xputimer:" "$W/job.err" >>"$SUM"

section "auto-started daemon"
dpids=()
for p in /proc/[0-9]*; do
  exe=$(readlink "$p/exe" 2>/dev/null) || continue
  case "$exe" in "$W"/*xpu-daemon) dpids+=("${p#/proc/}"); say "daemon pid ${p#/proc/}: $exe" ;; esac
done
[ ${#dpids[@]} = 1 ] && result PASS "one daemon auto-started from the wheel (${dpids[*]})" ||
  result FAIL "${#dpids[@]} daemons from the wheel's bin/ (want 1)"
tail -20 "$W/sock/daemon.log" >>"$LOG" 2>&1

section "engine view"
sleep 3
$X jobs --all --json >"$W/jobs.json" 2>>"$LOG"; cat "$W/jobs.json" >>"$LOG"
$X ranks --job "$XPU_JOB" --json >"$W/ranks.json" 2>>"$LOG"; cat "$W/ranks.json" >>"$LOG"
"$PY" - "$W/jobs.json" "$W/ranks.json" "$XPU_JOB" >>"$SUM" 2>>"$LOG" <<'EOF'
import json, sys
job = sys.argv[3]
try:
    jobs = json.load(open(sys.argv[1])).get("jobs", [])
    ranks = json.load(open(sys.argv[2])).get("ranks", [])
except Exception as e:
    print("FAIL engine view of job %s: %s" % (job, e))
    sys.exit(0)
mine = [j for j in jobs if j.get("job") == job]
others = [j.get("job") for j in jobs if j.get("job") != job]
print(("PASS" if len(mine) == 1 else "FAIL") + " engine lists job %s: %s" % (job, mine[:1]))
print(("PASS" if not others else "FAIL") +
      " no other job (the torchrun agent is not a job): %s" % (others or "none"))
recs = [(r.get("rank"), r.get("records")) for r in ranks]
ok = len(ranks) == 1 and all((n or 0) > 0 for _, n in recs)
print(("PASS" if ok else "FAIL") + " ranks and records: %s" % recs)
EOF
curl -s "http://127.0.0.1:$((PORT + 1))/metrics" >"$W/metrics.txt" 2>/dev/null &&
  grep -E '^xpu_(build_info|ingest_records_total|rank_step_seconds)' "$W/metrics.txt" | head -12 >>"$LOG"
grep -q "^xpu_build_info" "$W/metrics.txt" 2>/dev/null && grep -E '^xpu_rank_' "$W/metrics.txt" | grep -q 'UUID="GPU-' &&
  result PASS "per-rank series carry the GPU's UUID (dcgm-exporter labels)" ||
  result INFO "no per-rank series with UUID on /metrics yet (short job)"
tail -30 "$W/engine.log" >>"$LOG"
echo; cat "$SUM"
