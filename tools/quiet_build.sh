#!/usr/bin/env bash
# tools/quiet_build.sh BUILD COMMAND... — runs COMMAND (the build) with its
# output in BUILD/build.log and one progress line instead (`make demo`); on
# failure, the end of the log and where the whole log is.
set -u
BUILD=${1:?usage: quiet_build.sh BUILD COMMAND...}
shift
[ $# -gt 0 ] || { echo "usage: quiet_build.sh BUILD COMMAND..." >&2; exit 2; }
mkdir -p "$BUILD" || exit 1
LOG=$(cd "$BUILD" && pwd)/build.log
start=$SECONDS
"$@" >"$LOG" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; exit 130' INT TERM
stage() {  # what the build is doing now, from its log
  local p
  p=$(grep -oE '^\[ *[0-9]+%\]|^\[[0-9]+/[0-9]+\]' "$LOG" 2>/dev/null | tail -1 | tr -d '[] ')
  if [ -n "$p" ]; then echo "compiling $p"
  elif grep -q '^-- ' "$LOG" 2>/dev/null; then echo "configuring"
  else echo "checking the packages it needs"; fi
}
last_print=-100
while kill -0 "$pid" 2>/dev/null; do
  line="building: $(stage), $((SECONDS - start)) s (log: $LOG)"
  if [ -t 1 ]; then
    printf '\r%-100s' "$line"
  elif [ $((SECONDS - last_print)) -ge 30 ]; then  # a log file or a pipe: now and then
    echo "$line"; last_print=$SECONDS
  fi
  sleep 1
done
wait "$pid"
rc=$?
[ -t 1 ] && printf '\r%-100s\r' ""
if [ "$rc" -ne 0 ]; then
  echo "build failed (exit $rc) after $((SECONDS - start)) s; the end of $LOG:" >&2
  tail -n 40 "$LOG" >&2
  exit "$rc"
fi
echo "built in $((SECONDS - start)) s (log: $LOG)"
