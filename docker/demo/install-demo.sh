#!/usr/bin/env bash
# install-demo.sh BUILD ROOT — adds the GPU-less demo to an installed tree
# ROOT (what `make install-only` made, DESTDIR and PREFIX joined):
#   ROOT/bin/xpu-fake-train, ROOT/bin/xpu-fake-launch      the test job
#   ROOT/lib/xpu-fake-runtime/                             CUDA/NCCL doubles
#   ROOT/share/xputimer/demo/{demo.sh,xpu-demo-job}        the demos
# The doubles live in their own directory, found through xpu-fake-train's
# RUNPATH only, so that nothing else can load them instead of real CUDA
# libraries. Only the demo image runs this; a production install never does.
set -euo pipefail
BUILD=${1:?usage: install-demo.sh BUILD ROOT}
ROOT=${2:?usage: install-demo.sh BUILD ROOT}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
train=$BUILD/fake_runtime/bin/xpu-fake-train
[ -x "$train" ] || { echo "install-demo: $train missing (build the targets xpu-fake-train and xpu_fake_runtime)" >&2; exit 1; }
command -v patchelf >/dev/null || { echo "install-demo: patchelf is needed" >&2; exit 1; }
mkdir -p "$ROOT/bin" "$ROOT/lib/xpu-fake-runtime" "$ROOT/share/xputimer/demo"
cp -P "$BUILD"/fake_runtime/lib/*.so* "$ROOT/lib/xpu-fake-runtime/"
for f in "$ROOT"/lib/xpu-fake-runtime/*.so*; do
  [ -L "$f" ] || patchelf --set-rpath '$ORIGIN' "$f"
done
install -m 0755 "$train" "$BUILD/fake_runtime/bin/xpu-fake-launch" "$ROOT/bin/"
patchelf --set-rpath '$ORIGIN/../lib/xpu-fake-runtime' "$ROOT/bin/xpu-fake-train"
install -m 0755 "$REPO/tools/demo.sh" "$HERE/xpu-demo-job" "$ROOT/share/xputimer/demo/"
echo "install-demo: GPU-less runtime and demos in $ROOT"
