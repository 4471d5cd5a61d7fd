#!/usr/bin/env bash
# tools/demo.sh — the main job end to end: xpu-engine and xpu-daemon on
# loopback, a multi-rank training job under libxpu_hook.so, then what the
# operator sees (`xpu status`, `xpu ranks --job J`, /metrics).
#
#   tools/demo.sh [DIR]          (`make demo` runs tools/demo.sh build)
#
# DIR is a build directory (engine/xpu-engine, hook/libxpu_hook.so, ...) or a
# bundle made by tools/make_bundle.sh (bin/, lib/). Default: build.
#
# With GPUs (nvidia-smi works and PyTorch sees CUDA) the job is
# `torchrun --standalone --nproc-per-node <ngpus> bench/gpt/train_gpt.py
# --shape tiny --steps 20`; otherwise (or with XPU_DEMO_RUNTIME=fake) it is
# xpu-fake-train with XPU_DEMO_RANKS (default 8) ranks, as processes, on the
# GPU-less test runtime (tests/fake_runtime).
#
# Everything lives in a temporary directory (XPU_DEMO_KEEP=1 keeps it); the
# engine takes ports the kernel picks on 127.0.0.1; every process the demo
# started is stopped on exit, failure and Ctrl-C included. Exit status 0 when
# the job ran and every rank reached the engine, non-zero with a message
# otherwise.
set -uo pipefail

DIR=${1:-build}
RANKS=${XPU_DEMO_RANKS:-8}
STEPS=${XPU_DEMO_STEPS:-150}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

say() { printf '\n==> %s\n' "$*"; }
die() { printf '\ndemo: FAILED: %s\n' "$*" >&2; exit 1; }

# ------------------------------------------------------------------ layout
[ -d "$DIR" ] || die "$DIR is not a directory (give a build directory or a bundle)"
DIR=$(cd "$DIR" && pwd)
if [ -x "$DIR/engine/xpu-engine" ]; then
  LAYOUT=build
  ENGINE=$DIR/engine/xpu-engine
  DAEMON=$DIR/daemon/xpu-daemon
  CLI=$DIR/tools/xpu_cli/xpu
  HOOK=$DIR/hook/libxpu_hook.so
  FAKE_TRAIN=$DIR/fake_runtime/bin/xpu-fake-train
  FAKE_LAUNCH=$DIR/fake_runtime/bin/xpu-fake-launch
  FAKE_LIB=$DIR/fake_runtime/lib
elif [ -x "$DIR/bin/xpu-engine" ]; then
  LAYOUT=bundle
  ENGINE=$DIR/bin/xpu-engine
  DAEMON=$DIR/bin/xpu-daemon
  CLI=$DIR/bin/xpu
  HOOK=$DIR/lib/libxpu_hook.so
  FAKE_TRAIN=$DIR/bin/xpu-fake-train
  FAKE_LAUNCH=$DIR/bin/xpu-fake-launch
  FAKE_LIB=$DIR/lib/xpu-fake-runtime
else
  die "$DIR is neither a build directory (engine/xpu-engine) nor a bundle (bin/xpu-engine); build first: make build"
fi
for f in "$ENGINE" "$DAEMON" "$CLI"; do [ -x "$f" ] || die "missing program $f ($LAYOUT layout)"; done
[ -f "$HOOK" ] || die "missing hook library $HOOK ($LAYOUT layout)"
command -v python3 >/dev/null || die "python3 is needed to read the CLI's JSON"

# ---------------------------------------------------------------- runtime
RUNTIME=fake
NGPUS=0
if [ "${XPU_DEMO_RUNTIME:-auto}" != fake ] && command -v nvidia-smi >/dev/null 2>&1 &&
   nvidia-smi -L >/dev/null 2>&1 &&
   python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
  NGPUS=$(python3 -c 'import torch; print(torch.cuda.device_count())')
  command -v torchrun >/dev/null || die "GPUs and PyTorch found but torchrun is not on PATH"
  [ -f "$REPO/bench/gpt/train_gpt.py" ] || die "GPUs found but $REPO/bench/gpt/train_gpt.py is missing"
  RUNTIME=gpu
elif [ "${XPU_DEMO_RUNTIME:-auto}" = gpu ]; then
  die "XPU_DEMO_RUNTIME=gpu but no usable GPU: nvidia-smi or torch.cuda.is_available() failed"
fi
if [ "$RUNTIME" = fake ]; then
  for f in "$FAKE_TRAIN" "$FAKE_LAUNCH"; do
    [ -x "$f" ] || die "no GPU here, and the GPU-less test runtime is missing: $f ($LAYOUT layout; build with tests enabled, or use a bundle that has bin/xpu-fake-train and lib/xpu-fake-runtime/)"
  done
  [ -e "$FAKE_LIB/libcudart.so.13" ] || die "GPU-less runtime libraries missing in $FAKE_LIB"
