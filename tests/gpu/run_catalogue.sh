#!/usr/bin/env bash
# The GPU fault catalogue (docs/diagnosis-catalogue.md): each case runs the
# benchmark GPT (bench/gpt/train_gpt.py) under the hook (bundle at $BUNDLE,
# default .bundle) with one engine (window $WINDOW_S s, default 3) and an
# auto-started daemon, injects one fault, and scores what the engine says
# (tests/gpu/catalogue_eval.py): detected, culprit correct, team correct,
# time to diagnosis. On 2+ GPUs every case below runs; on 1 GPU only the
# world-1 cases and the world-1 healthy run.
#
#   case         world fault                                  expected
#   stop1        1  the only rank gets SIGSTOP               hang non-communication, rank 0, operations
#   python1      1  the only rank sleeps forever in Python   hang non-communication, rank 0, algorithm
#   gc1          1  gc.collect() over cyclic garbage each step  kernel_issue_stall(gc), rank 0, algorithm
#   extra_ar     2  rank 1 issues one extra all-reduce       hang mismatch, rank 1, algorithm
#   sync1        2  rank 1 synchronizes inside every block   kernel_issue_stall(sync), rank 1, algorithm
#   side_gemm    2  rank 1 runs extra GEMMs on a 2nd stream  extra work on rank 1, algorithm
#   slowgpu1     1  a GEMM hog shares the GPU from $HOG_AFTER_S s on  slow_gpu, rank 0, operations
#   slowgpu2     2  a GEMM hog shares rank 1's GPU           slow_gpu, rank 1, operations
#   loader1      1  the DataLoader 150 ms slower per batch   slow_dataloader, rank 0, algorithm
#   loader2      2  rank 1's DataLoader 150 ms slower        slow_dataloader, rank 1, algorithm
#   ffn1         1  FFN width 8484 (not a multiple of 64)    unoptimized_gemm, rank 0, infrastructure
#   stop2        2  rank 1 gets SIGSTOP                      hang non-communication, rank 1, operations
#   python2      2  rank 1 sleeps in Python, rank 0 waits    hang non-communication, rank 1, algorithm
#   healthy_gpu, healthy_launch, healthy_fsdp (world 2; healthy1 on 1 GPU)
#   kernel2      2  rank 1 launches a GPU kernel that never ends  hang non-communication, rank 1, operations
#   stop4        4  rank 2 gets SIGSTOP                      hang non-communication, rank 2, operations
#   python4      4  rank 3 sleeps in Python, the others wait hang non-communication, rank 3, algorithm
#   extra_ar4    4  rank 2 issues one extra all-reduce       hang mismatch, rank 2, algorithm
#   slowgpu4     4  a GEMM hog shares rank 2's GPU           slow_gpu, rank 2, operations
#                   (world-4 cases run only with 4+ GPUs)
#                   no fault                                 no diagnosis at all
#
# Hard limits: every case is killed after its own limit (hang cases
# $HANG_LIMIT_S, default 80 s; the others $RUN_LIMIT_S, default 75 s), and
# cases not started by $TOTAL_S (default 430 s) are recorded as skipped.
# With 2+ GPUs the world-1 cases run two at a time, one per GPU.
# $CASES picks cases (default all, in the order above). ARRIVALS=1 records
# when each rank's records reach the engine (arrivals.txt per case). --dry-run prints the
# plan and the commands without running anything (no GPU needed).
#
# $ENGINE_LOG_LEVEL (default info) is the engine's --log-level: debug adds
# one line per window and job of what the GEMM rule judged (engine.log).
#
# Output under $OUT (default ./catalogue-results): catalogue.tgz (every
# report as printed, JSON, engine and training logs) and summary.txt (the
# accuracy table, one row per case, and the times).
#
# --fake PATHS_JSON: the same catalogue on the GPU-less runtime, the paths
# of the build's binaries from PATHS_JSON (tests/e2e_hang's e2e_paths.json),
# torchrun replaced by tests/gpu/fake_torchrun (the faults mapped onto
# xpu-fake-train and a Python model, the hog onto the fake GEMMs of that
# rank, the FFN width onto fake GEMMs that are XPU_FAKE_MISALIGNED_FACTOR
# slower when a dimension is not a multiple of 64; FSDP, the
# second-stream GEMMs and the never-ending GPU kernel have no emulation and
# are skipped). DOC=path writes the table into that file
# (between the "catalogue:gpu" or "catalogue:gpu-less" markers).
set -u
DRY=0; FAKE=""
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1; shift;;
    --fake) FAKE=$2; shift 2;;
    -h|--help) sed -n '2,/^set -u$/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0;;
    *) echo "run_catalogue.sh: unknown argument $1" >&2; exit 2;;
  esac
