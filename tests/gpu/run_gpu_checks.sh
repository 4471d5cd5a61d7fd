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
step "summary"
printf '%s\n' "${status[@]}" | tee "$RES/summary.txt"
