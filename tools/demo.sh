#!/usr/bin/env bash
# tools/demo.sh — what XPUTimer is for, in about a minute: xpu-engine and
# xpu-daemon on loopback, an 8-rank training job under libxpu_hook.so on the
# GPU-less test runtime in which one rank's GPU slows down and, later, the
# same rank stops issuing work; the demo prints, as they happen, the
# slowdown diagnosis (`xpu report`), the hang report with its culprit
# (`xpu hang`), and the Perfetto timeline it wrote.
#
#   tools/demo.sh [DIR]          (`make demo` builds quietly, then runs this)
#
# DIR is a build directory (engine/xpu-engine, hook/libxpu_hook.so, ...) or a
# bundle made by tools/make_bundle.sh (bin/, lib/). Default: build.
#
# Environment:
#   XPU_DEMO_RANKS      ranks (default 8)
#   XPU_DEMO_SLOW_RANK  the rank whose GPU degrades (default 5)
#   XPU_DEMO_SLOW_AFTER_S, XPU_DEMO_HANG_AFTER_S   when (default 10 s, 40 s)
#   XPU_DEMO_DIR        where the demo's state is kept (default DIR/demo, or
#                       /tmp/xpu-demo-UID where DIR is not writable)
#   XPU_DEMO_STOP=1     stop the engine at the end too (default: it stays up,
#                       holding the job's history, until you stop it)
#   XPU_DEMO_RUNTIME=gpu  instead, a short healthy job on this machine's GPUs
#                       (torchrun bench/gpt/train_gpt.py --shape tiny)
#
# The engine takes ports the kernel picks on 127.0.0.1. The job and the
# daemon are stopped on exit, failure and Ctrl-C included; the engine stays
# up (unless XPU_DEMO_STOP=1) and the demo prints how to query it and how to
# stop it; the next demo run stops it first. Exit status 0 when the job ran,
# every rank reached the engine and (GPU-less runtime) both faults were
# diagnosed on the right rank; non-zero with a message otherwise.
set -uo pipefail

case "${1:-}" in
  -h|--help) sed -n '2,/^set -uo pipefail/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0;;
esac
DIR=${1:-build}
RANKS=${XPU_DEMO_RANKS:-8}
SLOW_RANK=${XPU_DEMO_SLOW_RANK:-5}
SLOW_AFTER_S=${XPU_DEMO_SLOW_AFTER_S:-10}
HANG_AFTER_S=${XPU_DEMO_HANG_AFTER_S:-40}
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
if [ "${XPU_DEMO_RUNTIME:-fake}" = gpu ]; then
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
    python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1 ||
    die "XPU_DEMO_RUNTIME=gpu but no usable GPU: nvidia-smi or torch.cuda.is_available() failed"
  NGPUS=$(python3 -c 'import torch; print(torch.cuda.device_count())')
  command -v torchrun >/dev/null || die "GPUs and PyTorch found but torchrun is not on PATH"
  [ -f "$REPO/bench/gpt/train_gpt.py" ] || die "$REPO/bench/gpt/train_gpt.py is missing"
  RUNTIME=gpu
fi
if [ "$RUNTIME" = fake ]; then
  for f in "$FAKE_TRAIN" "$FAKE_LAUNCH"; do
    [ -x "$f" ] || die "the GPU-less test runtime is missing: $f ($LAYOUT layout; build with tests enabled, or use a bundle that has bin/xpu-fake-train and lib/xpu-fake-runtime/)"
  done
  [ -e "$FAKE_LIB/libcudart.so.13" ] || die "GPU-less runtime libraries missing in $FAKE_LIB"
  [ "$SLOW_RANK" -ge 0 ] 2>/dev/null && [ "$SLOW_RANK" -lt "$RANKS" ] ||
    die "XPU_DEMO_SLOW_RANK=$SLOW_RANK is not a rank of $RANKS"
fi

# ------------------------------------------------------- state and cleanup
# DIR/demo, or a private directory under /tmp where DIR is not writable (an
# install tree).
if [ -n "${XPU_DEMO_DIR:-}" ]; then WORK=$XPU_DEMO_DIR
elif [ -w "$DIR" ]; then WORK=$DIR/demo
else WORK=${TMPDIR:-/tmp}/xpu-demo-$(id -u)
fi
if [ -f "$WORK/engine.pid" ]; then  # the previous demo's engine
  old=$(cat "$WORK/engine.pid")
  if [ -n "$old" ] && grep -q xpu-engine "/proc/$old/cmdline" 2>/dev/null; then
    echo "demo: stopping the previous demo's engine (pid $old)"
    kill -TERM "$old" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
  fi
