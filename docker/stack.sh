#!/usr/bin/env bash
# docker/stack.sh — the one-command stack (docker/compose.yaml).
#
#   docker/stack.sh up [SERVICE...]    engine, Prometheus, Alertmanager, Grafana (`make stack`)
#   docker/stack.sh demo               the same plus a GPU-less job with a slow GPU
#   docker/stack.sh status             containers, engine health, xpu status
#   docker/stack.sh xpu ARGS...        the xpu CLI inside the engine container
#   docker/stack.sh logs [SERVICE]     logs
#   docker/stack.sh down [-v]          stop and remove (-v: also the data volumes)
#
# Compose tool: XPU_COMPOSE="docker compose" or "podman-compose" (default:
# docker compose where docker runs, else podman-compose). With podman,
# XPU_PODMAN_ARGS and XPU_PODMAN_RUN_ARGS are handed to podman-compose's
# --podman-args / --podman-run-args (e.g. "--runtime runc" where crun cannot
# run containers).
#
# The engine's token is created on first use in docker/.secrets/xpu-token
# (a random 32-byte hex string; the directory is 0700). Images: as in
# compose.yaml; images built on this host by `make images --standins`
# (docker/.local-bases/images.env) replace unreachable upstream ones.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
PROJECT=${XPU_STACK_PROJECT:-xputimer}

# Images: environment, else the local stand-ins, else base-images.env.
for f in .local-bases/images.env base-images.env; do
  [ -f "$f" ] || continue
  while IFS='=' read -r k v; do
    [[ $k =~ ^[A-Z_]+$ ]] || continue
    [ -n "${!k:-}" ] || export "$k=$v"
  done <"$f"
done

compose=()
if [ -n "${XPU_COMPOSE:-}" ]; then
  read -r -a compose <<<"$XPU_COMPOSE"
elif command -v docker >/dev/null && docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
elif command -v podman-compose >/dev/null; then
  compose=(podman-compose)
else
  echo "stack: neither 'docker compose' nor podman-compose found (make image-deps installs podman-compose)" >&2
  exit 1
fi
if [ "${compose[0]}" = podman-compose ]; then
  [ -z "${XPU_PODMAN_ARGS:-}" ] || compose+=(--podman-args "$XPU_PODMAN_ARGS")
  [ -z "${XPU_PODMAN_RUN_ARGS:-}" ] || compose+=(--podman-run-args "$XPU_PODMAN_RUN_ARGS")
fi
compose+=(-p "$PROJECT")

token() {
  if [ ! -s .secrets/xpu-token ]; then
    mkdir -p .secrets && chmod 0700 .secrets
    # Readable inside the engine container (user xpu); the directory keeps
    # other users of this host out.
    (umask 022 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >.secrets/xpu-token)
    echo "stack: engine token created in docker/.secrets/xpu-token"
  fi
}

engine_container() {
  local c
  for c in "${PROJECT}_xpu-engine_1" "${PROJECT}-xpu-engine-1"; do
    if runtime inspect "$c" >/dev/null 2>&1; then echo "$c"; return; fi
  done
  echo "${PROJECT}-xpu-engine-1"
}
runtime() {
  if [ "${compose[0]}" = podman-compose ]; then
    # shellcheck disable=SC2086
    podman ${XPU_PODMAN_ARGS:-} "$@"
  else
    docker "$@"
  fi
}

# Our images come from `make images`: say so rather than let compose try
# to pull them from a registry that does not have them.
need_images() {
  local img
  for img in "${XPU_ENGINE_IMAGE:-localhost/xputimer-engine:0.1.0}" "$@"; do
    if ! runtime image inspect "$img" >/dev/null 2>&1; then
      echo "stack: image $img not found: build it with 'make images'" >&2
      exit 1
    fi
  done
}

cmd=${1:-up}
shift || true
case $cmd in
  up)
    need_images
    token
    "${compose[@]}" -f compose.yaml up -d "$@"
    echo "stack: Grafana http://${XPU_BIND:-127.0.0.1}:${XPU_GRAFANA_PORT:-3000} (folder XPUTimer)," \
         "Prometheus :${XPU_PROMETHEUS_PORT:-9090}, Alertmanager :${XPU_ALERTMANAGER_PORT:-9093}," \
         "engine gRPC :${XPU_ENGINE_PORT:-7441}, metrics :${XPU_METRICS_PORT:-9464}"
    ;;
  demo)
    need_images "${XPU_DEMO_IMAGE:-localhost/xputimer-demo:0.1.0}"
    token
    "${compose[@]}" -f compose.yaml -f compose.demo.yaml up -d "$@"
    echo "stack: demo job started; its slow_gpu diagnosis appears in 'docker/stack.sh xpu diagnose --job xpu-demo'" \
         "and in Alertmanager (receiver operations) after about a minute"
    ;;
  status)
    "${compose[@]}" -f compose.yaml ps
    runtime exec "$(engine_container)" xpu --token-file /run/secrets/xpu-token status
    ;;
  xpu)
    runtime exec "$(engine_container)" xpu --token-file /run/secrets/xpu-token "$@"
    ;;
  logs)
    "${compose[@]}" -f compose.yaml -f compose.demo.yaml logs "$@"
    ;;
  down)
    if [ "${1:-}" = -v ]; then
      "${compose[@]}" -f compose.yaml -f compose.demo.yaml down -v
    else
      "${compose[@]}" -f compose.yaml -f compose.demo.yaml down
    fi
    # podman-compose leaves the project's network behind.
    if [ "${compose[0]}" = podman-compose ] && runtime network exists "${PROJECT}_default" 2>/dev/null; then
      runtime network rm "${PROJECT}_default" >/dev/null
    fi
    ;;
  *)
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