done
HERE=$(cd "$(dirname "$0")" && pwd); REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-$PWD/catalogue-results}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
W=${CATALOGUE_WORK:-/tmp/xpu-catalogue-$$}
if [ -n "$FAKE" ]; then
  # A bundle-shaped directory of links to the build's binaries.
  pj() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$FAKE" "$1"; }
  FB=$W.bundle; rm -rf "$FB"; mkdir -p "$FB/bin" "$FB/lib" "$FB/shim"
  ln -s "$(pj engine)" "$FB/bin/xpu-engine"; ln -s "$(pj cli)" "$FB/bin/xpu"; ln -s "$(pj daemon)" "$FB/bin/xpu-daemon"
  ln -s "$(pj hook)" "$FB/lib/libxpu_hook.so"; ln -s "$HERE/fake_torchrun" "$FB/shim/torchrun"
  export XPU_DAEMON_BIN=$(pj daemon) XPU_FAKE_TRAIN=$(pj fake_train) XPU_FAKE_LAUNCH=$(pj fake_launch) \
    XPU_FAKE_LIB_DIR=$(pj fake_lib_dir) XPU_EVIDENCE_FAKE_NCCL=1 PATH=$FB/shim:$PATH
  BUNDLE=$FB; NGPU=2
  PORT=${PORT:-$((20000 + $$ % 20000))}
fi
BUNDLE=$(cd "${BUNDLE:-.bundle}" 2>/dev/null && pwd || echo "${BUNDLE:-.bundle}")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
if ! command -v torchrun > /dev/null && [ -x /opt/torch/.venv/bin/torchrun ]; then
  export PATH=/opt/torch/.venv/bin:$PATH
fi
PY=${PY:-python3}
EVAL="$PY $HERE/catalogue_eval.py"
WINDOW_S=${WINDOW_S:-3}
HANG_LIMIT_S=${HANG_LIMIT_S:-80}
RUN_LIMIT_S=${RUN_LIMIT_S:-75}
TOTAL_S=${TOTAL_S:-430}
RUN_S=${RUN_S:-20}          # seconds of steps in a slowdown or healthy run
HOG_AFTER_S=${HOG_AFTER_S:-10}  # slowgpu1: seconds of clean steps before the hog starts
ROWS=$OUT/rows.jsonl; SUM=$OUT/summary.txt
T_START=$(date +%s)
[ -z "${NGPU:-}" ] && NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
NGPU=${NGPU:-0}
[ "$DRY" = 1 ] && [ "$NGPU" = 0 ] && NGPU=2
PORT=${PORT:-17530}
ENGINE=127.0.0.1:$PORT
X="$BUNDLE/bin/xpu --engine $ENGINE"

