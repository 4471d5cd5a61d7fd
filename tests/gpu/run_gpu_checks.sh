#!/usr/bin/env bash
# GPU checks, run on a machine with 2 GPUs, PyTorch and the bundle made by
# `make bundle` (tools/make_bundle.sh) at $BUNDLE (default .bundle):
#   1. GEMM loop under LD_PRELOAD (XPU_TIMING=all): per-signature median GPU
#      duration from the ring vs torch.profiler for the same run.
#   2. 2-GPU all-reduce under torchrun: the same comparison, plus the
#      script's own busbw.
#   3. Pipeline: xpu-engine + an auto-started xpu-daemon + torchrun DDP GPT
#      (tiny) with the hook preloaded: `xpu ranks --json` during the run, and
#      the Python records (GC, DataLoader, synchronize, optimizer, steps).
#   4. Collective sweep (bench/gpt/collective_sweep.py, 1 MiB - 1 GiB): busbw
#      from `xpu timeline summary` vs the script's own; issue latency present
#      for every collective.
#   5. Benchmark GPT under the pipeline: `xpu timeline dump` (Perfetto and
#      Chrome JSON, validated), sizes per rank per step next to
#      torch.profiler's, call-site flame graph, Python records.
#   6. FSDP with and without the hook.
# ONLY="1 2 ..." picks steps (default 1 2 3).
# Results go to $OUT (or ./gpu-results). Each step is allowed to fail; the
# summary says which did.
set -u
BUNDLE=$(cd "${BUNDLE:-.bundle}" && pwd)
RES=${OUT:-$PWD/gpu-results}
mkdir -p "$RES"
W=/tmp/xpu-gpu; rm -rf "$W"; mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
HOOK=$BUNDLE/lib/libxpu_hook.so
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
LOG=$RES/log.txt
exec > >(tee -a "$LOG") 2>&1
status=()
step() { echo; echo "=== $* ($(date +%T))"; }
dump_rings() {  # dir-with-rings -> *.jsonl beside them
  for f in "$1"/*.bin; do [ -e "$f" ] && "$BUNDLE/bin/xpu-ring-dump" --json "$f" > "${f%.bin}.jsonl"; done
  ls -la "$1" | head -20
}

step "machine"
nvidia-smi -L; $PY -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count())'
for b in xpu-engine xpu-daemon xpu xpu-ring-dump; do "$BUNDLE/bin/$b" --help >/dev/null 2>&1 && echo "$b runs" || echo "$b FAILS to run"; done
ldd "$HOOK" | head

ONLY=${ONLY:-"1 2 3"}
if [[ " $ONLY " == *" 1 "* ]]; then
step "1. GEMM loop vs torch.profiler (XPU_TIMING=${TIMING:-all})"
mkdir -p "$W/gemm/rings"
LD_PRELOAD=$HOOK XPU_TIMING=${TIMING:-all} XPU_DAEMON=off XPU_RING_DIR=$W/gemm/rings XPU_RING_CAPACITY=262144 \
  timeout 300 $PY "$HERE/gemm_profile.py" --out "$W/gemm" --iters 50 && status+=("gemm_run:ok") || status+=("gemm_run:FAIL")
dump_rings "$W/gemm/rings"
cp "$W"/gemm/rings/*.jsonl "$W/gemm/" 2>/dev/null
$PY "$HERE/compare.py" --dump-dir "$W/gemm" --profiler-dir "$W/gemm" --out "$RES/gemm_compare.json" \
  && status+=("gemm_compare:within5%") || status+=("gemm_compare:NOT-within")

fi
if [[ " $ONLY " == *" 2 "* ]]; then
step "2. all-reduce (2 GPUs) vs torch.profiler (XPU_TIMING=${TIMING:-all})"
mkdir -p "$W/ar/rings"
LD_PRELOAD=$HOOK XPU_TIMING=${TIMING:-all} XPU_DAEMON=off XPU_RING_DIR=$W/ar/rings XPU_RING_CAPACITY=262144 \
  timeout 300 torchrun --standalone --nproc-per-node 2 "$HERE/allreduce_profile.py" --out "$W/ar" --iters 30 \
  && status+=("allreduce_run:ok") || status+=("allreduce_run:FAIL")
dump_rings "$W/ar/rings"
cp "$W"/ar/rings/*.jsonl "$W/ar/" 2>/dev/null
$PY "$HERE/compare.py" --dump-dir "$W/ar" --profiler-dir "$W/ar" --out "$RES/allreduce_compare.json" \
  && status+=("allreduce_compare:within5%") || status+=("allreduce_compare:NOT-within")

fi
if [[ " $ONLY " == *" 3 "* ]]; then
step "3. pipeline: engine + auto-started daemon + torchrun DDP"
mkdir -p "$W/ddp/rings"
"$BUNDLE/bin/xpu-engine" --listen 127.0.0.1:17441 --metrics-addr 127.0.0.1:19464 --db "$W/engine.db" \
  > "$W/engine.log" 2>&1 &
EPID=$!
sleep 2
export XPU_ENGINE=127.0.0.1:17441
LD_PRELOAD=$HOOK XPU_DAEMON_SOCKET=$W/daemon.sock XPU_RING_DIR=$W/ddp/rings XPU_RING_CAPACITY=262144 \
  XPU_JOB_NAME=gpu-check-ddp timeout 400 torchrun --standalone --nproc-per-node 2 \
  "$REPO/bench/gpt/train_gpt.py" --shape tiny --steps 150 --workers 2 --json-out "$W/ddp/summary.json" \
  > "$W/ddp/train.log" 2>&1 &
TPID=$!
for i in $(seq 1 60); do
  sleep 2
  J=$("$BUNDLE/bin/xpu" --engine $XPU_ENGINE jobs --json 2>/dev/null | $PY -c 'import json,sys; d=json.load(sys.stdin); js=d.get("jobs",d) if isinstance(d,dict) else d; js=sorted(js,key=lambda j:-j.get("ranks",0)); print(js[0]["job"] if js else "")' 2>/dev/null)
  if [ -n "$J" ]; then
    N=$("$BUNDLE/bin/xpu" --engine $XPU_ENGINE ranks --job "$J" --json | $PY -c 'import json,sys; d=json.load(sys.stdin); print(len(d.get("ranks",[])))' 2>/dev/null)
    [ "${N:-0}" -ge 2 ] && break
  fi
done
echo "job=$J ranks_seen=${N:-0} after ${i} polls"
"$BUNDLE/bin/xpu" --engine $XPU_ENGINE status
"$BUNDLE/bin/xpu" --engine $XPU_ENGINE ranks --job "$J"
"$BUNDLE/bin/xpu" --engine $XPU_ENGINE ranks --job "$J" --json > "$RES/ranks_during.json"
wait $TPID && status+=("ddp_run:ok") || status+=("ddp_run:FAIL")
sleep 3
"$BUNDLE/bin/xpu" --engine $XPU_ENGINE ranks --job "$J" --json > "$W/ranks_after.json"
{ echo "--- ranks after"; cat "$W/ranks_after.json"; echo "--- metrics"; curl -s 127.0.0.1:19464/metrics | grep '^xpu_' | head -60; \
  echo "--- train.log tail"; tail -5 "$W/ddp/train.log"; echo "--- engine.log tail"; tail -20 "$W/engine.log"; \
  echo "--- daemon.log tail"; tail -20 "$W"/daemon.log "$(dirname "$W/daemon.sock")"/daemon.log 2>/dev/null; } > "$RES/pipeline.txt"
[ "${N:-0}" -ge 2 ] && status+=("ranks_in_engine:2") || status+=("ranks_in_engine:${N:-0}")
kill $EPID 2>/dev/null
dump_rings "$W/ddp/rings"
$PY "$HERE/python_records.py" --dump-dir "$W/ddp/rings" --script-summary "$W/ddp/summary.json" > "$RES/python_records.json"
head -c 3000 "$RES/python_records.json"

fi
# Engine + auto-started daemon for steps 4 and 5 (ports per step: a previous
# engine may still hold its port for a moment).
start_engine() {  # name port
  "$BUNDLE/bin/xpu-engine" --listen 127.0.0.1:$2 --metrics-addr 127.0.0.1:$(($2 + 1000)) --db "$W/$1.db" \
    > "$W/$1-engine.log" 2>&1 &
  EPID=$!; sleep 2
  export XPU_ENGINE=127.0.0.1:$2
  X="$BUNDLE/bin/xpu --engine $XPU_ENGINE"
}
job_named() {  # job name -> job id
  $X jobs --all --json 2>/dev/null | $PY -c "import json,sys; js=[j for j in json.load(sys.stdin)['jobs'] if j.get('job_name')=='$1']; print(js[-1]['job'] if js else '')"
}
if [[ " $ONLY " == *" 4 "* ]]; then
step "4. collective sweep 1 MiB - 1 GiB: engine busbw (last arrival) vs the script's; issue latency coverage"
start_engine sweep 17451
mkdir -p "$W/sweep/rings"
LD_PRELOAD=$HOOK XPU_DAEMON_SOCKET=$W/sweep/d.sock XPU_RING_DIR=$W/sweep/rings XPU_RING_CAPACITY=262144 \
  XPU_JOB_NAME=sweep timeout 300 torchrun --standalone --nproc-per-node 2 "$REPO/bench/gpt/collective_sweep.py" \
  --sizes "${SWEEP_SIZES:-1M,4M,16M,64M,256M,1G}" --json-out "$RES/sweep_script.json" && status+=("sweep_run:ok") || status+=("sweep_run:FAIL")
sleep 3
J=$(job_named sweep); echo "job $J"
$X timeline dump --job "$J" --last 100000 --out "$W/sweep/tl" --format perfetto | tail -3
$X timeline summary --in "$W/sweep/tl" --top 100 --json > "$RES/sweep_summary.json"
$PY "$HERE/compare_busbw.py" --script "$RES/sweep_script.json" --summary "$RES/sweep_summary.json" \
  2> "$RES/sweep_compare.json" | tee "$RES/sweep_compare.txt" && status+=("busbw:within5%") || status+=("busbw:NOT-within")
dump_rings "$W/sweep/rings"
$PY "$HERE/issue_latency_coverage.py" "$W/sweep/rings" | tee "$RES/issue_latency_coverage.txt" \
  && status+=("issue_latency:every-collective") || status+=("issue_latency:MISSING-some")
kill $EPID 2>/dev/null; wait $EPID 2>/dev/null
fi
if [[ " $ONLY " == *" 5 "* ]]; then
step "5. benchmark GPT (DDP, ${DUMP_SHAPE:-gpu} shape): timeline dump, its size per rank per step, call sites; torch.profiler's trace size"
start_engine gpt 17461
mkdir -p "$W/gpt/rings"
LD_PRELOAD=$HOOK XPU_DAEMON_SOCKET=$W/gpt/d.sock XPU_RING_DIR=$W/gpt/rings XPU_RING_CAPACITY=1048576 \
  XPU_JOB_NAME=gpt-dump timeout 300 torchrun --standalone --nproc-per-node 2 "$REPO/bench/gpt/train_gpt.py" \
  --shape "${DUMP_SHAPE:-gpu}" --steps 60 --json-out "$W/gpt/summary.json" > "$W/gpt/train.log" 2>&1 \
  && status+=("gpt_run:ok") || status+=("gpt_run:FAIL")
tail -2 "$W/gpt/train.log"; sleep 3
J=$(job_named gpt-dump); echo "job $J"
t=$(date +%s.%N)
$X timeline dump --job "$J" --last 200000 --out "$W/gpt/tl" --format both > "$W/gpt/dump.txt" 2>&1
echo "dump took $($PY -c "print(round($(date +%s.%N)-$t,2))") s"; tail -4 "$W/gpt/dump.txt"
$X timeline summary --in "$W/gpt/tl" --json > "$RES/gpt_summary.json"
$X timeline summary --in "$W/gpt/tl" | head -40
"$BUNDLE/bin/xpu-trace-validate" --perfetto "$W/gpt/tl/trace.perfetto-trace" > "$RES/gpt_trace_validate.txt" 2>&1 \
  && status+=("perfetto_valid:ok") || status+=("perfetto_valid:FAIL")
tail -5 "$RES/gpt_trace_validate.txt"
$PY -c "import json; d=json.load(open('$W/gpt/tl/trace.json')); print('chrome json events', len(d['traceEvents'] if isinstance(d, dict) else d))" \
  && status+=("chrome_json:ok") || status+=("chrome_json:FAIL")
ls -la "$W/gpt/tl" "$W/gpt/tl/raw" | head -20
cp "$W/gpt/tl/callsites.svg" "$W/gpt/tl/callsites.folded" "$W/gpt/tl/dump.json" "$RES/" 2>/dev/null
[ -s "$W/gpt/tl/callsites.folded" ] && status+=("callsites:$(wc -l < "$W/gpt/tl/callsites.folded")-stacks") || status+=("callsites:none")
head -5 "$W/gpt/tl/callsites.folded" 2>/dev/null
kill $EPID 2>/dev/null; wait $EPID 2>/dev/null
dump_rings "$W/gpt/rings"
$PY "$HERE/python_records.py" --dump-dir "$W/gpt/rings" --script-summary "$W/gpt/summary.json" > "$RES/gpt_python_records.json"
head -c 1500 "$RES/gpt_python_records.json"; echo
# torch.profiler on the same workload, 10 steps, for its trace size.
timeout 300 torchrun --standalone --nproc-per-node 2 "$REPO/bench/gpt/train_gpt.py" --shape "${DUMP_SHAPE:-gpu}" \
  --steps 10 --warmup 2 --torch-profiler "$W/gpt/prof" --json-out "$W/gpt/prof_summary.json" > "$W/gpt/prof.log" 2>&1
$PY - "$RES/gpt_summary.json" "$W/gpt/tl" "$W/gpt/prof_summary.json" <<'PYEOF' | tee "$RES/gpt_sizes.txt"
import json, os, sys
s = json.load(open(sys.argv[1])); tl = sys.argv[2]; prof = json.load(open(sys.argv[3]))
steps = {r["rank"]: r["steps"] for r in s["ranks"]}
nr, st = len(steps), max(1, min(steps.values()) if steps else 1)
size = lambda p: os.path.getsize(p) if os.path.exists(p) else 0
raw = sum(size(os.path.join(tl, "raw", f)) for f in os.listdir(os.path.join(tl, "raw")))
print(f"dump window: {s['ops']} ops, {nr} ranks, {st} complete steps per rank")
for name, b in (("raw records (.xpb)", raw), ("trace.perfetto-trace", size(os.path.join(tl, "trace.perfetto-trace"))),
                ("trace.json", size(os.path.join(tl, "trace.json")))):
    print(f"{name:<22} {b:>12} B  {b / nr / st:>10.0f} B/rank/step")
ps = prof.get("steps") or 1
pb = prof.get("trace_bytes_per_rank") or 0
print(f"{'torch.profiler trace':<22} {pb:>12} B  {pb / (ps + 2):>10.0f} B/rank/step (rank 0, {ps}+2 steps)")
PYEOF
fi
if [[ " $ONLY " == *" 6 "* ]]; then
step "6. FSDP under the hook (sampled) vs without, ${FSDP_SHAPE:-gpu} shape"
for mode in none sampled; do
  pre=(); [ $mode = sampled ] && pre=(env LD_PRELOAD=$HOOK XPU_DAEMON=off XPU_RING_DIR=$W/fsdp)
  mkdir -p "$W/fsdp"
  timeout 300 "${pre[@]}" torchrun --standalone --nproc-per-node 2 "$REPO/bench/gpt/train_gpt.py" --parallel fsdp \
    --shape "${FSDP_SHAPE:-gpu}" --steps 40 --json-out "$W/fsdp_$mode.json" > "$W/fsdp_$mode.log" 2>&1 \
    && status+=("fsdp_$mode:ok") || status+=("fsdp_$mode:FAIL")
  echo "fsdp $mode: $(cat "$W/fsdp_$mode.json" 2>/dev/null)"
done
dump_rings "$W/fsdp" >/dev/null
$PY "$HERE/issue_latency_coverage.py" "$W/fsdp" | tail -1
fi
step "summary"
printf '%s\n' "${status[@]}" | tee "$RES/summary.txt"