fi
rm -rf "$WORK" && mkdir -p "$WORK" || die "cannot create $WORK"
WORK=$(cd "$WORK" && pwd)
PIDS=()
ENGINE_PID=""
DEMO_OK=0
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
  # A failed demo, or XPU_DEMO_STOP=1, takes the engine down too.
  if [ -n "$ENGINE_PID" ] && { [ "$DEMO_OK" != 1 ] || [ "${XPU_DEMO_STOP:-0}" = 1 ]; }; then
    kill -TERM "$ENGINE_PID" 2>/dev/null
    rm -f "$WORK/engine.pid"
  fi
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

say "XPUTimer demo from $DIR ($LAYOUT layout); state in $WORK"

# ----------------------------------------------------------------- engine
# In its own session, so that it can stay up after the demo.
setsid "$ENGINE" --listen=127.0.0.1:0 --metrics-addr=127.0.0.1:0 --db="$WORK/engine.db" --window-s=2 \
  >"$WORK/engine.log" 2>&1 </dev/null &
ENGINE_PID=$!
echo "$ENGINE_PID" >"$WORK/engine.pid"
wait_log "$WORK/engine.log" "listening on" 20 "$ENGINE_PID" || { show_log "$WORK/engine.log"; die "xpu-engine did not start"; }
read -r PORT MPORT < <(sed -n 's/.*(port \([0-9]*\)), metrics on port \([0-9]*\).*/\1 \2/p' "$WORK/engine.log" | head -1)
[ -n "${PORT:-}" ] && [ -n "${MPORT:-}" ] || { show_log "$WORK/engine.log"; die "cannot read the engine's ports from its log"; }
ENGINE_ADDR=127.0.0.1:$PORT
METRICS_URL=http://127.0.0.1:$MPORT/metrics
export XPU_ENGINE=$ENGINE_ADDR
X() { "$CLI" --engine "$ENGINE_ADDR" "$@"; }
echo "xpu-engine pid $ENGINE_PID: gRPC $ENGINE_ADDR, metrics $METRICS_URL"

# ----------------------------------------------------------------- daemon
SOCK=$WORK/daemon/daemon.sock
mkdir -m 700 "$WORK/daemon"
"$DAEMON" --foreground --socket "$SOCK" --engine "$ENGINE_ADDR" --flush-ms 500 >"$WORK/daemon.log" 2>&1 &
PIDS+=("$!")
wait_log "$WORK/daemon.log" "xpu-daemon ready" 20 $! || { show_log "$WORK/daemon.log"; die "xpu-daemon did not start"; }
echo "xpu-daemon pid ${PIDS[-1]}: socket $SOCK -> $ENGINE_ADDR"

# -------------------------------------------------------------------- job
JOB=xpu-demo-$$
export XPU_DAEMON_SOCKET=$SOCK XPU_DAEMON=off XPU_JOB_NAME=xpu-demo XPU_JOB=$JOB
T_START=$(date +%s.%N)
if [ "$RUNTIME" = gpu ]; then
  NPROC=$NGPUS
  say "training: torchrun --nproc-per-node $NGPUS bench/gpt/train_gpt.py --shape tiny --steps 20 (LD_PRELOAD=$HOOK)"
  LD_PRELOAD=$HOOK torchrun --standalone --nproc-per-node "$NGPUS" "$REPO/bench/gpt/train_gpt.py" \
    --shape tiny --steps 20 >"$WORK/job.log" 2>&1 &
