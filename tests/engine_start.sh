# Sourced by the engine scripts of tests/. start_engine LOG CMD... starts
# CMD (an xpu-engine command line) with its output in LOG, sets $pid, and
# waits up to 10 s for it to listen; it fails the test, printing the log,
# if the engine exits first.
start_engine() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    grep -q "listening on" "$log" && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "FAIL: the engine exited"; exit 1; }
    sleep 0.1
  done
}
