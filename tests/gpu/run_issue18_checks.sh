#!/usr/bin/env bash
# The per-op cost and short-op timing (and, with CALLSITES=1, call-site)
# checks in one run, within 6 minutes on two GPUs (collectives need two; the
# rest uses GPU 0), each part under a hard limit of its own:
#   1. run_perop_check.sh     per-op cost and GPT step overhead, both bundles
#                             interleaved: PEROP_S (210 s) in all, rounds stop
#                             after PEROP_BUDGET_S (135 s from the benchmark's
#                             start); modes PEROP_MODES_BEFORE=sampled,all and
#                             PEROP_MODES_AFTER=off,sampled,all; the C-level
#                             loops (one process per configuration) run while
#                             the workers start
#   2. run_short_op_timing.sh hook vs torch.profiler durations, SHORT_OP_S
#                             (130 s) in all; SHORT_OP_CONFIGS, default
#                             "after:sampled after:sampled-raw:gemm after:all
#                             after:sampled-nohold:gemm"
#   3. run_callsite_check.sh  the GPT's kernel-to-Python flame graph
#                             (CALLSITES=1, 90 s)
#
#   BUNDLE=.bundle BUNDLE_BEFORE=.bundle-before OUT=$OUT tests/gpu/run_issue18_checks.sh
#
# $OUT gets exactly two files: summary.txt (every table and the parts'
# failures) and h18.tgz (everything the parts wrote: tables, JSON, rings'
# comparisons, every log), for collectors that take only a few files back.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
RES=${OUT:-$PWD/issue18-results}
mkdir -p "$RES"
# The parts write under $WORK; $RES receives only the summary and the archive.
WORK=${ISSUE18_WORK:-/tmp/xpu-issue18}; rm -rf "$WORK"; mkdir -p "$WORK"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }

PEROP_S=${PEROP_S:-210}
OUT=$WORK/perop PEROP_BUDGET_S=${PEROP_BUDGET_S:-135} PEROP_DEADLINE_S=$(( PEROP_S - 10 )) \
  PEROP_MODES_BEFORE=${PEROP_MODES_BEFORE:-sampled,all} \
  timeout -k 5 "$PEROP_S" "$HERE/run_perop_check.sh" > "$WORK/perop.log" 2>&1
echo "perop rc $? after $(elapsed) s" | tee -a "$WORK/perop.log"

SHORT_OP_S=${SHORT_OP_S:-130}
OUT=$WORK/short_op SHORT_OP_DEADLINE_S=$(( SHORT_OP_S - 8 )) \
  SHORT_OP_CONFIGS=${SHORT_OP_CONFIGS:-"after:sampled after:sampled-raw:gemm after:all after:sampled-nohold:gemm"} \
  timeout -k 5 "$SHORT_OP_S" "$HERE/run_short_op_timing.sh" > "$WORK/short_op.log" 2>&1
echo "short-op timing rc $? after $(elapsed) s" | tee -a "$WORK/short_op.log"

if [ "${CALLSITES:-0}" = 1 ]; then
  OUT=$WORK/callsites timeout -k 5 90 "$HERE/run_callsite_check.sh" > "$WORK/callsites.log" 2>&1
  echo "call sites rc $? after $(elapsed) s" | tee -a "$WORK/callsites.log"
fi
{
  cat "$WORK/perop/machine.txt" 2>/dev/null
  echo; cat "$WORK/perop/perop.txt" 2>/dev/null || { echo "(no perop tables; perop.log tail)"; tail -40 "$WORK/perop.log"; }
  echo; echo "perop events:"
  grep -E "^(workers ready|worker |micro |round [0-9]+ [a-z:]+: |stopping|time budget|perop_bench exit|perop rc)" "$WORK/perop.log" | head -40
  grep -E "^round [0-9]+ done" "$WORK/perop.log" | tail -1
  echo; cat "$WORK/short_op/short_op_timing.txt" 2>/dev/null || { echo "(no short-op tables; short_op.log tail)"; tail -40 "$WORK/short_op.log"; }
  grep -E "failed|rc [0-9]+ after" "$WORK/short_op.log" | head -20
  [ -f "$WORK/callsites/callsites.txt" ] && { echo; cat "$WORK/callsites/callsites.txt"; }
  echo; echo "total $(elapsed) s"
} > "$RES/summary.txt" 2>&1
cp "$RES/summary.txt" "$WORK/"
tar -czf "$RES/h18.tgz" -C "$WORK" . 2>/dev/null || echo "tar failed" >> "$RES/summary.txt"
cat "$RES/summary.txt"
