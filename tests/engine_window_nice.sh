#!/usr/bin/env bash
# The window tick's threads run at the engine's niceness plus --window-nice,
# the rest (ingest, gRPC, the hang watch) at the engine's own: a short
# engine gives its cores to the ingest first.
# usage: engine_window_nice.sh XPU_ENGINE
set -euo pipefail
ENGINE=$1
D=$(mktemp -d "${TMPDIR:-/tmp}/xpu-engine-nice.XXXXXX")
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$D"' EXIT
# shellcheck source=engine_start.sh
. "$(dirname "$0")/engine_start.sh"

# Starts the engine with the flags, waits for it to listen, prints the nice
# value of each of its threads (field 19 of /proc/PID/task/TID/stat), stops it.
thread_nices() {
  local log=$D/engine.$RANDOM.log
  start_engine "$log" "$ENGINE" --listen 127.0.0.1:0 --metrics-addr 127.0.0.1:0 --db "$D/$RANDOM.db" "$@"
  sleep 0.3  # the window thread lowers its priority as it starts
  for s in /proc/"$pid"/task/*/stat; do
    # The command name may hold spaces: the fields after its ')' are fixed.
    sed 's/.*) //' "$s" | awk '{print $17}'
  done | sort -n | uniq -c
  kill "$pid"; wait "$pid" || true
}

base=$(awk '{print $19}' /proc/self/stat)
want=$((base + 7))
out=$(thread_nices --window-nice 7)
echo "$out"
grep -qE "^ +1 $want\$" <<<"$out" || { echo "FAIL: no single thread at nice $want"; exit 1; }
grep -qE "^ +[0-9]+ $base\$" <<<"$out" || { echo "FAIL: no thread left at nice $base"; exit 1; }
out=$(thread_nices --window-nice 0)
! grep -qE " $want\$" <<<"$out" || { echo "FAIL: --window-nice 0 lowered a thread"; exit 1; }
echo "engine window nice: the tick's thread at +7, the others as the engine"