else
  NPROC=$RANKS
  say "training: $NPROC ranks of xpu-fake-train on the GPU-less test runtime, LD_PRELOAD=$HOOK"
  echo "faults injected: rank $SLOW_RANK's GPU runs its GEMMs 3x slower from ${SLOW_AFTER_S} s on;"
  echo "                 rank $SLOW_RANK stops issuing work at ${HANG_AFTER_S} s (the others then wait in a collective)"
  # GPU-bound steps: GEMMs and collectives long enough to be measured.
  export XPU_FAKE_TFLOPS=2 XPU_FAKE_KERNEL_NS=200000 XPU_FAKE_NET_GBPS=20
  export LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  "$FAKE_LAUNCH" --nproc "$NPROC" --timeout 600 --env "LD_PRELOAD=$HOOK" \
    --rank-env "$SLOW_RANK" XPU_FAKE_SLOW_RANKS="$SLOW_RANK" \
    --rank-env "$SLOW_RANK" XPU_FAKE_SLOW_AFTER_S="$SLOW_AFTER_S" \
    --rank-env "$SLOW_RANK" XPU_FAKE_SLOW_GEMM_FACTOR=3 -- \
    "$FAKE_TRAIN" --steps 1000000 --layers 2 --hidden 512 --tokens 512 --step-sleep-ms 20 \
    --fault-rank "$SLOW_RANK" --hang-after-s "$HANG_AFTER_S" >"$WORK/job.log" 2>&1 &
fi
JOB_PID=$!
PIDS+=("$JOB_PID")
since() { python3 -c 'import sys; print("%.1f" % (float(sys.argv[1]) - float(sys.argv[2])))' "$(date +%s.%N)" "$1"; }
ranks_in() {  # liveness -> count
  X ranks --job "$JOB" --json 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin)["ranks"] if r["liveness"] == sys.argv[1]))' "$1" 2>/dev/null || echo 0
}

say "waiting for $NPROC ranks to register"
for ((i = 0; i < 600; i++)); do
  [ "$(ranks_in alive)" -ge "$NPROC" ] && break
  kill -0 "$JOB_PID" 2>/dev/null || break
  sleep 0.2
done
[ "$(ranks_in alive)" -ge "$NPROC" ] || { show_log "$WORK/job.log"; show_log "$WORK/daemon.log"; die "the job's $NPROC ranks never all reached the engine"; }
echo "job $JOB: $NPROC ranks alive after $(since "$T_START") s"
say "xpu ranks --job $JOB"
X ranks --job "$JOB" || die "xpu ranks failed"

if [ "$RUNTIME" = fake ]; then
  # ------------------------------------------------- the slowdown, then the hang
  say "watching the engine's diagnoses as they come (xpu diagnose --job $JOB, every second)"
  SEEN=$WORK/diagnoses.seen; : >"$SEEN"
  new_diagnoses() {  # prints diagnoses not printed before; exit 0 once slow_gpu names the slow rank
    X diagnose --job "$JOB" --json 2>/dev/null | python3 -c '
import json, sys
seen_path, slow, t = sys.argv[1], int(sys.argv[2]), sys.argv[3]
seen = set(open(seen_path).read().split("\n"))
named = False
for d in json.load(sys.stdin).get("diagnoses", []):
    key = "%s|%s|%s" % (d["kind"], d.get("subject", ""), d.get("ranks"))
    ranks = d.get("ranks") or []
    if d["kind"] == "slow_gpu" and ranks == [slow]:
        named = True
    if key in seen:
        continue
    with open(seen_path, "a") as f:
        f.write(key + "\n")
    r = ",".join(str(x) for x in ranks[:8]) + (",..." if len(ranks) > 8 else "")
    print("  +%6s s  %-24s ranks %-10s team %-14s %s" % (t, d["kind"], r or "-", d.get("team", "-"),
                                                      (d.get("evidence") or "")[:90]))
sys.exit(0 if named else 1)' "$SEEN" "$SLOW_RANK" "$(since "$T_START")"
  }
  found_slow=0
  for ((i = 0; i < SLOW_AFTER_S + 60; i++)); do
    if new_diagnoses; then found_slow=1; break; fi
    kill -0 "$JOB_PID" 2>/dev/null || break
    sleep 1
  done
  [ "$found_slow" = 1 ] || { show_log "$WORK/engine.log"; die "no slow_gpu diagnosis of rank $SLOW_RANK within $((SLOW_AFTER_S + 60)) s"; }
  echo "  (the GPU slowed down at ${SLOW_AFTER_S} s)"
  say "xpu report --job $JOB"
  X report --job "$JOB" || die "xpu report failed"

  say "waiting for the hang (rank $SLOW_RANK stops at ${HANG_AFTER_S} s): xpu hang --job $JOB"
  found_hang=0
  for ((i = 0; i < HANG_AFTER_S + 90; i++)); do
    new_diagnoses >/dev/null 2>&1 || true
    if X hang --job "$JOB" --json 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
