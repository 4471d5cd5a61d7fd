#!/usr/bin/env bash
# Makes a relocatable bundle of the built binaries for a machine without our
# build dependencies (e.g. a GPU node with another distribution):
#   <out>/bin/{xpu-daemon,xpu-engine,xpu,xpu-calibrate,xpu-ring-dump,xpu-sim,xpu-trace-validate,
#   detector_scale_bench,localize_bench (when built)}, plus xpu-fake-train and
#   xpu-fake-launch with their libraries in <out>/lib/xpu-fake-runtime/ when built
#   <out>/lib/libxpu_hook.so and every non-glibc shared library they need,
#   <out>/share/xputimer/python/{sitecustomize.py,xputimer/} (pure Python), plus
#   xputimer/_xputimer_native.cpython-312-<arch>-linux-gnu.so for CPython 3.12
#   (the GPU nodes' interpreter) when a CPython 3.12 with headers is found,
# with RUNPATH $ORIGIN/../lib (binaries), $ORIGIN (libraries) and
# $ORIGIN/../../../../lib (the Python module).
# The C and C++ runtimes (glibc, libstdc++, libgcc) are not bundled: the
# target's newer ones are backwards compatible.
#
# The CPython 3.12 module is built in its own build directory, configured for
# the Python module only (no services, no tests; `cmake --build --target
# _xputimer_native` compiles two files):
#   BUNDLE_PY312=/path/to/python3.12   interpreter to build it for (default: the
#                                      newest pyenv 3.12.x, else python3.12 on PATH);
#                                      `off` leaves the module out
#   BUNDLE_PY312_BUILD=dir             its build directory (default build-py312);
#                                      a module already built there is used when
#                                      no interpreter is found
# Without either the bundle has no compiled module and xputimer uses ctypes.
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-.bundle}
PY312=${BUNDLE_PY312:-}
PY312_BUILD=${BUNDLE_PY312_BUILD:-build-py312}
command -v patchelf >/dev/null || tools/install_deps.sh patchelf
rm -rf "$OUT"; mkdir -p "$OUT/bin" "$OUT/lib"
bins=()
for b in daemon/xpu-daemon engine/xpu-engine tools/xpu_cli/xpu tools/xpu-ring-dump \
         tools/calibrate/xpu-calibrate common/timeline/xpu-trace-validate tools/sim/xpu-sim \
         bench/detectors/detector_scale_bench bench/localize/localize_bench; do
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
# _xputimer_native for CPython 3.12; the ABI tag in its file name makes every
# other interpreter ignore it (they use ctypes).
py_mods=()
py312_module() {
  local py=$PY312 explicit=0 c ext mod cache=$PY312_BUILD/CMakeCache.txt
  if [ "$py" = off ]; then echo "bundle: BUNDLE_PY312=off: no _xputimer_native, xputimer uses ctypes"; return 0; fi
  if [ -n "$py" ]; then
    explicit=1  # asked for: its failures are fatal
  else
    for c in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 2>/dev/null | sort -V -r || true) \
             $(command -v python3.12 || true); do
      if [ -x "$c" ]; then py=$c; break; fi
    done
  fi
  if [ -n "$py" ] && ! "$py" -c 'import os, sys, sysconfig
sys.exit(sys.version_info[:2] != (3, 12) or sys.implementation.name != "cpython"
         or not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    echo "bundle: $py is not a CPython 3.12 with Python.h" >&2
    [ $explicit = 1 ] && return 1
    py=
  fi
  if [ -f "$cache" ]; then
    ext=$(sed -n 's/^PYTHON_MODULE_EXTENSION:INTERNAL=//p' "$cache")
    if [[ $ext == .cpython-312-* ]]; then
      cmake --build "$PY312_BUILD" --target _xputimer_native -j"$(nproc 2>/dev/null || echo 2)" >/dev/null ||
        { echo "bundle: building _xputimer_native in $PY312_BUILD failed" >&2; [ $explicit = 1 ] && return 1; }
    else  # never reconfigure someone else's build directory
      echo "bundle: $PY312_BUILD is not configured for CPython 3.12 (module suffix '${ext}'); not building there (set BUNDLE_PY312_BUILD to a fresh directory)" >&2
      [ $explicit = 1 ] && return 1
    fi
  elif [ -n "$py" ]; then
    mkdir -p "$PY312_BUILD"
    if cmake -S . -B "$PY312_BUILD" -DXPU_BUILD_SERVICES=OFF -DXPU_BUILD_TESTS=OFF -DXPU_BUILD_PYTHON=ON \
         -DPython_EXECUTABLE="$py" -DPYTHON_EXECUTABLE="$py" >"$PY312_BUILD/configure.log" 2>&1; then
      cmake --build "$PY312_BUILD" --target _xputimer_native -j"$(nproc 2>/dev/null || echo 2)" >/dev/null ||
        { echo "bundle: building _xputimer_native for $py in $PY312_BUILD failed" >&2; [ $explicit = 1 ] && return 1; }
    else
      echo "bundle: configuring $PY312_BUILD for $py failed (see $PY312_BUILD/configure.log)" >&2
      [ $explicit = 1 ] && return 1
    fi
  fi
  mod=$(find "$PY312_BUILD/python/native" -maxdepth 1 -name '_xputimer_native.cpython-312-*.so' 2>/dev/null | head -1 || true)
  if [ -z "$mod" ]; then
    echo "bundle: no _xputimer_native for CPython 3.12 (none with headers found or none built in" \
         "$PY312_BUILD; set BUNDLE_PY312=/path/to/python3.12): xputimer uses ctypes there (slower emit)"
    return 0
  fi
  cp "$mod" "$OUT/share/xputimer/python/xputimer/"
  py_mods+=("$OUT/share/xputimer/python/xputimer/$(basename "$mod")")
  echo "bundle: share/xputimer/python/xputimer/$(basename "$mod") (built in $PY312_BUILD)"
}
py312_module
skip='^(linux-vdso|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|ld-linux|libstdc\+\+|libgcc_s|libresolv\.so)'
for f in "$OUT"/bin/* "${py_mods[@]}"; do
  ldd "$f" | awk '/=> \//{print $1" "$3}' | while read -r name path; do
    if ! [[ $name =~ $skip ]]; then cp -nL "$path" "$OUT/lib/$name"; fi
  done
done
# Debug info stays in the build tree; the bundle carries stripped copies.
for f in "$OUT"/bin/* "$OUT"/lib/*.so* "${py_mods[@]}"; do [ -f "$f" ] && strip --strip-unneeded "$f" 2>/dev/null || true; done
for f in "$OUT"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$OUT"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$f" 2>/dev/null || true; done
# share/xputimer/python/xputimer/ -> <out>/lib
for f in "${py_mods[@]}"; do patchelf --set-rpath '$ORIGIN/../../../../lib' "$f"; done
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
