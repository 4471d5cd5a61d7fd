#!/usr/bin/env bash
# The per-op cost, short-op timing and call-site checks in one run on one GPU,
# within 10 minutes (each part has its own time limit: 330 + 170 + 90 s):
#   1. run_perop_check.sh     per-op cost and GPT step overhead, both bundles
#                             interleaved (rounds stop after PEROP_BUDGET_S, 210 s)
#   2. run_short_op_timing.sh hook vs torch.profiler durations (collectives only
#                             with two GPUs or more)
#   3. run_callsite_check.sh  the GPT's kernel-to-Python flame graph
#
#   BUNDLE=.bundle BUNDLE_BEFORE=.bundle-before OUT=$OUT tests/gpu/run_issue18_checks.sh
#
# Results under $OUT/perop, $OUT/short_op, $OUT/callsites; $OUT/summary.txt
# collects the tables.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
RES=${OUT:-$PWD/issue18-results}
mkdir -p "$RES"
start=$(date +%s)
OUT=$RES/perop PEROP_BUDGET_S=${PEROP_BUDGET_S:-210} timeout 330 "$HERE/run_perop_check.sh" \
  > "$RES/perop.log" 2>&1
echo "perop done after $(( $(date +%s) - start )) s"
OUT=$RES/short_op timeout 170 "$HERE/run_short_op_timing.sh" > "$RES/short_op.log" 2>&1
echo "short-op timing done after $(( $(date +%s) - start )) s"
OUT=$RES/callsites timeout 90 "$HERE/run_callsite_check.sh" > "$RES/callsites.log" 2>&1
echo "call sites done after $(( $(date +%s) - start )) s"
{
  cat "$RES/perop/machine.txt" 2>/dev/null
  echo; cat "$RES/perop/perop.txt" 2>/dev/null || tail -20 "$RES/perop.log"
  echo; cat "$RES/short_op/short_op_timing.txt" 2>/dev/null || tail -20 "$RES/short_op.log"
  echo; cat "$RES/callsites/callsites.txt" 2>/dev/null || tail -20 "$RES/callsites.log"
} > "$RES/summary.txt"
cat "$RES/summary.txt"
