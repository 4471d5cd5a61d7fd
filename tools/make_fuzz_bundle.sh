#!/bin/sh
# tools/make_fuzz_bundle.sh BUILD_DIR OUT.tar.xz — packs the libFuzzer
# targets built in BUILD_DIR (by tools/run_fuzz.sh: BUILD_DIR/fuzz-bin) with
# their corpora (BUILD_DIR/corpus) and the shared libraries they load (all
# but the C library's own), so that tools/run_fuzz_bundle.sh runs them on
# another Linux x86-64 machine without a build tree or the build's packages.
#
# Layout: xpu-fuzz/{bin,lib,corpus/<target>,fuzz_targets.sh,run_fuzz_bundle.sh,
# MANIFEST}.
set -eu
if [ $# -ne 2 ]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
build=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$build/fuzz-bin" ] || { echo "fuzz-bundle: no $build/fuzz-bin (run tools/run_fuzz.sh first)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/xpu-fuzz"
mkdir -p "$root/bin" "$root/lib" "$root/corpus"
for f in "$build"/fuzz-bin/*_fuzzer; do
  t=$(basename "$f")
  cp -L "$f" "$root/bin/$t"
  mkdir -p "$root/corpus/$t"
  if [ -d "$build/corpus/$t" ]; then
    find "$build/corpus/$t" -maxdepth 1 -type f -exec cp {} "$root/corpus/$t/" \;
  fi
  # Shared libraries, resolved here; the C library and the loader stay the
  # target machine's (glibc is backward compatible).
  ldd "$f" | awk '/=> \// { print $3 }' | while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libresolv.so*) ;;
      *) cp -L -n "$lib" "$root/lib/" ;;
    esac
  done
done
cp "$here/fuzz_targets.sh" "$here/run_fuzz_bundle.sh" "$root/"
{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version | head -n 1)"
  echo "commit: $(git -C "$here/.." rev-parse HEAD 2>/dev/null || echo unknown)"
  for f in "$root"/bin/*; do
    echo "target: $(basename "$f") corpus $(find "$root/corpus/$(basename "$f")" -type f | wc -l) files"
  done
} >"$root/MANIFEST"
tar -C "$stage" -cJf "$out" xpu-fuzz
echo "fuzz-bundle: $out ($(du -h "$out" | cut -f1)): $(sed -n 's/^target: //p' "$root/MANIFEST" | tr '\n' ';')"
