#!/usr/bin/env bash
# Step-time overhead of XPUTimer on the benchmark GPT (2 GPUs, torchrun DDP),
# interleaved A/B: for each repetition, every mode runs once in turn, so
# drifts of the machine hit all modes alike.
#   none      no hook
#   sampled   LD_PRELOAD hook, XPU_TIMING=sampled (default; NCCL plugin)
#   all       LD_PRELOAD hook, XPU_TIMING=all (two timing events per op)
#   profiler  torch.profiler (CPU+CUDA) around the steps, no hook
# Prints median step time per mode and shape, the overhead against `none`
# from the same run, and bytes of trace data per rank per step (hook: records
# written x 32 bytes from the ring header; profiler: its Chrome trace size).
# Usage: BUNDLE=.bundle bench/overhead/run_overhead.sh [REPS] [STEPS] [SHAPES]
set -u
REPS=${1:-3}; STEPS=${2:-40}; SHAPES=${3:-"launch gpu"}
BUNDLE=$(cd "${BUNDLE:-.bundle}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd); REPO=$(cd "$HERE/../.." && pwd)
RES=${OUT:-$PWD/overhead-results}; mkdir -p "$RES"
W=/tmp/xpu-overhead; rm -rf "$W"; mkdir -p "$W"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
for rep in $(seq 1 "$REPS"); do
  for shape in $SHAPES; do
    for mode in none sampled all profiler; do
      tag="$shape.$mode.$rep"; d="$W/$tag"; mkdir -p "$d"
      envs=(); extra=()
      case $mode in
        sampled) envs=(LD_PRELOAD="$BUNDLE/lib/libxpu_hook.so" XPU_TIMING=sampled XPU_DAEMON=off XPU_RING_DIR="$d" XPU_RING_CAPACITY=1048576);;
        all) envs=(LD_PRELOAD="$BUNDLE/lib/libxpu_hook.so" XPU_TIMING=all XPU_DAEMON=off XPU_RING_DIR="$d" XPU_RING_CAPACITY=1048576);;
        profiler) extra=(--torch-profiler "$d/trace");;
      esac
      env "${envs[@]}" timeout 240 torchrun --standalone --nproc-per-node 2 "$REPO/bench/gpt/train_gpt.py" \
        --shape "$shape" --steps "$STEPS" --warmup 5 --json-out "$d/summary.json" "${extra[@]}" > "$d/log" 2>&1 \
        || echo "run $tag failed: $(tail -2 "$d/log")"
      for f in "$d"/*.bin; do [ -e "$f" ] && "$BUNDLE/bin/xpu-ring-dump" --json --no-records "$f" | head -1 > "${f%.bin}.hdr.json"; done
      echo "$tag $(cat "$d/summary.json" 2>/dev/null)"
    done
  done
done
$PY "$HERE/summarize.py" "$W" "$STEPS" | tee "$RES/overhead.txt"
