#!/usr/bin/env bash
# Python call sites on a real job: the benchmark GPT (bench/gpt/train_gpt.py,
# launch-bound shape, one GPU) under the hook with XPU_TIMING=sampled, then
# the kernel-to-Python flame graph of its sampled GEMMs
# (callsite_flamegraph.py): the forward GEMMs must name the model's own
# attention, MLP and output-head lines; backward GEMMs, launched by PyTorch's
# autograd thread, are labelled as backward of an unknown call site.
#
#   BUNDLE=.bundle tests/gpu/run_callsite_check.sh [STEPS]
#
# Ends within ~1.5 minutes. Results: $OUT (default ./callsite-results):
# callsites.txt (summary), callsites.folded (flamegraph.pl / speedscope
# input), callsites.json, train.log.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RES=${OUT:-$PWD/callsite-results}
mkdir -p "$RES"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
if ! "$PY" -c 'import torch' 2>/dev/null && [ -x /opt/torch/.venv/bin/python ]; then
  PY=/opt/torch/.venv/bin/python
fi
BUNDLE=$(cd "${BUNDLE:-.bundle}" && pwd)
W=/tmp/xpu-callsites; rm -rf "$W"; mkdir -p "$W/rings"
LD_PRELOAD=$BUNDLE/lib/libxpu_hook.so XPU_TIMING=sampled XPU_DAEMON=off XPU_RING_DIR=$W/rings \
  XPU_RING_CAPACITY=1048576 timeout 150 "$PY" -m torch.distributed.run --standalone --nproc-per-node 1 \
  "$REPO/bench/gpt/train_gpt.py" --shape launch --steps "${1:-20}" --warmup 3 --workers 0 \
  > "$RES/train.log" 2>&1 || echo "training run failed: $(tail -3 "$RES/train.log")"
"$PY" "$HERE/callsite_flamegraph.py" --ring-dir "$W/rings" --model "$REPO/bench/gpt/train_gpt.py" \
  --out-dir "$RES" | tee "$RES/callsites.txt"
