#!/bin/sh
# tools/fuzz_targets.sh BIN_DIR CORPUS_DIR SECONDS CORES OUTDIR [TARGET...]
#
# Runs built libFuzzer targets (every executable BIN_DIR/*_fuzzer, or the
# TARGETs named) for SECONDS each, all at once, sharing CORES: with more
# cores than targets each target runs in libFuzzer's fork mode with
# CORES/targets workers (crashes are kept and fuzzing goes on); with fewer,
# CORES targets run at a time. Each target's corpus is CORPUS_DIR/<target>
# (created if missing; new inputs are added to it; an empty one is seeded
# by a target that can write its own seeds, --write-seeds=DIR).
#
# OUTDIR gets, per target, <target>.log and <target>/artifacts/ (crash-*,
# leak-*, timeout-*, oom-* reproducers), and summary.txt / summary.json with
# one entry per target: inputs executed, edges covered, features, corpus
# files, workers, crashes. Exit status 1 when a target found a crash or
# failed, 0 otherwise.
#
# Used by tools/run_fuzz.sh (from a build tree) and tools/run_fuzz_bundle.sh
# (from a bundle made by tools/make_fuzz_bundle.sh).
set -eu

if [ "${1:-}" = "--one" ]; then
  # Internal: one target. Arguments: --one TARGET BIN_DIR CORPUS_DIR SECONDS WORKERS OUTDIR
  t=$2 bin_dir=$3 corpus_root=$4 seconds=$5 workers=$6 out=$7
  corpus="$corpus_root/$t"
  mkdir -p "$corpus" "$out/$t/artifacts"
  # A target whose inputs random bytes rarely reach (the batch decoder's
  # protobuf messages) writes its own seeds into an empty corpus.
  if [ -z "$(ls -A "$corpus")" ] && grep -q -a -- '--write-seeds=' "$bin_dir/$t"; then
    "$bin_dir/$t" --write-seeds="$corpus" >&2
  fi
  set -- -max_total_time="$seconds" -print_final_stats=1 -timeout=25 \
    -artifact_prefix="$out/$t/artifacts/"
  if [ "$workers" -gt 1 ]; then
    set -- "$@" -fork="$workers" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1
  fi
  echo "fuzz: $t for ${seconds}s on $workers worker(s)" >&2
  rc=0
  timeout $((seconds + 300)) "$bin_dir/$t" "$@" "$corpus" >"$out/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$out/$t/exit_status"
  exit 0
fi

if [ $# -lt 5 ]; then
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
bin_dir=$(cd "$1" && pwd)
mkdir -p "$2" "$5"
corpus_root=$(cd "$2" && pwd)
seconds=$3
cores=$4
out=$(cd "$5" && pwd)
shift 5
case "$seconds$cores" in
  *[!0-9]*) echo "fuzz: SECONDS and CORES must be whole numbers" >&2; exit 2 ;;
esac
[ "$cores" -ge 1 ] || cores=1

if [ $# -gt 0 ]; then
  targets="$*"
else
  targets=""
  for f in "$bin_dir"/*_fuzzer; do
    [ -x "$f" ] && targets="$targets $(basename "$f")"
  done
fi
n=0
for t in $targets; do
  [ -x "$bin_dir/$t" ] || { echo "fuzz: $bin_dir/$t is not an executable" >&2; exit 2; }
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "fuzz: no *_fuzzer in $bin_dir" >&2; exit 2; }

workers=$((cores / n))
parallel=$n
if [ "$workers" -lt 1 ]; then
  workers=1
  parallel=$cores
fi
echo "fuzz: $n target(s), ${seconds}s each, $cores core(s): $parallel at a time, $workers worker(s) each" >&2
for t in $targets; do echo "$t"; done |
  xargs -P "$parallel" -I{} "$0" --one {} "$bin_dir" "$corpus_root" "$seconds" "$workers" "$out"

# The summary: figures from each log (plain and fork-mode status lines).
status=0
: >"$out/summary.txt"
printf '[' >"$out/summary.json"
sep=""
for t in $targets; do
  log="$out/$t.log"
  rc=$(cat "$out/$t/exit_status" 2>/dev/null || echo 255)
  inputs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1 || true)
  if [ -z "$inputs" ]; then  # fork mode: "#RUNS: cov: ..." status lines
    inputs=$(grep -o '^#[0-9]*' "$log" | tail -n 1 | tr -d '#' || true)
  fi
  edges=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*' || true)
  features=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*' || true)
  corpus=$(find "$corpus_root/$t" -type f | wc -l | tr -d ' ')
  crashes=$(find "$out/$t/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o \
    -name 'timeout-*' -o -name 'oom-*' \) | wc -l | tr -d ' ')
  verdict=ok
  if [ "$crashes" -gt 0 ]; then
    verdict=CRASHES
    status=1
  elif [ "$rc" != 0 ]; then
    verdict="FAILED (exit $rc)"
    status=1
  fi
  line="$t: ${inputs:-?} inputs in ${seconds}s, ${edges:-?} edges, ${features:-?} features, corpus $corpus files, $workers worker(s), $crashes crash(es): $verdict"
  echo "fuzz: $line"
  echo "$line" >>"$out/summary.txt"
  printf '%s\n  {"target": "%s", "seconds": %s, "workers": %s, "inputs": %s, "edges": %s, "features": %s, "corpus_files": %s, "crashes": %s, "exit_status": %s}' \
    "$sep" "$t" "$seconds" "$workers" "${inputs:-null}" "${edges:-null}" "${features:-null}" \
    "$corpus" "$crashes" "$rc" >>"$out/summary.json"
  sep=","
done
printf '\n]\n' >>"$out/summary.json"
exit $status
