#!/bin/sh
# tools/run_fuzz.sh BUILD_DIR SECONDS [CORES] [OUTDIR] — builds every
# libFuzzer target with clang in BUILD_DIR and runs them all for SECONDS
# each, in parallel on CORES cores (default 2; tools/fuzz_targets.sh says
# how they are shared), keeping each corpus in BUILD_DIR/corpus/<target>.
# OUTDIR (default BUILD_DIR/fuzz-out) gets the logs, any reproducers, and
# summary.txt / summary.json (inputs, edges, crashes per target). Fails if
# any target found a crash.
# FUZZ_TARGETS="a b" runs only those.
# To fuzz on another machine without a build tree: tools/make_fuzz_bundle.sh.
set -eu
build=${1:-build-fuzz}
seconds=${2:-600}
cores=${3:-2}
out=${4:-$build/fuzz-out}
targets=${FUZZ_TARGETS:-"ring_reader_fuzzer ring_snapshot_fuzzer batch_decoder_fuzzer"}
here=$(cd "$(dirname "$0")" && pwd)
launcher=""
if command -v ccache >/dev/null 2>&1; then
  launcher="-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
fi
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=/usr/bin/python3 $launcher >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j"$cores" --target $targets
# One directory of the built fuzzers, as a bundle has it.
bin="$build/fuzz-bin"
rm -rf "$bin"
mkdir -p "$bin"
for t in $targets; do
  f=$(find "$build" -path "$bin" -prune -o -type f -name "$t" -perm -u+x -print | head -n 1)
  if [ -z "$f" ]; then
    echo "fuzz: $t was not built" >&2
    exit 1
  fi
  ln -s "$(realpath "$f")" "$bin/$t"
done
# shellcheck disable=SC2086
exec "$here/fuzz_targets.sh" "$bin" "$build/corpus" "$seconds" "$cores" "$out" $targets
