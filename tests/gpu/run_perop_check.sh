#!/usr/bin/env bash
# Per-op cost of the hook on one GPU under PyTorch (bench/perop/perop_bench.py):
# added CPU ns per op (tiny elementwise kernel, small bf16 GEMM, small NCCL
# all-reduce on a world-size-1 group), added GPU ns per op, and the step-time
# overhead of the launch-bound benchmark GPT with a 95 % confidence interval;
# no hook / XPU_TIMING=off / sampled / all, interleaved round by round.
#
#   BUNDLE=.bundle [BUNDLE_BEFORE=.bundle-before] tests/gpu/run_perop_check.sh [ROUNDS]
#
# With BUNDLE_BEFORE every mode runs for both bundles in the same run (labels
# `before` and `after`), against one shared no-hook baseline, so that one run
# gives both columns. Needs one GPU, PyTorch with CUDA and NCCL, and nvcc for
# the C-level launch loops; ends within ~9 minutes (rounds stop after
# PEROP_BUDGET_S seconds, default 330; a hard limit PEROP_DEADLINE_S, 540 s).
# Results: $OUT (default ./perop-results): perop.txt (the tables), perop.json
# (every round's figures), logs/, machine.txt.
set -u
T0=$(date +%s)
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RES=${OUT:-$PWD/perop-results}
mkdir -p "$RES"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
if ! "$PY" -c 'import torch' 2>/dev/null && [ -x /opt/torch/.venv/bin/python ]; then
  PY=/opt/torch/.venv/bin/python
fi
ROUNDS=${1:-400}
# PEROP_MODES_BEFORE / PEROP_MODES_AFTER: the modes of each bundle
# (default off,sampled,all for both).
args=(--bundle "after=${BUNDLE:-.bundle}:${PEROP_MODES_AFTER:-off,sampled,all}")
[ -n "${BUNDLE_BEFORE:-}" ] && args=(--bundle "before=$BUNDLE_BEFORE:${PEROP_MODES_BEFORE:-off,sampled,all}" "${args[@]}")
{
  date -u +%FT%TZ
  nvidia-smi -L 2>&1
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  nproc
  for b in "${BUNDLE_BEFORE:-}" "${BUNDLE:-.bundle}"; do
    [ -n "$b" ] && md5sum "$b/lib/libxpu_hook.so" "$b/lib/libnccl-profiler-xpu.so" 2>&1
  done
  git -C "$REPO" log -1 --format='scripts from %h %s' 2>/dev/null
} > "$RES/machine.txt"
cat "$RES/machine.txt"
# The C-level launch loops (launch_microbench.cu), built here with nvcc
# against the shared runtime; left out when no nvcc is found.
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
MICRO=/tmp/xpu-perop-build/liblaunch_microbench.so
mkdir -p "$(dirname "$MICRO")"
if [ -x "$NVCC" ] && "$NVCC" -O2 -shared -Xcompiler -fPIC -cudart shared -o "$MICRO" \
     "$REPO/bench/perop/launch_microbench.cu" -ldl > "$RES/nvcc.log" 2>&1; then
  args+=(--microbench-lib "$MICRO")
else
  echo "no launch microbench (nvcc: $NVCC; see nvcc.log)"
fi
# PEROP_DEADLINE_S (default 540): hard limit of the whole script, from its
# start; the benchmark gets what is left after the build, writes its tables
# before it, and is killed 5 s after it at the latest.
left=$(( ${PEROP_DEADLINE_S:-540} - ($(date +%s) - T0) ))
timeout $(( left + 5 )) "$PY" "$REPO/bench/perop/perop_bench.py" "${args[@]}" --rounds "$ROUNDS" \
  --budget-s "${PEROP_BUDGET_S:-330}" --deadline-s "$left" --gpt "${PEROP_GPT:-launch}" --out "$RES" ${PEROP_ARGS:-}
rc=$?
echo "perop_bench exit $rc"
# Everything in one file as well (logs included), for collectors that take
# only a few files back.
tar -czf "$RES.tgz" -C "$(dirname "$RES")" "$(basename "$RES")" 2>/dev/null && mv "$RES.tgz" "$RES/perop.tgz"
exit $rc
