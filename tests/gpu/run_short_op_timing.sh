#!/usr/bin/env bash
# Exact timing of short ops: the hook's sampled GPU durations against
# torch.profiler's (CUPTI) kernel durations in the same run, for GEMMs from
# 512^3 to 4096^3 (2048x2048x512 among them) and, with two GPUs or more,
# all-reduces of 1 to 256 MiB. Goal: within 5 % (short_op_compare.py).
#
#   BUNDLE=.bundle [BUNDLE_BEFORE=.bundle-before] tests/gpu/run_short_op_timing.sh
#
# Configurations (each a separate run of the same loops), SHORT_OP_CONFIGS:
#   after:sampled         the default: GEMMs timed by events around a stream
#                         hold, the event pair's measured overhead taken out;
#                         collectives by the NCCL profiler plugin
#   after:sampled-raw     XPU_TIMING_CORRECT=0: the same without the correction
#   after:sampled-nohold  XPU_TIMING_HOLD=0 XPU_TIMING_CORRECT=0: the plain pair
#   after:all             XPU_TIMING=all: events, holds and correction for
#                         collectives too
#   before:sampled        the same with BUNDLE_BEFORE
# A ":gemm" suffix leaves the collectives out of that configuration.
# Default: "after:sampled after:sampled-raw:gemm after:all", plus
# before:sampled with BUNDLE_BEFORE.
set -u
T0=$(date +%s)
# SHORT_OP_DEADLINE_S: no run goes past this many seconds from the start
# (default 900); a configuration that cannot start with 20 s left is skipped.
left() { echo $(( ${SHORT_OP_DEADLINE_S:-900} - ($(date +%s) - T0) )); }
cap() { local l; l=$(left); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
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

default="after:sampled after:sampled-raw:gemm after:all"
[ -n "${BUNDLE_BEFORE:-}" ] && default="$default before:sampled"
for c in ${SHORT_OP_CONFIGS:-$default}; do
  label=${c%%:*}; rest=${c#*:}; mode=${rest%%:*}; only=${rest#"$mode"}; only=${only#:}
  if [ "$label" = before ]; then bundle=${BUNDLE_BEFORE:-}; else bundle=${BUNDLE:-.bundle}; fi
  [ -n "$bundle" ] || { echo "no bundle for $c"; continue; }
  bundle=$(cd "$bundle" && pwd)
  tag=$label-$mode; d=$W/$tag; mkdir -p "$d/rings"
  timing=${mode%%-*}; hold=1; correct=1
  case $mode in
    *-raw) correct=0;;
    *-nohold) hold=0; correct=0;;
  esac
  envs=(LD_PRELOAD="$bundle/lib/libxpu_hook.so" XPU_TIMING="$timing" XPU_TIMING_HOLD=$hold
        XPU_TIMING_CORRECT=$correct XPU_DAEMON=off XPU_RING_DIR="$d/rings" XPU_RING_CAPACITY=262144
        XPU_SAMPLE_FIRST=0 XPU_SAMPLE_EVERY=4)
  if [ "$(left)" -lt 20 ]; then echo "=== $tag skipped: the deadline is near" | tee -a "$SUMMARY"; continue; fi
  echo "=== $tag ($(date +%T))"
  env "${envs[@]}" timeout "$(cap 150)" "$PY" "$HERE/gemm_profile.py" --out "$d" --iters 60 --shapes "$SHAPES" \
    > "$d/gemm.log" 2>&1 || echo "gemm run $tag failed: $(tail -3 "$d/gemm.log")"
  if [ "$NGPU" -ge 2 ] && [ "$only" != gemm ] && [ "$(left)" -ge 20 ]; then
    env "${envs[@]}" timeout "$(cap 150)" "$PY" -m torch.distributed.run --standalone --nproc-per-node 2 \
      "$HERE/allreduce_profile.py" --out "$d" --iters 30 --sizes-mib "$SIZES" > "$d/allreduce.log" 2>&1 \
      || echo "all-reduce run $tag failed: $(tail -3 "$d/allreduce.log")"
  fi
  "$PY" "$HERE/short_op_compare.py" --ring-dir "$d/rings" --profiler-dir "$d" --label "$tag" \
    --out "$RES/$tag.json" | tee -a "$SUMMARY"
  echo >> "$SUMMARY"
  for f in "$d"/*.log; do [ -e "$f" ] && cp "$f" "$RES/$tag.$(basename "$f")"; done
done
[ "$NGPU" -ge 2 ] || echo "note: $NGPU GPU(s): collectives need two GPUs and were not run" | tee -a "$SUMMARY"
grep '^RESULT' "$SUMMARY"
tar -czf /tmp/xpu-short-op.tgz -C "$W" . 2>/dev/null && mv /tmp/xpu-short-op.tgz "$RES/short_op_runs.tgz"