def ranks(v):  # [int] or "0-3,7"
    if isinstance(v, list):
        return {int(x) for x in v}
    out = set()
    for part in str(v or "").split(","):
        a, _, b = part.partition("-")
        if a.strip().isdigit():
            out.update(range(int(a), int(b if b.strip().isdigit() else a) + 1))
    return out
sys.exit(0 if r.get("found") and int(sys.argv[1]) in ranks(r.get("culprit_ranks")) else 1)' "$SLOW_RANK" 2>/dev/null; then
      found_hang=1; break
    fi
    kill -0 "$JOB_PID" 2>/dev/null || break
    sleep 1
  done
  [ "$found_hang" = 1 ] || { show_log "$WORK/engine.log"; die "no hang report naming rank $SLOW_RANK within $((HANG_AFTER_S + 90)) s"; }
  echo "  hang report ready $(since "$T_START") s after the start; waiting for the full evidence pass"
  for ((i = 0; i < 20; i++)); do
    X hang --job "$JOB" --json 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if json.load(sys.stdin).get("phase") == "full" else 1)' 2>/dev/null && break
    sleep 1
  done
  say "xpu hang --job $JOB"
  X hang --job "$JOB" || die "xpu hang failed"

  # --------------------------------------------------------------- timeline
  say "xpu timeline dump --job $JOB --last 20000 --out $WORK/timeline"
  X timeline dump --job "$JOB" --last 20000 --out "$WORK/timeline" || die "xpu timeline dump failed"
  TRACE=$(ls "$WORK"/timeline/*.perfetto-trace "$WORK"/timeline/*.pftrace "$WORK"/timeline/*.pb 2>/dev/null | head -1)
  [ -n "$TRACE" ] || TRACE=$(ls -S "$WORK"/timeline/* 2>/dev/null | head -1)
  [ -n "$TRACE" ] || die "the timeline dump wrote no trace into $WORK/timeline"
fi

# ------------------------------------------------------------- the ending
if [ "$RUNTIME" = gpu ]; then
  say "waiting for the job to finish"
  wait "$JOB_PID"; JOB_RC=$?
  [ "$JOB_RC" -eq 0 ] || { show_log "$WORK/job.log"; die "the training job exited with status $JOB_RC"; }
  for ((i = 0; i < 100; i++)); do [ "$(ranks_in exited)" -ge "$NPROC" ] && break; sleep 0.2; done
  say "xpu report --job $JOB"
  X report --job "$JOB" || die "xpu report failed"
else
  say "stopping the hung job"
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  wait "$JOB_PID" 2>/dev/null
fi
say "xpu status"
X status || die "xpu status failed"

DEMO_OK=1
cat <<EOF

==> what is left for you
  engine      pid $ENGINE_PID, still running with the job's history (gRPC $ENGINE_ADDR, $METRICS_URL)
              xpu --engine $ENGINE_ADDR report --job $JOB
              xpu --engine $ENGINE_ADDR hang --job $JOB
              xpu --engine $ENGINE_ADDR timeline dump --job $JOB   (live jobs; the dump below is kept)
              stop it:  kill \$(cat $WORK/engine.pid)
  state       $WORK (engine.db, engine.log, daemon.log, job.log)
EOF
[ -n "${TRACE:-}" ] && cat <<EOF
  timeline    $TRACE
              open https://ui.perfetto.dev and drop the file on it (or: Open trace file)
EOF
cat <<EOF
  again       the same state from scratch: make demo   (or tools/demo.sh $DIR)
EOF
[ "${XPU_DEMO_STOP:-0}" = 1 ] && echo "  (XPU_DEMO_STOP=1: the engine is stopped now)"

if [ "$RUNTIME" = gpu ]; then
  say "done: ran on $NGPUS GPU(s) with PyTorch (torchrun), libxpu_hook.so preloaded into every worker"
else
  say "done: ran on the GPU-less test runtime (tests/fake_runtime: CUDA/cuBLAS/NCCL doubles, no GPU used), $NPROC ranks as processes, libxpu_hook.so preloaded"
fi
exit 0