fi

# ---------------------------------------------------------------- cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/xpu-demo.XXXXXX") || die "mktemp failed"
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 50); do
    local alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  if [ "${XPU_DEMO_KEEP:-0}" = 1 ]; then echo "demo: kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'echo "demo: interrupted" >&2; exit 130' INT TERM

show_log() { echo "----- $1 -----" >&2; tail -n 30 "$1" >&2; }

wait_log() {  # FILE PATTERN SECONDS PID
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    kill -0 "$4" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

unset TORCHELASTIC_RUN_ID SLURM_JOB_ID LD_PRELOAD

say "XPUTimer demo from $DIR ($LAYOUT layout), work directory $TMP"

# ----------------------------------------------------------------- engine
"$ENGINE" --listen=127.0.0.1:0 --metrics-addr=127.0.0.1:0 --db="$TMP/engine.db" --window-s=2 \
  >"$TMP/engine.log" 2>&1 &
PIDS+=("$!")
wait_log "$TMP/engine.log" "listening on" 20 $! || { show_log "$TMP/engine.log"; die "xpu-engine did not start"; }
read -r PORT MPORT < <(sed -n 's/.*(port \([0-9]*\)), metrics on port \([0-9]*\).*/\1 \2/p' "$TMP/engine.log" | head -1)
[ -n "${PORT:-}" ] && [ -n "${MPORT:-}" ] || { show_log "$TMP/engine.log"; die "cannot read the engine's ports from its log"; }
ENGINE_ADDR=127.0.0.1:$PORT
METRICS_URL=http://127.0.0.1:$MPORT/metrics
export XPU_ENGINE=$ENGINE_ADDR
echo "xpu-engine pid ${PIDS[-1]}: gRPC $ENGINE_ADDR, metrics $METRICS_URL"

# ----------------------------------------------------------------- daemon
SOCK=$TMP/daemon/daemon.sock
mkdir -m 700 "$TMP/daemon"
"$DAEMON" --foreground --socket "$SOCK" --engine "$ENGINE_ADDR" --flush-ms 500 >"$TMP/daemon.log" 2>&1 &
PIDS+=("$!")
wait_log "$TMP/daemon.log" "xpu-daemon ready" 20 $! || { show_log "$TMP/daemon.log"; die "xpu-daemon did not start"; }
echo "xpu-daemon pid ${PIDS[-1]}: socket $SOCK -> $ENGINE_ADDR"

fetch_metrics() {  # prints the /metrics text
  python3 - "$METRICS_URL" <<'EOF'
import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
EOF
}

# -------------------------------------------------------------------- job
JOB=xpu-demo-$$
export XPU_DAEMON_SOCKET=$SOCK XPU_DAEMON=off XPU_JOB_NAME=xpu-demo
if [ "$RUNTIME" = gpu ]; then
  NPROC=$NGPUS
  say "training: torchrun --nproc-per-node $NGPUS bench/gpt/train_gpt.py --shape tiny --steps 20 (LD_PRELOAD=$HOOK)"
  # Only the workers get the hook, not torchrun's agent.
  cat >"$TMP/worker.sh" <<EOF
#!/bin/sh
export LD_PRELOAD="$HOOK"
exec python3 "$REPO/bench/gpt/train_gpt.py" "\$@"
EOF
  chmod +x "$TMP/worker.sh"
  export XPU_JOB=$JOB  # torchrun sets TORCHELASTIC_RUN_ID, which the hook prefers
  torchrun --standalone --nproc-per-node "$NGPUS" --no-python "$TMP/worker.sh" --shape tiny --steps 20 \
    >"$TMP/job.log" 2>&1 &
else
  NPROC=$RANKS
  say "training: $NPROC ranks of xpu-fake-train (processes, via xpu-fake-launch) under LD_PRELOAD=$HOOK on the GPU-less test runtime"
  export XPU_JOB=$JOB LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  "$FAKE_LAUNCH" --nproc "$NPROC" --timeout 300 --env "LD_PRELOAD=$HOOK" -- \
    "$FAKE_TRAIN" --steps "$STEPS" --layers 2 --hidden 512 --tokens 512 --step-sleep-ms 20 \
    >"$TMP/job.log" 2>&1 &
fi
JOB_PID=$!
PIDS+=("$JOB_PID")

# The job id the engine knows (torchrun's run id wins over XPU_JOB).
find_job() {
  "$CLI" --engine "$ENGINE_ADDR" jobs --all --json 2>/dev/null | python3 -c '
import json, sys
jobs = json.load(sys.stdin)["jobs"]
print(jobs[0]["job"] if len(jobs) == 1 else "")' 2>/dev/null
}
ranks_alive() {
  "$CLI" --engine "$ENGINE_ADDR" ranks --job "$1" --json 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin)["ranks"] if r["liveness"] == "alive"))' 2>/dev/null || echo 0
}

