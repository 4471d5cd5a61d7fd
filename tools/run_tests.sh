#!/usr/bin/env bash
# Runs every test: the CTest suite (unit, integration, end-to-end).
set -uo pipefail
BUILD=${1:-build}
cd "$BUILD" || exit 2
ctest --output-on-failure --timeout 600 -j"$(nproc 2>/dev/null || echo 2)"
