#!/usr/bin/env bash
# Hang diagnosis on $NPROC GPUs (default 2; bundle at $BUNDLE), with the
# benchmark GPT (DDP) under LD_PRELOAD, an engine and an auto-started daemon:
#   sigstop    rank $r is stopped with SIGSTOP mid-training, for each r in
#              $STOP_RANKS (default 1)
#   python     rank 1 sleeps forever in Python before a step's collectives
#   mismatch   rank 1 issues one extra all-reduce
# STOPS_PER_RUN=1: the ranks of $STOP_RANKS are stopped one after the other
# in one run (SIGCONT in between), one start-up per protocol. The ring
# check on 2 GPUs within 4 minutes:
#   PROTOS="Simple LL LL128" SCENARIOS=sigstop STOP_RANKS="1 0" STOPS_PER_RUN=1 \
#   DUMP_TL=0 WAIT_S=30 PRE_FAULT_S=2 BUNDLE=.bundle tests/gpu/run_hang_check.sh
# Each scenario runs once per NCCL protocol in $PROTOS ("Simple LL LL128";
# default: one run with NCCL's own choice); with $PROTOS set, NCCL_ALGO=Ring
# too, so the intra-kernel reads see a ring.
# Per run: the time from the fault to the engine's suspicion and to the
# diagnosis (the report's suspected_ns / diagnosed_ns against the moment of
# the fault, host clock), the verdict, the ranks the intra-kernel ring
# progress names, and the link; one "TABLE" line each, a summary at the end.
# In the first sigstop run, before the fault, `xpu timeline dump` of the job,
# with its sizes per rank per step.
set -u
BUNDLE=$(cd "${BUNDLE:-.bundle}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd); REPO=$(cd "$HERE/../.." && pwd)
RES=${OUT:-$PWD/hang-results}; mkdir -p "$RES"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
NPROC=${NPROC:-2}
PORT=17440
now() { date +%s.%N; }
job_of() { $X jobs --json 2>>"$W/cli.err" | $PY -c 'import json,sys; js=json.load(sys.stdin)["jobs"]; js=[j for j in js if j["ranks"]>=2 and j["state"]!="finished"]; print(js[-1]["job"] if js else "")'; }
pid_of() { $X ranks --job "$1" --json | $PY -c "import json,sys; print([r['pid'] for r in json.load(sys.stdin)['ranks'] if r['rank']==$2][0])"; }
# One line of the table from the report: times relative to the fault.
table_line() {  # scen proto stop_rank t0 json_file
  $PY - "$@" <<'PYEOF'
import json, sys
scen, proto, stop, t0, path = sys.argv[1:6]
try:
    r = json.load(open(path))
except Exception:
    r = {}
if not r.get("found"):
    print(f"TABLE {scen} {proto} stopped={stop} no-diagnosis")
    sys.exit(0)
t0 = float(t0)
sus = r.get("suspected_ns", 0) / 1e9 - t0
dia = r.get("diagnosed_ns", 0) / 1e9 - t0
named = ",".join(str(x) for x in r.get("ring_named", [])) or "-"
print(f"TABLE {scen} {proto} stopped={stop} suspected_s={sus:.1f} diagnosed_s={dia:.1f} "
      f"class={r.get('classification')} team={r.get('team')} culprits={r.get('culprit_ranks')} "
      f"ring_named={named} link={r.get('faulty_link') or '-'} evidence_ms={r.get('evidence_ms')}")
for d in r.get("details", []):
    if "ring" in d:
        print("   ", d[:300])
PYEOF
}
first_sigstop=1
for proto in ${PROTOS:-default}; do
for scen in ${SCENARIOS:-sigstop python mismatch}; do
for stop in $([ "$scen" = sigstop ] && [ "${STOPS_PER_RUN:-0}" != 1 ] && echo "${STOP_RANKS:-1}" || echo 1); do
  tag="$scen-$proto-r$stop"
  W=/tmp/xpu-hang-$tag; rm -rf "$W"; mkdir -p "$W"
  PORT=$((PORT + 1))  # a fresh port per run: the previous engine may linger
  X="$BUNDLE/bin/xpu --engine 127.0.0.1:$PORT"
  "$BUNDLE/bin/xpu-engine" --listen 127.0.0.1:$PORT --metrics-addr 127.0.0.1:$((PORT + 2000)) --db "$W/e.db" > "$W/engine.log" 2>&1 &
  EPID=$!; sleep 1
  case $scen in
    python) fault=(--fault-rank 1 --python-hang-at 60);;
    mismatch) fault=(--fault-rank 1 --extra-allreduce-at 60);;
    *) fault=();;
  esac
  nccl=()
  [ "$proto" != default ] && nccl=(NCCL_PROTO="$proto" NCCL_ALGO=Ring)
  env "${nccl[@]}" XPU_ENGINE=127.0.0.1:$PORT LD_PRELOAD=$BUNDLE/lib/libxpu_hook.so XPU_DAEMON_SOCKET=$W/d.sock \
    torchrun --standalone --nproc-per-node "$NPROC" "$REPO/bench/gpt/train_gpt.py" --shape gpu --steps 100000 \
    "${fault[@]}" > "$W/train.log" 2>&1 &
  TPID=$!
  J=""; for i in $(seq 60); do sleep 1; J=$(job_of); [ -n "$J" ] && break; done
  # Steady state: start-up (imports, NCCL init, first steps) done.
  for i in $(seq 90); do [ "$(grep -c step_ms "$W/train.log")" -ge "${PRE_FAULT_STEPS:-3}" ] && break; sleep 1; done
  sleep "${PRE_FAULT_S:-5}"
  # One run per scenario; with $STOPS_PER_RUN=1 (sigstop) the ranks of
  # $STOP_RANKS are stopped in turn in the same run (SIGCONT and the job's
  # recovery in between), which saves a start-up per ring position.
  stops=1; [ "$scen" = sigstop ] && [ "${STOPS_PER_RUN:-0}" = 1 ] && stops="${STOP_RANKS:-1}"
  [ "$scen" = sigstop ] && [ "${STOPS_PER_RUN:-0}" != 1 ] && stops=$stop
  for s in $stops; do
  stag="$scen-$proto-r$s"
  if [ "$scen" = sigstop ]; then
    if [ "$first_sigstop" = 1 ] && [ "${DUMP_TL:-1}" = 1 ]; then
      t=$(now); $X timeline dump --job "$J" --last 20000 --out "$W/tl" > "$W/tl.txt" 2>&1; t2=$(now)
      echo "timeline dump took $($PY -c "print(round($t2-$t,2))") s"; tail -3 "$W/tl.txt"
      du -b "$W"/tl/* 2>/dev/null | sort -n | tail -5
    fi
    first_sigstop=0
    P=$(pid_of "$J" "$s"); T0=$(now); kill -STOP "$P"; echo "== $stag: SIGSTOP rank $s pid $P"
  else
    for i in $(seq 240); do grep -qE "sleeping forever|extra all-reduce" "$W/train.log" && break; sleep 0.5; done
    T0=$(now); echo "== $stag: fault injected (seen in log)"
  fi
  diag=""
  for i in $(seq "${WAIT_S:-75}"); do
    sleep 1
    out=$($X hang --job "$J" --json 2>/dev/null)
    # A report of this fault: suspected after it (an earlier stop's report
    # stays the latest until the next one).
    if echo "$out" | $PY -c "import json,sys; r=json.load(sys.stdin); sys.exit(0 if r.get('found') and r.get('suspected_ns',0)/1e9 > $T0 - 1 else 1)" 2>/dev/null; then
      diag=$($PY -c "print(round($(now)-$T0,1))"); break
    fi
  done
  # The refinement (full pass) may follow the first verdict.
  sleep "${REFINE_WAIT_S:-3}"; out2=$($X hang --job "$J" --json 2>/dev/null)
  echo "$out" > "$RES/hang_$stag.json"; echo "$out2" > "$RES/hang_${stag}_refined.json"
  echo "   polled: diagnosis seen after ${diag:-none} s"
  table_line "$scen" "$proto" "$([ "$scen" = sigstop ] && echo "$s" || echo "-")" "$T0" "$RES/hang_$stag.json" \
    | tee -a "$RES/table.txt"
  table_line "$scen-refined" "$proto" "$([ "$scen" = sigstop ] && echo "$s" || echo "-")" "$T0" \
    "$RES/hang_${stag}_refined.json" | tee -a "$RES/table.txt"
  $X hang --job "$J" > "$RES/hang_$stag.txt" 2>&1; sed -n 1,14p "$RES/hang_$stag.txt"
  if [ "$scen" = sigstop ]; then
    kill -CONT "$P" 2>/dev/null
    # The job goes on: wait for new steps before the next stop.
    n=$(grep -c step_ms "$W/train.log"); for i in $(seq 40); do sleep 1
      [ "$(grep -c step_ms "$W/train.log")" -ge $((n + 3)) ] && break; done
  fi
  done
  kill $TPID 2>/dev/null; sleep 2; pkill -9 -f train_gpt.py 2>/dev/null; pkill -9 -f "torchrun --standalone" 2>/dev/null
  kill $EPID 2>/dev/null; pkill -f "xpu-daemon --socket $W" 2>/dev/null; wait $EPID 2>/dev/null; sleep 1
  cp "$W/engine.log" "$RES/engine_$tag.log" 2>/dev/null
  grep -v "^W11" "$W/train.log" | tail -3 > "$RES/train_$tag.tail"
done
done
done
echo "=== summary"; grep "^TABLE" "$RES/table.txt"
