#!/usr/bin/env bash
# An engine-only build (-DXPU_BUILD_HOOK=OFF) configures without the CUDA
# toolkit (find_package(CUDAToolkit) disabled, so it cannot be found even
# where /usr/local/cuda exists) and still has the engine, daemon and CLI.
# usage: engine_only_configure.sh SOURCE_DIR CMAKE
set -euo pipefail
SRC=$1; CMAKE=${2:-cmake}
B=$(mktemp -d "${TMPDIR:-/tmp}/xpu-engine-only.XXXXXX")
trap 'rm -rf "$B"' EXIT
if ! "$CMAKE" -S "$SRC" -B "$B" -G Ninja -DXPU_BUILD_HOOK=OFF -DXPU_BUILD_PYTHON=OFF \
     -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON >"$B.log" 2>&1; then
  cat "$B.log"; rm -f "$B.log"; echo "FAIL: engine-only configure"; exit 1
fi
rm -f "$B.log"
targets=$(ninja -C "$B" -t targets all)
for t in xpu-engine xpu-daemon xpu; do
  grep -q "^$t:" <<<"$targets" || { echo "FAIL: no target $t in the engine-only build"; exit 1; }
done
for t in xpu_hook xpu-calibrate; do
  if grep -q "^$t:" <<<"$targets"; then echo "FAIL: $t in an engine-only build"; exit 1; fi
done
if grep -qi "^CUDAToolkit_INCLUDE_DIRS:.*[^-]$" "$B/CMakeCache.txt"; then
  echo "FAIL: the engine-only build looked for the CUDA toolkit"; exit 1
fi
echo "engine-only configure: xpu-engine, xpu-daemon, xpu; no hook, no CUDA toolkit"