say "waiting for $NPROC ranks to register"
ENGINE_JOB=""
for ((i = 0; i < 600; i++)); do
  [ -z "$ENGINE_JOB" ] && ENGINE_JOB=$(find_job)
  if [ -n "$ENGINE_JOB" ] && [ "$(ranks_alive "$ENGINE_JOB")" -ge "$NPROC" ]; then break; fi
  kill -0 "$JOB_PID" 2>/dev/null || break
  sleep 0.2
done
[ -n "$ENGINE_JOB" ] || { show_log "$TMP/job.log"; show_log "$TMP/daemon.log"; die "the job never reached the engine"; }
echo "job $ENGINE_JOB: $(ranks_alive "$ENGINE_JOB") of $NPROC ranks alive"

# Bus bandwidth is a per-window figure: take it while collectives complete.
LIVE_METRICS=$TMP/metrics.live
for ((i = 0; i < 100; i++)); do
  fetch_metrics >"$LIVE_METRICS" 2>/dev/null
  grep -q "^xpu_collective_busbw_bytes_per_second{.*xpu_job=\"$ENGINE_JOB\"" "$LIVE_METRICS" && break
  kill -0 "$JOB_PID" 2>/dev/null || break
  sleep 0.3
done

say "xpu ranks --job $ENGINE_JOB   (while training)"
"$CLI" --engine "$ENGINE_ADDR" ranks --job "$ENGINE_JOB" || die "xpu ranks failed"

say "waiting for the job to finish"
wait "$JOB_PID"
JOB_RC=$?
tail -n 3 "$TMP/job.log"
[ "$JOB_RC" -eq 0 ] || { show_log "$TMP/job.log"; die "the training job exited with status $JOB_RC"; }

# Let the daemon deliver the last batches and the exits.
for ((i = 0; i < 100; i++)); do
  n=$("$CLI" --engine "$ENGINE_ADDR" ranks --job "$ENGINE_JOB" --json 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin)["ranks"] if r["liveness"] == "exited"))' 2>/dev/null || echo 0)
  [ "$n" -ge "$NPROC" ] && break
  sleep 0.2
done

say "xpu status"
"$CLI" --engine "$ENGINE_ADDR" status || die "xpu status failed"
say "xpu ranks --job $ENGINE_JOB"
"$CLI" --engine "$ENGINE_ADDR" ranks --job "$ENGINE_JOB" || die "xpu ranks failed"

say "figures of job $ENGINE_JOB from $METRICS_URL"
sleep 2.5  # one engine window, so that the gauges are current
fetch_metrics >"$TMP/metrics.final" || die "cannot read $METRICS_URL"
python3 - "$ENGINE_JOB" "$TMP/metrics.final" "$LIVE_METRICS" "$NPROC" <<'EOF' || die "the engine's figures are not what the job produced"
import re, sys
job, final_path, live_path, nproc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def parse(path):
    out = []
    try:
        text = open(path).read()
    except OSError:
        return out
    for line in text.splitlines():
        m = re.match(r'^(\w+)\{(.*)\}\s+(\S+)$', line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            if labels.get("xpu_job") == job:
                out.append((m.group(1), labels, float(m.group(3))))
    return out

final, live = parse(final_path), parse(live_path)
def get(series, name, **kw):
    return [v for n, l, v in series if n == name and all(l.get(k) == x for k, x in kw.items())]

records = get(final, "xpu_ingest_records_total")
print("  records received        %d" % (records[0] if records else 0))
for state in ("alive", "silent", "exited"):
    v = get(final, "xpu_job_ranks", state=state)
    print("  ranks %-17s %d" % (state, v[0] if v else 0))
dropped = get(final, "xpu_records_dropped_total")
print("  records dropped         %d" % sum(dropped))  # one series per reason
bw = [(l.get("op"), v) for n, l, v in live if n == "xpu_collective_busbw_bytes_per_second"]
for op, v in sorted(bw):
    print("  busbw %-17s %.2f GB/s (while training)" % (op, v / 1e9))
if not bw:
    print("  busbw                   (no window with a fully timed collective was seen)")
exited = get(final, "xpu_job_ranks", state="exited")
if not records or records[0] <= 0:
    sys.exit("no records of job %s in /metrics" % job)
if not exited or exited[0] != nproc:
    sys.exit("%s of %d ranks exited according to /metrics" % (exited[0] if exited else 0, nproc))
EOF

if [ "$RUNTIME" = gpu ]; then
  say "done: ran on $NGPUS GPU(s) with PyTorch (torchrun), libxpu_hook.so preloaded into every worker"
else
  say "done: ran on the GPU-less test runtime (tests/fake_runtime: CUDA/cuBLAS/NCCL doubles, no GPU used), $NPROC ranks as processes, libxpu_hook.so preloaded"
fi
exit 0
