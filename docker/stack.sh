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
# The engine's tokens, one per role (read, act, admin, ingest; each a random
# 32-byte hex string), are created on first use in docker/.secrets/<role>,
# mode 0600 in a 0700 directory, and handed to the engine image's user
# (uid 7441) so the containers can read them; the demo job's daemon gets
# only the ingest token. Images: as in
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

# The engine image's user (docker/Dockerfile), which reads the token files.
XPU_UID=7441
ROLES=(read act admin ingest)

# Gives a token file to the containers' user. Secrets are bind mounts that
# keep the host's owner and mode: as root, chown; with rootless podman,
# chown inside podman's user namespace; otherwise (docker as a member of
# the docker group) the file stays ours and is made readable, the 0700
# directory keeping the other users of this host out.
hand_over() {
  local f=$1
  if [ "$(id -u)" = 0 ]; then
    chown "$XPU_UID:$XPU_UID" "$f"
  elif [ "${compose[0]}" = podman-compose ] && podman unshare chown "$XPU_UID:$XPU_UID" "$f" 2>/dev/null; then
    :
  else
    chmod 0644 "$f"
    echo "stack: $f made readable (0644, in the 0700 directory) for the container user $XPU_UID" >&2
  fi
}

tokens() {
  local r made=()
  mkdir -p .secrets && chmod 0700 .secrets
  for r in "${ROLES[@]}"; do
    [ -s ".secrets/$r" ] && continue
    (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >".secrets/$r.tmp")
    mv ".secrets/$r.tmp" ".secrets/$r"
    hand_over ".secrets/$r"
    made+=("$r")
  done
  if [ ${#made[@]} -gt 0 ]; then
    echo "stack: engine tokens created in docker/.secrets/: ${made[*]} (read: dashboards," \
         "act: operators, admin: calibrations, ingest: daemons)"
  fi
  if [ -e .secrets/xpu-token ]; then
    echo "stack: docker/.secrets/xpu-token (the shared token of earlier versions) is no longer used;" \
         "remove it" >&2
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
    tokens
    "${compose[@]}" -f compose.yaml up -d "$@"
    echo "stack: Grafana http://${XPU_BIND:-127.0.0.1}:${XPU_GRAFANA_PORT:-3000} (folder XPUTimer)," \
         "Prometheus :${XPU_PROMETHEUS_PORT:-9090}, Alertmanager :${XPU_ALERTMANAGER_PORT:-9093}," \
         "engine gRPC :${XPU_ENGINE_PORT:-7441}, metrics :${XPU_METRICS_PORT:-9464}"
    ;;
  demo)
    need_images "${XPU_DEMO_IMAGE:-localhost/xputimer-demo:0.1.0}"
    tokens
    "${compose[@]}" -f compose.yaml -f compose.demo.yaml up -d "$@"
    echo "stack: demo job started; its slow_gpu diagnosis appears in 'docker/stack.sh xpu diagnose --job xpu-demo'" \
         "and in Alertmanager (receiver operations) after about a minute"
    ;;
  status)
    "${compose[@]}" -f compose.yaml ps
    runtime exec "$(engine_container)" xpu --token-file /run/secrets/xpu-read status
    ;;
  xpu)
    # The operator's CLI: the admin token (act and read included).
    runtime exec "$(engine_container)" xpu --token-file /run/secrets/xpu-admin "$@"
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
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
