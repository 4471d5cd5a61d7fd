#!/bin/sh
# tools/run_fuzz_bundle.sh BUNDLE.tar.xz SECONDS OUTDIR [CORES] — runs every
# fuzz target of a bundle (tools/make_fuzz_bundle.sh) for SECONDS each, in
# parallel on CORES cores (default: all of this machine's), without a build
# tree. OUTDIR gets summary.txt / summary.json (inputs, edges, crashes per
# target), each target's log, any reproducers under <target>/artifacts/, and
# the grown corpora under corpus/. Exit status 1 when a target found a crash.
set -eu
if [ $# -lt 3 ]; then
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
bundle=$1
seconds=$2
out=$3
cores=${4:-$(nproc)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf "$bundle"
root="$work/xpu-fuzz"
cp "$root/MANIFEST" "$out/MANIFEST"
LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
status=0
"$root/fuzz_targets.sh" "$root/bin" "$root/corpus" "$seconds" "$cores" "$out" || status=$?
rm -rf "$out/corpus"
cp -R "$root/corpus" "$out/corpus"
exit $status
