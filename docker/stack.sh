#!/usr/bin/env bash
# docker/stack.sh — the one-command stack (docker/compose.yaml).
#
#   docker/stack.sh up [--replicas] [SERVICE...]  engine, Prometheus, Alertmanager, Grafana (`make stack`)
#   docker/stack.sh demo [--replicas]             the same plus a GPU-less job with a slow GPU
#   docker/stack.sh status [--replicas]           containers, engine health, xpu status (of each replica)
#   docker/stack.sh xpu ARGS...                   the xpu CLI inside the engine container
#                                                 (XPU_STACK_ENGINE=xpu-engine-b: replica b's)
#   docker/stack.sh logs [SERVICE]                logs
#   docker/stack.sh down [-v]                     stop and remove (-v: also the data volumes)
#
# --replicas: two engine replicas sharing a PostgreSQL database
# (compose.replicas.yaml; docs/deploy.md, "Engine replicas sharing
# PostgreSQL"), Prometheus scraping both, the demo job's daemon given both.
# Give it to every command of such a stack but down, which stops any layout.
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
# only the ingest token. With --replicas, the database password is made the
# same way: .secrets/db-password (the server's) and .secrets/pgpass (the
# engines' libpq password file, handed to uid 7441). Images: as in
# compose.yaml; images built on this host by `make images --standins`
# (docker/.local-bases/images.env) replace unreachable upstream ones.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/$(basename "${BASH_SOURCE[0]}")
usage() { sed -n '2,31p' "$SELF" | sed 's/^# \{0,1\}//'; }
for a in "$@"; do
  case $a in -h | --help | help) usage; exit 0 ;; esac
done
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
  if [ "$replicas" = 1 ]; then db_password; fi
  if [ -e .secrets/xpu-token ]; then
    echo "stack: docker/.secrets/xpu-token (the shared token of earlier versions) is no longer used;" \
         "remove it" >&2
  fi
}

# The container of an engine service (default xpu-engine; podman-compose
# and docker compose name them differently).
# The replicas' database password: .secrets/db-password for the PostgreSQL
# server (read by its entrypoint as root, on the first start only: a
# data volume made earlier keeps its password) and .secrets/pgpass, the same
# password as the engines' libpq password file (host postgres, database
# xputimer, role xpu; compose.replicas.yaml).
db_password() {
  if [ ! -s .secrets/db-password ]; then
    (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >.secrets/db-password.tmp)
    mv .secrets/db-password.tmp .secrets/db-password
    rm -f .secrets/pgpass
    echo "stack: database password created in docker/.secrets/db-password (PostgreSQL role xpu)"
  fi
  if [ ! -s .secrets/pgpass ]; then
    (umask 077 && printf 'postgres:5432:xputimer:xpu:%s\n' "$(head -n1 .secrets/db-password)" >.secrets/pgpass.tmp)
    mv .secrets/pgpass.tmp .secrets/pgpass
    hand_over .secrets/pgpass
  fi
}

engine_container() {
  local c svc=${1:-xpu-engine}
  for c in "${PROJECT}_${svc}_1" "${PROJECT}-${svc}-1"; do
    if runtime inspect "$c" >/dev/null 2>&1; then echo "$c"; return; fi
  done
  echo "${PROJECT}-${svc}-1"
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
# --replicas anywhere after the command; the rest goes to compose.
replicas=0
args=()
for a in "$@"; do
  case $a in
    --replicas) replicas=1 ;;
    *) args+=("$a") ;;
  esac
done
set -- ${args[@]+"${args[@]}"}
files=(-f compose.yaml)
engines=(xpu-engine)
if [ "$replicas" = 1 ]; then
  files+=(-f compose.replicas.yaml)
  engines+=(xpu-engine-b)
  # The demo job's daemon is given every replica (their advertise addresses).
  export XPU_DEMO_ENGINE=${XPU_DEMO_ENGINE:-${XPU_ENGINE_A_ADVERTISE:-xpu-engine:7441},${XPU_ENGINE_B_ADVERTISE:-xpu-engine-b:7441}}
fi
all_files=(-f compose.yaml -f compose.demo.yaml -f compose.replicas.yaml)
pg_image=${POSTGRES_IMAGE:-docker.io/library/postgres:15-bookworm}

case $cmd in
  up)
    if [ "$replicas" = 1 ]; then need_images "$pg_image"; else need_images; fi
    tokens
    "${compose[@]}" "${files[@]}" up -d "$@"
    echo "stack: Grafana http://${XPU_BIND:-127.0.0.1}:${XPU_GRAFANA_PORT:-3000} (folder XPUTimer)," \
         "Prometheus :${XPU_PROMETHEUS_PORT:-9090}, Alertmanager :${XPU_ALERTMANAGER_PORT:-9093}," \
         "engine gRPC :${XPU_ENGINE_PORT:-7441}, metrics :${XPU_METRICS_PORT:-9464}"
    if [ "$replicas" = 1 ]; then
      echo "stack: replica engine-b gRPC :${XPU_ENGINE_B_PORT:-7442}, metrics :${XPU_METRICS_B_PORT:-9465};" \
           "daemons: --engine HOST:${XPU_ENGINE_PORT:-7441},HOST:${XPU_ENGINE_B_PORT:-7442}" \
           "(and XPU_ENGINE_A_ADVERTISE/XPU_ENGINE_B_ADVERTISE set to those addresses)"
    fi
    ;;
  demo)
    if [ "$replicas" = 1 ]; then
      need_images "${XPU_DEMO_IMAGE:-localhost/xputimer-demo:0.1.0}" "$pg_image"
    else
      need_images "${XPU_DEMO_IMAGE:-localhost/xputimer-demo:0.1.0}"
    fi
    tokens
    "${compose[@]}" "${files[@]}" -f compose.demo.yaml up -d "$@"
    echo "stack: demo job started; its slow_gpu diagnosis appears in 'docker/stack.sh xpu diagnose --job xpu-demo'" \
         "and in Alertmanager (receiver operations) after about a minute"
    ;;
  status)
    "${compose[@]}" "${files[@]}" ps
    for e in "${engines[@]}"; do
      [ ${#engines[@]} -eq 1 ] || echo "== $e"
      runtime exec "$(engine_container "$e")" xpu --token-file /run/secrets/xpu-read status
    done
    ;;
  xpu)
    # The operator's CLI: the admin token (act and read included). A
    # replica answers for the jobs it serves (XPU_STACK_ENGINE picks one).
    runtime exec "$(engine_container "${XPU_STACK_ENGINE:-xpu-engine}")" xpu --token-file /run/secrets/xpu-admin "$@"
    ;;
  logs)
    "${compose[@]}" "${all_files[@]}" logs "$@"
    ;;
  down)
    if [ "${1:-}" = -v ]; then
      "${compose[@]}" "${all_files[@]}" down -v
    else
      "${compose[@]}" "${all_files[@]}" down
    fi
    # podman-compose leaves the project's network behind.
    if [ "${compose[0]}" = podman-compose ] && runtime network exists "${PROJECT}_default" 2>/dev/null; then
      runtime network rm "${PROJECT}_default" >/dev/null
    fi
    ;;
  *)
    echo "stack: unknown command '$cmd'" >&2
    usage >&2
    exit 2
    ;;
esac
