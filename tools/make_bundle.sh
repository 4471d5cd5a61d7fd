#!/usr/bin/env bash
# Makes a relocatable bundle of the built binaries for a machine without our
# build dependencies (e.g. a GPU node with another distribution):
#   <out>/bin/{xpu-daemon,xpu-engine,xpu,xpu-calibrate,xpu-ring-dump,xpu-trace-validate (when built)}, plus xpu-fake-train and
#   xpu-fake-launch with their libraries in <out>/lib/xpu-fake-runtime/ when built
#   <out>/lib/libxpu_hook.so and every non-glibc shared library they need,
# with RUNPATH $ORIGIN/../lib (binaries) and $ORIGIN (libraries).
# The C and C++ runtimes (glibc, libstdc++, libgcc) are not bundled: the
# target's newer ones are backwards compatible.
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-.bundle}
command -v patchelf >/dev/null || tools/install_deps.sh patchelf
rm -rf "$OUT"; mkdir -p "$OUT/bin" "$OUT/lib"
bins=()
for b in daemon/xpu-daemon engine/xpu-engine tools/xpu_cli/xpu daemon/xpu-ring-dump tools/xpu \
         tools/calibrate/xpu-calibrate engine/timeline/xpu-trace-validate; do
  [ -x "$BUILD/$b" ] && bins+=("$BUILD/$b")
done
for b in "${bins[@]}"; do cp "$b" "$OUT/bin/"; done
hook=$(find "$BUILD/hook" -maxdepth 1 -name 'libxpu_hook.so' | head -1)
[ -n "$hook" ] && cp "$hook" "$OUT/lib/"
plugin=$(find "$BUILD/hook" -maxdepth 1 -name 'libnccl-profiler-xpu.so' | head -1 || true)
[ -n "${plugin:-}" ] && cp "$plugin" "$OUT/lib/"
# Python instrumentation, where the hook looks for it (../share/xputimer/python).
mkdir -p "$OUT/share/xputimer/python"
cp -r python/xputimer "$OUT/share/xputimer/python/"
find "$OUT/share/xputimer/python" -name '__pycache__' -prune -exec rm -rf {} + 2>/dev/null || true
find "$OUT/share/xputimer/python" -name '*.so' -delete  # built for this machine's Python only
cp python/xputimer/_autoload/sitecustomize.py "$OUT/share/xputimer/python/"
skip='^(linux-vdso|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|ld-linux|libstdc\+\+|libgcc_s|libresolv\.so)'
for f in "$OUT"/bin/*; do
  ldd "$f" | awk '/=> \//{print $1" "$3}' | while read -r name path; do
    if ! [[ $name =~ $skip ]]; then cp -nL "$path" "$OUT/lib/$name"; fi
  done
done
# Debug info stays in the build tree; the bundle carries stripped copies.
for f in "$OUT"/bin/* "$OUT"/lib/*.so*; do [ -f "$f" ] && strip --strip-unneeded "$f" 2>/dev/null || true; done
for f in "$OUT"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$OUT"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$f" 2>/dev/null || true; done
# GPU-less test runtime, for tools/demo.sh on a machine without GPUs:
# bin/xpu-fake-train, bin/xpu-fake-launch and the CUDA/NCCL doubles in their
# own directory, lib/xpu-fake-runtime/, so that nothing else (the hook above
# all, whose RUNPATH is lib/) can load a double instead of a real library.
if [ -x "$BUILD/fake_runtime/bin/xpu-fake-train" ]; then
  mkdir -p "$OUT/lib/xpu-fake-runtime"
  cp -P "$BUILD"/fake_runtime/lib/*.so* "$OUT/lib/xpu-fake-runtime/"
  cp "$BUILD/fake_runtime/bin/xpu-fake-train" "$BUILD/fake_runtime/bin/xpu-fake-launch" "$OUT/bin/"
  patchelf --set-rpath '$ORIGIN/../lib/xpu-fake-runtime' "$OUT/bin/xpu-fake-train"
  for f in "$OUT"/lib/xpu-fake-runtime/*.so*; do
    [ -L "$f" ] || patchelf --set-rpath '$ORIGIN' "$f"
  done
fi
du -sh "$OUT"
