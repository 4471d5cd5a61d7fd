#!/usr/bin/env bash
# Slowdown diagnosis on 2 GPUs with the benchmark GPT (bundle at $BUNDLE):
# one engine (window $WINDOW_S s) and an auto-started daemon; the runs share
# the job name, so later runs also have the healthy run's history. Scenarios
# ($SCENARIOS, default all):
#   healthy   no fault: no diagnosis expected
#   hog       a second process runs bf16 GEMMs on GPU 1 (compute hog on rank 1)
#   sync      torch.cuda.synchronize() inside every block (all ranks)
#   gc        rank 1 makes cyclic garbage and runs gc.collect() every step
#   loader    rank 1's DataLoader is slow ($LOADER_MS ms more per batch)
#   ffn8484   FFN width 8484 (not a multiple of 64): un-optimized GEMM shape
#   healthy_launch, sync_launch
#             the same two on the launch-bound shape (--shape launch, job
#             name gpt-bench-launch: the second has the first's history),
#             where a synchronization per block costs time ($LAUNCH_STEPS
#             steps, default 1500)
#   plain_launch
#             healthy_launch without the hook (no diagnosis): the step
#             times of the same shape untraced, to compare with healthy_launch
# For each: `xpu diagnose --job J --json` after the run, and the report.
# DUMP (default "healthy"): the scenarios whose timeline is dumped and
# validated after the run (DUMP_OPS ops, default 200000).
# First (CALIBRATE=1, default) `xpu calibrate` stores this node's GEMM peaks
# and busbw in the engine.
# FRESH=0 keeps the engine database of an earlier call on the same machine
# (its history and calibration), so a long list can be split over calls:
#   SCENARIOS="healthy hog sync" ...; FRESH=0 CALIBRATE=0 SCENARIOS="gc ..." ...
set -u
BUNDLE=$(cd "${BUNDLE:-.bundle}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd); REPO=$(cd "$HERE/../.." && pwd)
RES=${OUT:-$PWD/slowdown-results}; mkdir -p "$RES"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
W=/tmp/xpu-slowdown
if [ "${FRESH:-1}" = 1 ]; then rm -rf "$W"; else pkill -x xpu-daemon; sleep 1; rm -f "$W/d.sock"; fi
mkdir -p "$W"
"$BUNDLE/bin/xpu-engine" --listen 127.0.0.1:17471 --metrics-addr 127.0.0.1:19471 --db "$W/e.db" \
  --window-s "${WINDOW_S:-5}" >> "$W/engine.log" 2>&1 &
EPID=$!; sleep 2
X="$BUNDLE/bin/xpu --engine 127.0.0.1:17471"
if [ "${CALIBRATE:-1}" = 1 ]; then
  # GEMM peak per dtype and busbw per size on these GPUs, stored in the
  # engine for this GPU model (the detectors' reference).
  NV=$($PY -c "import nvidia; print(list(nvidia.__path__)[0])" 2>/dev/null)
  t=$(date +%s)
  timeout 180 $X calibrate --lib-dir "$NV" > "$RES/calibrate.txt" 2>&1
  echo "=== calibrate (rc $?, $(( $(date +%s) - t )) s)"; tail -25 "$RES/calibrate.txt"
fi
STEPS=${STEPS:-400}
for scen in ${SCENARIOS:-healthy hog sync gc loader ffn8484 healthy_launch sync_launch}; do
  args=(); hog=""; shape=gpu; name=gpt-bench; steps=$STEPS
  traced=(XPU_ENGINE=127.0.0.1:17471 LD_PRELOAD=$BUNDLE/lib/libxpu_hook.so XPU_DAEMON_SOCKET=$W/d.sock)
  case $scen in
    plain_launch) shape=launch; steps=${LAUNCH_STEPS:-1500}; traced=();;
    healthy_launch) shape=launch; name=gpt-bench-launch; steps=${LAUNCH_STEPS:-1500};;
    sync_launch) shape=launch; name=gpt-bench-launch; steps=${LAUNCH_STEPS:-1500}; args=(--sync-inside);;
    hog) CUDA_VISIBLE_DEVICES=1 $PY -c "
import torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
while True:
    for _ in range(50): b = a @ a
    torch.cuda.synchronize()" > "$W/hog.log" 2>&1 &
       hog=$!; sleep 5;;
    sync) args=(--sync-inside);;
    gc) args=(--fault-rank 1 --gc-garbage "${GC_OBJECTS:-400000}");;
    loader) args=(--fault-rank 1 --slow-loader-ms "${LOADER_MS:-150}");;
    ffn8484) args=(--ffn 8484);;
  esac
  t0=$(date +%s)
  env "${traced[@]}" XPU_JOB_NAME=$name timeout 240 torchrun --standalone --nproc-per-node 2 "$REPO/bench/gpt/train_gpt.py" \
    --shape "$shape" --steps "$steps" "${args[@]}" --json-out "$W/$scen.json" > "$W/$scen.log" 2>&1
  rc=$?
  [ -n "$hog" ] && kill "$hog" 2>/dev/null
  if [ ${#traced[@]} = 0 ]; then
    echo "=== $scen (rc $rc, $(( $(date +%s) - t0 )) s, untraced): $(cat "$W/$scen.json" 2>/dev/null)"
    continue
  fi
  sleep "$(( ${WINDOW_S:-5} + 2 ))"   # the last window closes
  J=$($X jobs --all --json | $PY -c "import json,sys; js=[j for j in json.load(sys.stdin)['jobs'] if j.get('job_name')=='$name']; print(sorted(js, key=lambda j: j['first_seen_ns'])[-1]['job'] if js else '')")
  echo "=== $scen (rc $rc, $(( $(date +%s) - t0 )) s): job $J; script: $(cat "$W/$scen.json" 2>/dev/null)"
  $X diagnose --job "$J" --all --json > "$RES/diagnose_$scen.json"
  $PY - "$RES/diagnose_$scen.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
ds = d.get("diagnoses", [])
print(f"  {len(ds)} diagnoses")
for x in ds:
    print(f"  - {x.get('kind')} team={x.get('team')} ranks={x.get('ranks')} severity={x.get('severity')} active={x.get('active')}")
    print(f"      {str(x.get('evidence'))[:400]}")
PYEOF
  $X report --job "$J" > "$RES/report_$scen.txt" 2>&1
  # Profiling window (CUPTI) the throughput detector may have started.
  $X profile --job "$J" --last --json > "$RES/profile_$scen.json" 2>&1 && \
    echo "  profiling window: $(head -c 300 "$RES/profile_$scen.json")"
  if [[ " ${DUMP-healthy} " == *" $scen "* ]]; then
    # The run's timeline (its daemon still holds it; the last $DUMP_OPS
    # ops), checked with the independent decoder; the files go to $RES for
    # offline checks.
    $X timeline dump --job "$J" --last "${DUMP_OPS:-200000}" --out "$RES/$scen-tl" --format both \
      > "$RES/$scen-dump.txt" 2>&1
    "$BUNDLE/bin/xpu-trace-validate" --perfetto "$RES/$scen-tl/trace.perfetto-trace" > "$RES/$scen-validate.txt" 2>&1
    echo "  timeline dump: perfetto valid rc $?; $(tail -1 "$RES/$scen-validate.txt")"
    "$BUNDLE/bin/xpu-trace-validate" --json "$RES/$scen-tl/trace.json" >> "$RES/$scen-validate.txt" 2>&1
    echo "  chrome json valid rc $?; $(tail -1 "$RES/$scen-validate.txt")"
    rm -rf "$RES/$scen-tl/raw"
  fi
done
kill $EPID 2>/dev/null
sleep 1
# The engine's log and database, each run's log (rank 0 prints every step)
# and summary.
cp "$W/engine.log" "$W"/e.db* "$W"/*.log "$W"/*.json "$RES/" 2>/dev/null
grep -ciE "diagnos" "$W/engine.log"
