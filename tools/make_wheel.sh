#!/usr/bin/env bash
# Makes the pip wheel of XPUTimer: the xputimer Python package with the
# native parts of the bundle (tools/make_bundle.sh) inside it, so that
#   pip install xputimer-*.whl
#   python -m xputimer run -- <command>
# traces the command with the daemon auto-started, on a machine without our
# build dependencies. Layout inside site-packages:
#   xputimer/                       the Python package (python/xputimer)
#   xputimer/_bundle/bin/           xpu-daemon, xpu, xpu-engine, ... (RUNPATH $ORIGIN/../lib)
#   xputimer/_bundle/lib/           libxpu_hook.so, libnccl-profiler-xpu.so and the
#                                   non-glibc libraries they need (RUNPATH $ORIGIN)
#   xputimer/_xputimer_native.cpython-312-*.so   when the bundle built one (see
#                                   make_bundle.sh, BUNDLE_PY312); other Pythons use ctypes
# The hook finds xpu-daemon at <its dir>/../bin (daemon_client.cc), as in the
# bundle. Console scripts: xpu-run (the launcher) and xpu (runs _bundle/bin/xpu).
#
# usage: tools/make_wheel.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, .whl-xpu)
# The wheel is tagged py3-none-manylinux_2_36_x86_64 (built on Debian 12,
# glibc 2.36; libstdc++ comes from the target, as for the bundle). Its file
# name is printed last.
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-.whl-xpu}
HERE=$(cd "$(dirname "$0")/.." && pwd)
cd "$HERE"
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/xpu-wheel.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
[ -x "$BUILD/hook/libxpu_hook.so" ] || [ -f "$BUILD/hook/libxpu_hook.so" ] ||
  { echo "make_wheel: $BUILD/hook/libxpu_hook.so not built (cmake --build $BUILD first)" >&2; exit 1; }
[ -x "$BUILD/daemon/xpu-daemon" ] ||
  { echo "make_wheel: $BUILD/daemon/xpu-daemon not built (cmake --build $BUILD first)" >&2; exit 1; }
tools/make_bundle.sh "$BUILD" "$STAGE/bundle" >"$STAGE/bundle.log" 2>&1 ||
  { cat "$STAGE/bundle.log" >&2; echo "make_wheel: make_bundle.sh failed" >&2; exit 1; }
PKG=$STAGE/root/xputimer
mkdir -p "$PKG/_bundle"
cp -r python/xputimer/. "$PKG/"
find "$PKG" -name '__pycache__' -prune -exec rm -rf {} +
find "$PKG" -maxdepth 1 -name '*.so' -delete  # built for this machine's Python only
cp -r "$STAGE/bundle/bin" "$STAGE/bundle/lib" "$PKG/_bundle/"
# The test runtime's doubles are for tests and the demo, not for users.
rm -rf "$PKG/_bundle/lib/xpu-fake-runtime" "$PKG/_bundle/bin/xpu-fake-train" "$PKG/_bundle/bin/xpu-fake-launch"
for mod in "$STAGE"/bundle/share/xputimer/python/xputimer/_xputimer_native.cpython-*.so; do
  [ -f "$mod" ] || continue
  cp "$mod" "$PKG/"
  patchelf --set-rpath '$ORIGIN/_bundle/lib' "$PKG/$(basename "$mod")"
done
mkdir -p "$OUT"
python3 - "$STAGE/root" "$OUT" <<'EOF'
import base64, hashlib, os, re, stat, sys, zipfile
root, out = sys.argv[1], sys.argv[2]
text = open("python/pyproject.toml").read()
version = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M).group(1)
summary = re.search(r'^description\s*=\s*"([^"]+)"', text, re.M).group(1)
lic = re.search(r'^license\s*=\s*\{text\s*=\s*"([^"]+)"', text, re.M).group(1)
tag = "py3-none-manylinux_2_36_x86_64"
dist = "xputimer-%s.dist-info" % version
path = os.path.join(out, "xputimer-%s-%s.whl" % (version, tag))
meta = {
    "METADATA": "Metadata-Version: 2.1\nName: xputimer\nVersion: %s\nSummary: %s\n"
                "License: %s\nRequires-Python: >=3.8\n\n%s" % (
                    version, summary, lic, open("python/README.md").read()),
    "WHEEL": "Wheel-Version: 1.0\nGenerator: xputimer-make_wheel\nRoot-Is-Purelib: false\nTag: %s\n" % tag,
    "entry_points.txt": "[console_scripts]\nxpu-run = xputimer.launcher:main\n"
                        "xpu = xputimer.launcher:xpu_main\n",
    "LICENSE": open("LICENSE").read(),
}
record = []
def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
tmp = path + ".tmp"
with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
    for d, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for f in sorted(files):
            full = os.path.join(d, f)
            arc = os.path.relpath(full, root)
            data = open(full, "rb").read()
            info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
            mode = os.stat(full).st_mode
            info.external_attr = ((0o755 if mode & stat.S_IXUSR else 0o644) | stat.S_IFREG) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            record.append("%s,%s,%d" % (arc, digest(data), len(data)))
    for name, body in meta.items():
        data = body.encode()
        info = zipfile.ZipInfo("%s/%s" % (dist, name), date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o644 | stat.S_IFREG) << 16
        z.writestr(info, data, zipfile.ZIP_DEFLATED)
        record.append("%s/%s,%s,%d" % (dist, name, digest(data), len(data)))
    record.append("%s/RECORD,," % dist)
    info = zipfile.ZipInfo("%s/RECORD" % dist, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o644 | stat.S_IFREG) << 16
    z.writestr(info, "\n".join(record) + "\n", zipfile.ZIP_DEFLATED)
os.replace(tmp, path)
print(path)
EOF