# name world shape parallel kind expect ranks team fault-args...
#   kind: stop (SIGSTOP rank RANKS), hang (the fault is in the args; the
#   line it prints starts the clock), hog (a bf16 GEMM loop shares rank
#   RANKS's GPU: from the start with 2 ranks, after HOG_AFTER_S s of steps
#   with one; the hog's start starts the clock), run (slowdown or healthy: RUN_S s of
#   steps, then the diagnoses of the whole run).
CASE_LINES="
stop1 1 gpu ddp stop hang_non_communication 0 operations
python1 1 gpu ddp hang hang_non_communication 0 algorithm --fault-rank 0 --python-hang-at 30
gc1 1 gpu ddp run kernel_issue_stall:gc 0 algorithm --fault-rank 0 --gc-garbage 400000
healthy1 1 gpu ddp run none - - 
extra_ar 2 gpu ddp hang hang_mismatch 1 algorithm --fault-rank 1 --extra-allreduce-at 30
sync1 2 gpu ddp run kernel_issue_stall:sync 1 algorithm --fault-rank 1 --sync-inside --sync-fault-rank
side_gemm 2 gpu ddp run kernel_issue_stall|void_minority|extra_gpu_work|slow_gpu 1 algorithm --fault-rank 1 --side-gemms 48
slowgpu1 1 gpu ddp hog slow_gpu 0 operations
slowgpu2 2 gpu ddp hog slow_gpu 1 operations
loader1 1 gpu ddp run slow_dataloader 0 algorithm --fault-rank 0 --slow-loader-ms 150
loader2 2 gpu ddp run slow_dataloader 1 algorithm --fault-rank 1 --slow-loader-ms 150
ffn1 1 gpu ddp run unoptimized_gemm 0 infrastructure --ffn 8484
stop2 2 gpu ddp stop hang_non_communication 1 operations
python2 2 gpu ddp hang hang_non_communication 1 algorithm --fault-rank 1 --python-hang-at 30
healthy_gpu 2 gpu ddp run none - -
healthy_launch 2 launch ddp run none - -
healthy_fsdp 2 gpu fsdp run none - -
kernel2 2 gpu ddp hang hang_non_communication 1 operations --fault-rank 1 --gpu-hang-at 30
stop4 4 gpu ddp stop hang_non_communication 2 operations
python4 4 gpu ddp hang hang_non_communication 3 algorithm --fault-rank 3 --python-hang-at 30
extra_ar4 4 gpu ddp hang hang_mismatch 2 algorithm --fault-rank 2 --extra-allreduce-at 30
slowgpu4 4 gpu ddp hog slow_gpu 2 operations
"
class_of() {
  case $1 in
    stop*) echo "process stopped";; python*) echo "stuck in Python";; gc1) echo "Python GC";;
    extra_ar*) echo "collective mismatch";; kernel*) echo "GPU kernel never ends";; sync1) echo "unnecessary synchronization";;
    side_gemm) echo "extra GPU work on one rank";; healthy*) echo "healthy";;
    slowgpu*) echo "slow GPU (shared by a hog)";; loader*) echo "slow DataLoader";;
    ffn*) echo "unoptimized GEMM shape";; *) echo "$1";;
  esac
}

