#!/bin/sh
# tools/run_fuzz.sh BUILD_DIR SECONDS [JOBS] — builds every libFuzzer target
# with clang and runs each for SECONDS, keeping its corpus in
# BUILD_DIR/corpus/<target>; prints one line of figures per target and
# fails if any target found a crash (the reproducer stays in BUILD_DIR).
# FUZZ_TARGETS="a b" runs only those.
set -eu
build=${1:-build-fuzz}
seconds=${2:-600}
jobs=${3:-2}
targets=${FUZZ_TARGETS:-"ring_reader_fuzzer ring_snapshot_fuzzer batch_decoder_fuzzer"}
launcher=""
if command -v ccache >/dev/null 2>&1; then
  launcher="-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
fi
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=/usr/bin/python3 $launcher >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j"$jobs" --target $targets
status=0
for t in $targets; do
  bin=$(find "$build" -type f -name "$t" -perm -u+x | head -n 1)
  if [ -z "$bin" ]; then
    echo "fuzz: $t was not built" >&2
    status=1
    continue
  fi
  bin=$(realpath "$bin")
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  log="$build/$t.log"
  echo "fuzz: $t for ${seconds}s (log $log)"
  if ! (cd "$build" && "$bin" -max_total_time="$seconds" -print_final_stats=1 \
        "corpus/$t" >"$t.log" 2>&1); then
    echo "fuzz: $t FAILED; see $log" >&2
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 || true)
  echo "fuzz: $t: ${runs:-?} inputs in ${seconds}s, ${cov:-cov: ?} edges, corpus $(ls "$corpus" | wc -l) files"
done
exit $status
