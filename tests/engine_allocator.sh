#!/usr/bin/env bash
# The engine says which memory allocator it runs on, and that allocator is
# the one it was built for: jemalloc in the default build (its settings
# from the engine, MALLOC_CONF winning over them), glibc's with
# -DXPU_ENGINE_JEMALLOC=OFF (--malloc-arenas applied).
# usage: engine_allocator.sh XPU_ENGINE jemalloc|glibc
set -euo pipefail
ENGINE=$1; WANT=$2
D=$(mktemp -d "${TMPDIR:-/tmp}/xpu-engine-alloc.XXXXXX")
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$D"' EXIT
# shellcheck source=engine_start.sh
. "$(dirname "$0")/engine_start.sh"

# Starts the engine with `env` and flags, waits for it to listen, stops it,
# prints the allocator line of its log.
allocator_line() {
  local log=$D/engine.$RANDOM.log
  start_engine "$log" env "$@"
  kill "$pid"; wait "$pid" || true
  grep "memory allocator:" "$log" || { cat "$log"; echo "FAIL: no allocator line"; exit 1; }
}

run=("$ENGINE" --listen 127.0.0.1:0 --metrics-addr 127.0.0.1:0)
line=$(allocator_line "${run[@]}" --db "$D/a.db")
case $WANT in
  jemalloc)
    grep -q "memory allocator: jemalloc [0-9.]*, 2 arenas, background purging$" <<<"$line" ||
      { echo "FAIL: $line"; exit 1; }
    line=$(allocator_line MALLOC_CONF=narenas:3 "${run[@]}" --db "$D/b.db" --malloc-arenas 2)
    grep -q "jemalloc [0-9.]*, 3 arenas, background purging; --malloc-arenas has no effect" <<<"$line" ||
      { echo "FAIL: $line"; exit 1; }
    ;;
  glibc)
    grep -q "memory allocator: glibc, 1 arenas$" <<<"$line" || { echo "FAIL: $line"; exit 1; }
    line=$(allocator_line "${run[@]}" --db "$D/b.db" --malloc-arenas 0)
    grep -q "memory allocator: glibc, its default arenas$" <<<"$line" || { echo "FAIL: $line"; exit 1; }
    ;;
  *) echo "usage: engine_allocator.sh XPU_ENGINE jemalloc|glibc"; exit 2 ;;
esac
echo "engine allocator: $WANT as built"
