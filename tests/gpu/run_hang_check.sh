#!/usr/bin/env bash
# Hang diagnosis and timeline dump on 2 GPUs (bundle at $BUNDLE), with the
# benchmark GPT under LD_PRELOAD, an engine and an auto-started daemon:
#   sigstop    rank 1 is stopped with SIGSTOP mid-training
#   python     rank 1 sleeps forever in Python before a step's collectives
#   mismatch   rank 1 issues one extra all-reduce
# For each: time from the fault to the first suspicion and to the diagnosis
# (`xpu hang --job J --json` polled every second), and the diagnosis itself.
# In the sigstop run, before the fault, `xpu timeline dump` of the job, with
# its sizes per rank per step.
set -u
BUNDLE=$(cd "${BUNDLE:-.bundle}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd); REPO=$(cd "$HERE/../.." && pwd)
RES=${OUT:-$PWD/hang-results}; mkdir -p "$RES"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
PORT=17440
now() { date +%s.%N; }
job_of() { $X jobs --json 2>>"$W/cli.err" | $PY -c 'import json,sys; js=json.load(sys.stdin)["jobs"]; js=[j for j in js if j["ranks"]>=2 and j["state"]!="finished"]; print(js[-1]["job"] if js else "")'; }
pid_of() { $X ranks --job "$1" --json | $PY -c "import json,sys; print([r['pid'] for r in json.load(sys.stdin)['ranks'] if r['rank']==$2][0])"; }
for scen in ${SCENARIOS:-sigstop python mismatch}; do
  W=/tmp/xpu-hang-$scen; rm -rf "$W"; mkdir -p "$W"
  PORT=$((PORT + 1))  # a fresh port per scenario: the previous engine may linger
  X="$BUNDLE/bin/xpu --engine 127.0.0.1:$PORT"
  "$BUNDLE/bin/xpu-engine" --listen 127.0.0.1:$PORT --metrics-addr 127.0.0.1:$((PORT + 2000)) --db "$W/e.db" > "$W/engine.log" 2>&1 &
  EPID=$!; sleep 1
  case $scen in
    python) fault=(--fault-rank 1 --python-hang-at 60);;
    mismatch) fault=(--fault-rank 1 --extra-allreduce-at 60);;
    *) fault=();;
  esac
  XPU_ENGINE=127.0.0.1:$PORT LD_PRELOAD=$BUNDLE/lib/libxpu_hook.so XPU_DAEMON_SOCKET=$W/d.sock \
    torchrun --standalone --nproc-per-node 2 "$REPO/bench/gpt/train_gpt.py" --shape gpu --steps 100000 \
    "${fault[@]}" > "$W/train.log" 2>&1 &
  TPID=$!
  J=""; for i in $(seq 60); do sleep 1; J=$(job_of); [ -n "$J" ] && break; done
  sleep "${PRE_FAULT_S:-25}"  # steady state: start-up (imports, NCCL init, first step) done
  if [ "$scen" = sigstop ]; then
    s0=$(grep -c step_ms "$W/train.log")
    t=$(now); $X timeline dump --job "$J" --last 20000 --out "$W/tl" > "$W/tl.txt" 2>&1; t2=$(now)
    s1=$(grep -c step_ms "$W/train.log")
    echo "timeline dump took $($PY -c "print(round($t2-$t,2))") s; rank-0 steps so far $s1"; tail -3 "$W/tl.txt"
    du -b "$W"/tl/* 2>/dev/null | sort -n | tail -5
    P=$(pid_of "$J" 1); T0=$(now); kill -STOP "$P"; echo "SIGSTOP rank 1 pid $P"
  else
    T0=$(grep -m1 -E "sleeping forever|extra all-reduce" "$W/train.log" >/dev/null && now)
    for i in $(seq 120); do grep -qE "sleeping forever|extra all-reduce" "$W/train.log" && break; sleep 0.5; done
    T0=$(now); echo "fault injected (seen in log)"
  fi
  sus=""; diag=""
  for i in $(seq "${WAIT_S:-75}"); do
    sleep 1
    out=$($X hang --job "$J" --json 2>/dev/null)
    [ -z "$sus" ] && grep -q '"xpu_hang\|hang' "$W/engine.log" 2>/dev/null && sus=$($PY -c "print(round($(now)-$T0,1))")
    if echo "$out" | grep -q '"found":true'; then diag=$($PY -c "print(round($(now)-$T0,1))"); break; fi
  done
  echo "== $scen: diagnosis after ${diag:-none} s (engine log first mentions a hang after ~${sus:-?} s)"
  echo "$out" > "$RES/hang_$scen.json"
  $X hang --job "$J" > "$RES/hang_$scen.txt" 2>&1; head -24 "$RES/hang_$scen.txt"
  [ "$scen" = sigstop ] && kill -CONT "$P" 2>/dev/null
  echo "--- train.log tail"; grep -v "^W11" "$W/train.log" | tail -4
  kill $TPID 2>/dev/null; sleep 2; pkill -9 -f train_gpt.py 2>/dev/null; pkill -9 -f "torchrun --standalone" 2>/dev/null
  kill $EPID 2>/dev/null; pkill -f "xpu-daemon --socket $W" 2>/dev/null; wait $EPID 2>/dev/null; sleep 1
  grep -iE "hang|evidence" "$W/engine.log" | head -8
  cp "$W/engine.log" "$RES/engine_$scen.log" 2>/dev/null
done