shape_of() {
  case $1-$2 in gpu-ddp) echo "DDP GPU-bound";; launch-ddp) echo "DDP launch-bound";; *-fsdp) echo "FSDP";;
    *) echo "$1 $2";; esac
}
job_of() {  # job name -> the training job's id: most ranks, then most records, then newest
  # (the launcher process, under the same LD_PRELOAD and job name, can show up as a
  # job of its own with no records; it must not be taken for the training job)
  $X jobs --all --json 2>/dev/null | $PY -c "import json,sys
js=[j for j in json.load(sys.stdin).get('jobs',[]) if j.get('job_name')=='$1' and j.get('records',0)>0]
key=lambda j: (j.get('ranks',0), j.get('records',0), j.get('first_seen_ns',0))
print(sorted(js, key=key)[-1]['job'] if js else '')" 2>/dev/null
}
pid_of() { $X ranks --job "$1" --json 2>/dev/null | $PY -c "import json,sys
print([r['pid'] for r in json.load(sys.stdin)['ranks'] if r['rank']==$2][0])" 2>/dev/null; }
now() { date +%s.%N; }
# The hog: bf16 GEMMs back to back on the GPU it is given.
HOG_PY="import torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); b = torch.randn_like(a)
print('hog running', flush=True)
while True:
    for _ in range(20): a @ b
    torch.cuda.synchronize()"
elapsed() { echo $(( $(date +%s) - T_START )); }
kill_tree() {  # the run's process group (setsid below), then anything stopped
  kill -CONT -- "-$1" 2>/dev/null; kill -TERM -- "-$1" 2>/dev/null; sleep 2; kill -KILL -- "-$1" 2>/dev/null
}

# One case: runs in the foreground (or in the background of run_pair).
run_case() {  # name world shape parallel kind expect ranks team [gpus] -- args
  local name=$1 world=$2 shape=$3 par=$4 kind=$5 expect=$6 ranks=$7 team=$8 gpus=$9; shift 9
  local args=("$@") D=$W/$name jobname="cat-$name-$$" limit t0="" seen="" J="" P=""
  mkdir -p "$D"
  local hog_after=0 hog_gpu="" HP=""
  if [ "$kind" = hog ]; then
    [ "$world" = 1 ] && hog_after=$HOG_AFTER_S
    hog_gpu=$(echo "$gpus" | cut -d, -f$((ranks + 1)))
  fi
  limit=$([ "$kind" = run ] || [ "$kind" = hog ] && echo "$RUN_LIMIT_S" || echo "$HANG_LIMIT_S")
  local cmd=(torchrun --standalone --nproc-per-node "$world" "$REPO/bench/gpt/train_gpt.py" --shape "$shape"
             --parallel "$par" --steps 100000 --warmup 3 --workers 2)
  [ "$kind" = run ] && cmd+=(--seconds "$RUN_S")
  [ "$kind" = hog ] && cmd+=(--seconds "$((RUN_S + hog_after))")
  cmd+=("${args[@]}")
  if [ "$DRY" = 1 ]; then
    echo "[$name] limit ${limit}s CUDA_VISIBLE_DEVICES=$gpus XPU_JOB_NAME=$jobname ${cmd[*]}"
    return 0
  fi
  local tc=$(date +%s)
  # On the GPU-less runtime the hog is the fault rank's fake GEMMs, slower
  # from hog_after s on (tests/gpu/fake_torchrun).
  [ "$kind" = hog ] && [ -n "$FAKE" ] && export XPU_CAT_HOG_RANK=$ranks XPU_CAT_HOG_AFTER_S=$((hog_after + 3))
  CUDA_VISIBLE_DEVICES=$gpus XPU_JOB_NAME=$jobname XPU_ENGINE=$ENGINE LD_PRELOAD=$BUNDLE/lib/libxpu_hook.so \
    XPU_DAEMON_SOCKET=$W/d.sock setsid timeout -k 5 "$limit" "${cmd[@]}" > "$D/train.log" 2>&1 &
  local TP=$!
  for i in $(seq 60); do sleep 1; J=$(job_of "$jobname"); [ -n "$J" ] && break; kill -0 $TP 2>/dev/null || break; done
  # Steady state first: a few steps done.
  for i in $(seq 60); do [ "$(grep -cE '"step_ms"|^rank 0 step ' "$D/train.log")" -ge 5 ] && break; sleep 1
    kill -0 $TP 2>/dev/null || break; done
  [ -z "$J" ] && J=$(job_of "$jobname")
  if [ -n "$J" ] && [ "${ARRIVALS:-0}" = 1 ]; then
    # When each rank's records reach the engine: "time rank:records ..."
    # every 0.25 s while the case runs (arrivals.txt).
    ( while kill -0 $TP 2>/dev/null; do
        echo "$(now) $($X ranks --job "$J" --json 2>/dev/null | $PY -c "import json,sys
print(' '.join(f\"{r['rank']}:{r['records']}\" for r in json.load(sys.stdin)['ranks']))" 2>/dev/null)"
        sleep 0.25; done > "$D/arrivals.txt" ) &
  fi
  if [ -z "$J" ]; then  # the run failed to start: nothing to ask about
    echo "[$name] no job (see train.log): $(tail -2 "$D/train.log" | tr '\n' ' ')" | tee -a "$D/case.txt"
    kill_tree "$TP"; wait "$TP" 2>/dev/null
    $EVAL row "$ROWS" --case "$name" --cls "$(class_of "$name")" --world "$world" --shape "$(shape_of "$shape" "$par")" \
      --expect "$expect" --ranks "${ranks/-/}" --team "${team/-/}" --t0 0 --no-run
    return 0
  fi
  local tj; tj=$(now)
  echo "[$name] job ${J:-none} after $(( $(date +%s) - tc )) s" | tee -a "$D/case.txt"
  case $kind in
    stop)
      sleep 3; P=$(pid_of "$J" "$ranks"); t0=$(now)
      [ -n "$P" ] && kill -STOP "$P"; echo "[$name] SIGSTOP rank $ranks pid ${P:-?}" | tee -a "$D/case.txt";;
    hang)
      for i in $(seq 240); do grep -qE "sleeping forever|extra all-reduce|never ends" "$D/train.log" && break
        kill -0 $TP 2>/dev/null || break; sleep 0.25; done
      t0=$(now); echo "[$name] fault seen in the log" | tee -a "$D/case.txt";;
    hog)
      sleep "$hog_after"
      if [ -z "$FAKE" ]; then
        CUDA_VISIBLE_DEVICES=$hog_gpu setsid $PY -c "$HOG_PY" > "$D/hog.log" 2>&1 &
        HP=$!
      fi
      t0=$(now); echo "[$name] hog on rank $ranks's GPU ${hog_gpu:-(fake)}" | tee -a "$D/case.txt"
      wait $TP 2>/dev/null
      [ -n "$HP" ] && kill_tree "$HP"
      unset XPU_CAT_HOG_RANK XPU_CAT_HOG_AFTER_S
      sleep $(( WINDOW_S + 3 ));;
    run)
      t0=$tj  # the fault is there from the first step
      wait $TP 2>/dev/null
      sleep $(( WINDOW_S + 3 ));;  # the last window closes  # the last windows close
  esac
  if [ "$kind" != run ] && [ "$kind" != hog ]; then
    while kill -0 $TP 2>/dev/null; do
      out=$($X hang --job "$J" --json 2>/dev/null)
      if echo "$out" | grep -q '"found":true'; then seen=$($PY -c "print(round($(now)-$t0,1))"); break; fi
      sleep 0.5
    done
    echo "$out" > "$D/hang.json"
    $X hang --job "$J" > "$D/hang.txt" 2>&1
    # A refinement may follow the first verdict: a few seconds more.
    sleep 4; $X hang --job "$J" --json > "$D/hang_refined.json" 2>/dev/null
    $X hang --job "$J" > "$D/hang_refined.txt" 2>&1
  fi
  $X diagnose --job "$J" --all --json > "$D/diagnose.json" 2>/dev/null
  $X report --job "$J" > "$D/report.txt" 2>&1
  kill_tree "$TP"; wait "$TP" 2>/dev/null
  local cls; cls=$(class_of "$name")
  $EVAL row "$ROWS" --case "$name" --cls "$cls" --world "$world" --shape "$(shape_of "$shape" "$par")" \
    --expect "$expect" --ranks "${ranks/-/}" --team "${team/-/}" --t0 "${t0:-0}" \
    ${seen:+--seen-s "$seen"} --hang "$D/hang.json" --diag "$D/diagnose.json" | tee -a "$D/case.txt"
  echo "[$name] done in $(( $(date +%s) - tc )) s" | tee -a "$D/case.txt"
}

