#!/usr/bin/env bash
# Exact timing of short ops: the hook's sampled GPU durations against
# torch.profiler's (CUPTI) kernel durations in the same run, for GEMMs from
# 512^3 to 4096^3 (2048x2048x512 among them) and, with two GPUs or more,
# all-reduces of 1 to 256 MiB. Goal: within 5 % (short_op_compare.py).
#
#   BUNDLE=.bundle [BUNDLE_BEFORE=.bundle-before] tests/gpu/run_short_op_timing.sh
#
# Configurations (each a separate run of the same loops):
#   after:sampled         the default: GEMMs timed by events around a stream
#                         hold, collectives by the NCCL profiler plugin
#   after:sampled-nohold  XPU_TIMING_HOLD=0: the plain event pair
#   after:all             XPU_TIMING=all: events and holds for collectives too
#   before:sampled        the same with BUNDLE_BEFORE, when given
# A timed occurrence every 4th call (XPU_SAMPLE_FIRST=0, XPU_SAMPLE_EVERY=4),
# so that timed ops sit among untimed ones as in a job. Ends within ~2
# minutes on one GPU, ~3 with collectives. Results: $OUT (default ./short-op-results): short_op_timing.txt,
# one JSON per configuration, logs.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RES=${OUT:-$PWD/short-op-results}
mkdir -p "$RES"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
if ! "$PY" -c 'import torch' 2>/dev/null && [ -x /opt/torch/.venv/bin/python ]; then
  PY=/opt/torch/.venv/bin/python
fi
W=/tmp/xpu-short-op; rm -rf "$W"; mkdir -p "$W"
SHAPES=${SHORT_OP_SHAPES:-512x512x512,1024x1024x1024,2048x2048x512,2048x2048x2048,4096x4096x1024,4096x4096x4096}
SIZES=${SHORT_OP_SIZES_MIB:-1,4,16,64,256}
NGPU=$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
SUMMARY=$RES/short_op_timing.txt
: > "$SUMMARY"

configs=("after:sampled:${BUNDLE:-.bundle}" "after:sampled-nohold:${BUNDLE:-.bundle}" "after:all:${BUNDLE:-.bundle}")
if [ -n "${BUNDLE_BEFORE:-}" ]; then
  configs+=("before:sampled:$BUNDLE_BEFORE")
fi
for c in "${configs[@]}"; do
  label=${c%%:*}; rest=${c#*:}; mode=${rest%%:*}; bundle=$(cd "${rest#*:}" && pwd)
  tag=$label-$mode; d=$W/$tag; mkdir -p "$d/rings"
  timing=${mode%-nohold}; hold=1; [ "$mode" = sampled-nohold ] && hold=0
  envs=(LD_PRELOAD="$bundle/lib/libxpu_hook.so" XPU_TIMING="$timing" XPU_TIMING_HOLD=$hold
        XPU_DAEMON=off XPU_RING_DIR="$d/rings" XPU_RING_CAPACITY=262144
        XPU_SAMPLE_FIRST=0 XPU_SAMPLE_EVERY=4)
  echo "=== $tag ($(date +%T))"
  env "${envs[@]}" timeout 150 "$PY" "$HERE/gemm_profile.py" --out "$d" --iters 80 --shapes "$SHAPES" \
    > "$d/gemm.log" 2>&1 || echo "gemm run $tag failed: $(tail -3 "$d/gemm.log")"
  if [ "$NGPU" -ge 2 ] && [ "$mode" != sampled-nohold ]; then
    env "${envs[@]}" timeout 150 "$PY" -m torch.distributed.run --standalone --nproc-per-node 2 \
      "$HERE/allreduce_profile.py" --out "$d" --iters 40 --sizes-mib "$SIZES" > "$d/allreduce.log" 2>&1 \
      || echo "all-reduce run $tag failed: $(tail -3 "$d/allreduce.log")"
  fi
  "$PY" "$HERE/short_op_compare.py" --ring-dir "$d/rings" --profiler-dir "$d" --label "$tag" \
    --out "$RES/$tag.json" | tee -a "$SUMMARY"
  echo >> "$SUMMARY"
  for f in "$d"/*.log; do [ -e "$f" ] && cp "$f" "$RES/$tag.$(basename "$f")"; done
done
[ "$NGPU" -ge 2 ] || echo "note: $NGPU GPU(s): collectives need two GPUs and were not run" | tee -a "$SUMMARY"
grep '^RESULT' "$SUMMARY"
