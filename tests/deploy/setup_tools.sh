#!/usr/bin/env bash
# setup_tools.sh VENV — the Python validators of the deployment checks, from
# PyPI, in VENV (created with Debian's python3 -m venv): kubernetes-validate
# (carries the Kubernetes OpenAPI schemas, works offline once installed) and
# PyYAML. Exits 77 (skipped) when the venv cannot be made or PyPI cannot be
# reached; tests that need the tools then skip with that reason.
set -uo pipefail
VENV=${1:?usage: setup_tools.sh VENV}
PKGS=(kubernetes-validate==1.37.0 pyyaml)
if [ -x "$VENV/bin/kubernetes-validate" ] && "$VENV/bin/python" -c 'import yaml' 2>/dev/null; then
  echo "deploy tools: $VENV ready ($("$VENV/bin/kubernetes-validate" --version 2>&1 | head -1))"
  exit 0
fi
if ! /usr/bin/python3 -m venv "$VENV" >/dev/null 2>&1; then
  echo "SKIP deploy tools: /usr/bin/python3 -m venv failed (Debian package python3-venv)"
  exit 77
fi
if ! timeout 240 "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PKGS[@]}"; then
  echo "SKIP deploy tools: pip install ${PKGS[*]} failed (no PyPI?)"
  exit 77
fi
echo "deploy tools: installed ${PKGS[*]} in $VENV"
