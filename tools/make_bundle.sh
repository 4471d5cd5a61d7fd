#!/usr/bin/env bash
# Makes a relocatable bundle of the built binaries for a machine without our
# build dependencies (e.g. a GPU node with another distribution):
#   <out>/bin/{xpu-daemon,xpu-engine,xpu,xpu-ring-dump,xpu-fake-train}
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
for b in daemon/xpu-daemon engine/xpu-engine tools/xpu_cli/xpu daemon/xpu-ring-dump tools/xpu; do
  [ -x "$BUILD/$b" ] && bins+=("$BUILD/$b")
done
for b in "${bins[@]}"; do cp "$b" "$OUT/bin/"; done
hook=$(find "$BUILD/hook" -maxdepth 1 -name 'libxpu_hook.so' | head -1)
[ -n "$hook" ] && cp "$hook" "$OUT/lib/"
plugin=$(find "$BUILD/hook" -maxdepth 1 -name 'libnccl-profiler-xpu.so' | head -1 || true)
[ -n "${plugin:-}" ] && cp "$plugin" "$OUT/lib/"
skip='^(linux-vdso|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|ld-linux|libstdc\+\+|libgcc_s|libresolv\.so)'
for f in "$OUT"/bin/*; do
  ldd "$f" | awk '/=> \//{print $1" "$3}' | while read -r name path; do
    if ! [[ $name =~ $skip ]]; then cp -nL "$path" "$OUT/lib/$name"; fi
  done
done
for f in "$OUT"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$OUT"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$f" 2>/dev/null || true; done
du -sh "$OUT"