# -------------------------------------------------------------------- main
if [ "$DRY" = 0 ]; then
  [ -x "$BUNDLE/bin/xpu-engine" ] || { echo "no bundle at $BUNDLE (make bundle)" >&2; exit 2; }
  rm -rf "$W"; mkdir -p "$W"; : > "$ROWS"
  "$BUNDLE/bin/xpu-engine" --listen "$ENGINE" --metrics-addr 127.0.0.1:$((PORT + 2000)) --db "$W/e.db" \
    --window-s "$WINDOW_S" --log-level "${ENGINE_LOG_LEVEL:-info}" > "$W/engine.log" 2>&1 &
  EPID=$!; sleep 2
fi
echo "catalogue: $NGPU GPU(s), bundle $BUNDLE, window ${WINDOW_S}s, limits hang ${HANG_LIMIT_S}s run ${RUN_LIMIT_S}s total ${TOTAL_S}s"
selected() { [ -z "${CASES:-}" ] || [[ " $CASES " == *" $1 "* ]]; }
pending=()
while read -r name world shape par kind expect ranks team rest; do
  [ -z "$name" ] && continue
  selected "$name" || continue
  if [ "$NGPU" -lt "$world" ]; then echo "[$name] skipped: needs $world GPUs"; continue; fi
  if [ -n "$FAKE" ] && { [ "$par" = fsdp ] || [[ "$rest" == *--side-gemms* ]] || [[ "$rest" == *--gpu-hang-at* ]]; }; then
    echo "[$name] skipped: not emulated on the GPU-less runtime"; continue
  fi
  if [ "$(elapsed)" -ge "$TOTAL_S" ]; then
    echo "[$name] skipped: ${TOTAL_S}s used"
    [ "$DRY" = 0 ] && echo "{\"case\":\"$name\",\"class\":\"$(class_of "$name")\",\"world\":$world,\"shape\":\"$(shape_of "$shape" "$par")\",\"found\":[\"skipped (time)\"],\"detected\":false,\"culprit\":false,\"team\":false,\"time_s\":null,\"healthy\":false}" >> "$ROWS"
    continue
  fi
  if [ "$world" = 1 ] && [ "$NGPU" -ge 2 ]; then
    # Two world-1 cases at a time, one per GPU.
    pending+=("$name $world $shape $par $kind $expect $ranks $team $rest")
    if [ ${#pending[@]} = 2 ]; then
      read -r -a a <<< "${pending[0]}"; read -r -a b <<< "${pending[1]}"
      run_case "${a[@]:0:8}" 0 "${a[@]:8}" & p1=$!
      run_case "${b[@]:0:8}" 1 "${b[@]:8}" & p2=$!
      wait $p1 $p2; pending=()
    fi
    continue
  fi
  if [ ${#pending[@]} = 1 ]; then
    read -r -a a <<< "${pending[0]}"; run_case "${a[@]:0:8}" 0 "${a[@]:8}"; pending=()
  fi
  gpus=$(seq -s, 0 $((world - 1)))
  # shellcheck disable=SC2086
  run_case "$name" "$world" "$shape" "$par" "$kind" "$expect" "$ranks" "$team" "$gpus" $rest
done <<< "$CASE_LINES"
if [ ${#pending[@]} = 1 ]; then read -r -a a <<< "${pending[0]}"; run_case "${a[@]:0:8}" 0 "${a[@]:8}"; fi
[ "$DRY" = 1 ] && exit 0

kill "$EPID" 2>/dev/null; wait "$EPID" 2>/dev/null
cp "$W/engine.log" "$W/e.db" "$OUT/" 2>/dev/null
{
  if [ -n "$FAKE" ]; then echo "GPU-less catalogue (fake runtime), $(elapsed) s"
  else echo "GPU catalogue: $NGPU GPU(s), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(elapsed) s"; fi
  $EVAL table "$ROWS" ${DOC:+--doc "$DOC"} --section "$([ -n "$FAKE" ] && echo gpu-less || echo gpu)"
  echo
  echo "hang reports (first verdict):"
  for f in "$W"/*/hang.txt; do [ -f "$f" ] && { echo "== $(basename "$(dirname "$f")")"; head -12 "$f"; }; done
  echo
  echo "per case:"; cat "$W"/*/case.txt 2>/dev/null | grep -v '^ROW'
} > "$SUM" 2>&1
cp "$ROWS" "$SUM" "$W/" 2>/dev/null
tar -czf "$OUT/catalogue.tgz" -C "$W" --exclude='*.sock' . 2>/dev/null
rm -f "$OUT/e.db" "$OUT/engine.log"  # in the tarball
[ -n "$FAKE" ] && rm -rf "$FB"
[ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$W"
cat "$SUM"
# Exit status: 0 when every case ran and scored fully (CHECK=1 only).
if [ "${CHECK:-0}" = 1 ]; then
  $PY -c "import json,sys; rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if rows and all(r['detected'] and r['culprit'] and r['team'] for r in rows) else 1)" "$ROWS"
fi
