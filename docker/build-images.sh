#!/usr/bin/env bash
# docker/build-images.sh — builds the XPUTimer images from docker/Dockerfile
# (`make images` runs it from the repository root).
#
#   docker/build-images.sh [--only engine,node,demo] [--local-bases] [--standins] [--no-cache]
#
# Images: $XPU_IMAGE_REPO-{engine,node,demo}:<version> (default
# localhost/xputimer-*), labelled with version, git revision and source.
#
# Builder: XPU_BUILDER=buildah|podman|docker (default: the first found, in
# that order); XPU_BUILD_FLAGS are its global flags (e.g. "--storage-driver
# vfs" on a file system without overlay support). buildah runs the RUN steps
# with BUILDAH_ISOLATION=chroot unless set otherwise: it needs no OCI runtime,
# cgroups or user namespaces, so it builds inside containers and VMs too.
#
# Base images come from docker/base-images.env (pin them by digest there).
# --local-bases (or XPU_LOCAL_BASES=1; XPU_LOCAL_BASES=auto, the default,
# does it when BASE_IMAGE cannot be pulled) builds stand-ins on this host
# instead, for machines that reach no image registry:
#   localhost/xputimer-base:bookworm   Debian 12 made by mmdebstrap from Debian's packages
#   localhost/xputimer-cuda:13.0       that + the host's CUDA headers, nvcc, libcudart
#                                      (CUDA_HOME, default /usr/local/cuda)
# --standins (implied by local bases) also builds Prometheus, Alertmanager and
# PostgreSQL 15 (the engine replicas' database, compose.replicas.yaml) images
# from Debian's packages (docker/standins.Dockerfile) for the compose stack,
# and writes docker/.local-bases/images.env, which docker/stack.sh reads.
# Grafana is not packaged by Debian: it has no stand-in.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
DOCKER=docker
LOCAL=$DOCKER/.local-bases

only=engine,node,demo
local_bases=${XPU_LOCAL_BASES:-auto}
standins=0
nocache=()
while [ $# -gt 0 ]; do
  case $1 in
    --only) only=$2; shift 2 ;;
    --local-bases) local_bases=1; shift ;;
    --registry-bases) local_bases=0; shift ;;
    --standins) standins=1; shift ;;
    --no-cache) nocache=(--no-cache); shift ;;
    -h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-images: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# Base images: the environment wins over base-images.env.
while IFS='=' read -r k v; do
  [[ $k =~ ^[A-Z_]+$ ]] || continue
  [ -n "${!k:-}" ] || export "$k=$v"
done < "$DOCKER/base-images.env"

VERSION=$(sed -n 's/^project(xputimer VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
REVISION=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ "$REVISION" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then REVISION=$REVISION-dirty; fi
SOURCE=$(git remote get-url origin 2>/dev/null || echo "local:$REPO")
IMAGE_REPO=${XPU_IMAGE_REPO:-localhost/xputimer}

builder=${XPU_BUILDER:-}
if [ -z "$builder" ]; then
  for b in buildah podman docker; do
    if command -v "$b" >/dev/null; then builder=$b; break; fi
  done
fi
[ -n "$builder" ] || { echo "build-images: no image builder (install buildah, podman or docker: make image-deps)" >&2; exit 1; }
read -r -a flags <<<"${XPU_BUILD_FLAGS:-}"
export BUILDAH_ISOLATION=${BUILDAH_ISOLATION:-chroot}

build() {  # build DOCKERFILE TARGET TAG [--build-arg ...]
  local file=$1 target=$2 tag=$3
  shift 3
  case $builder in
    buildah) buildah "${flags[@]}" bud --layers "${nocache[@]}" -f "$file" --target "$target" -t "$tag" "$@" . ;;
    podman) podman "${flags[@]}" build --layers "${nocache[@]}" -f "$file" --target "$target" -t "$tag" "$@" . ;;
    docker) DOCKER_BUILDKIT=1 docker build "${flags[@]}" "${nocache[@]}" -f "$file" --target "$target" -t "$tag" "$@" . ;;
    *) echo "build-images: unknown builder $builder" >&2; return 1 ;;
  esac
}
pull() {
  case $builder in
    buildah) timeout 120 buildah "${flags[@]}" pull "$1" ;;
    podman) timeout 120 podman "${flags[@]}" pull "$1" ;;
    docker) timeout 120 docker pull "$1" ;;
  esac
}
image_exists() {
  case $builder in
    buildah) buildah "${flags[@]}" inspect --type image "$1" >/dev/null 2>&1 ;;
    podman) podman "${flags[@]}" image exists "$1" ;;
    docker) docker image inspect "$1" >/dev/null 2>&1 ;;
  esac
}

if [ "$local_bases" = auto ]; then
  if image_exists "$BASE_IMAGE" || pull "$BASE_IMAGE" >/dev/null 2>&1; then
    local_bases=0
  else
    echo "build-images: cannot pull $BASE_IMAGE: building local stand-ins of the base images"
    local_bases=1
  fi
fi

if [ "$local_bases" = 1 ]; then
  standins=1
  mkdir -p "$LOCAL"
  command -v mmdebstrap >/dev/null || { echo "build-images: mmdebstrap is needed for local bases (make image-deps)" >&2; exit 1; }
  if [ ! -s "$LOCAL/rootfs.tar" ] || [ -n "$(find "$LOCAL/rootfs.tar" -mtime +7)" ]; then
    t0=$(date +%s)
    mmdebstrap --variant=minbase --quiet bookworm "$LOCAL/rootfs.new.tar"
    mv "$LOCAL/rootfs.new.tar" "$LOCAL/rootfs.tar"
    echo "build-images: Debian 12 rootfs by mmdebstrap in $(($(date +%s) - t0)) s"
  fi
  printf 'FROM scratch\nADD rootfs.tar /\nCMD ["/bin/bash"]\n' >"$LOCAL/Containerfile.base"
  (cd "$LOCAL" && case $builder in
    buildah) buildah "${flags[@]}" bud --layers -f Containerfile.base -t localhost/xputimer-base:bookworm . ;;
    podman) podman "${flags[@]}" build --layers -f Containerfile.base -t localhost/xputimer-base:bookworm . ;;
    docker) docker build -f Containerfile.base -t localhost/xputimer-base:bookworm . ;;
  esac) >/dev/null
  CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  [ -f "$CUDA_HOME/include/cuda_runtime_api.h" ] && [ -x "$CUDA_HOME/bin/nvcc" ] ||
    { echo "build-images: no CUDA toolkit at CUDA_HOME=$CUDA_HOME for the local CUDA stand-in" >&2; exit 1; }
  nccl=$(ls "$CUDA_HOME/include/nccl.h" /usr/include/nccl.h /usr/local/include/nccl.h 2>/dev/null | head -1 || true)
  [ -n "$nccl" ] || { echo "build-images: no nccl.h found (CUDA_HOME/include, /usr/include, /usr/local/include)" >&2; exit 1; }
  rm -rf "$LOCAL/cuda" && mkdir -p "$LOCAL/cuda/include" "$LOCAL/cuda/bin" "$LOCAL/cuda/lib64"
  cp -rL "$CUDA_HOME/include/." "$LOCAL/cuda/include/"
  [ -f "$LOCAL/cuda/include/nccl.h" ] || cp "$nccl" "$LOCAL/cuda/include/"
  cp -L "$CUDA_HOME/bin/nvcc" "$LOCAL/cuda/bin/"
  cp -P "$CUDA_HOME"/lib64/libcudart.so* "$LOCAL/cuda/lib64/"
  tar -C "$LOCAL/cuda" -cf "$LOCAL/cuda.tar" .
  printf 'FROM localhost/xputimer-base:bookworm\nADD cuda.tar /usr/local/cuda/\n' >"$LOCAL/Containerfile.cuda"
  (cd "$LOCAL" && case $builder in
    buildah) buildah "${flags[@]}" bud --layers -f Containerfile.cuda -t localhost/xputimer-cuda:13.0 . ;;
    podman) podman "${flags[@]}" build --layers -f Containerfile.cuda -t localhost/xputimer-cuda:13.0 . ;;
    docker) docker build -f Containerfile.cuda -t localhost/xputimer-cuda:13.0 . ;;
  esac) >/dev/null
  rm -rf "$LOCAL/cuda"
  BASE_IMAGE=localhost/xputimer-base:bookworm
  CUDA_IMAGE=localhost/xputimer-cuda:13.0
  echo "build-images: local bases $BASE_IMAGE, $CUDA_IMAGE"
fi

args=(--build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "CUDA_IMAGE=$CUDA_IMAGE"
      --build-arg "XPU_VERSION=$VERSION" --build-arg "XPU_REVISION=$REVISION"
      --build-arg "XPU_SOURCE=$SOURCE")
declare -A took
IFS=, read -r -a targets <<<"$only"
for t in "${targets[@]}"; do
  case $t in engine | node | demo) ;; *) echo "build-images: unknown image '$t' (engine, node, demo)" >&2; exit 2 ;; esac
  t0=$(date +%s)
  echo "==> $IMAGE_REPO-$t:$VERSION ($builder, base $BASE_IMAGE)"
  build "$DOCKER/Dockerfile" "$t" "$IMAGE_REPO-$t:$VERSION" "${args[@]}"
  took[$t]=$(($(date +%s) - t0))
done

if [ "$standins" = 1 ]; then
  mkdir -p "$LOCAL"
  for t in prometheus alertmanager postgres; do
    t0=$(date +%s)
    echo "==> localhost/xputimer-$t-debian (Debian's package, stand-in for the upstream image)"
    build "$DOCKER/standins.Dockerfile" "$t" "localhost/xputimer-$t-debian:bookworm" --build-arg "BASE_IMAGE=$BASE_IMAGE"
    took[$t]=$(($(date +%s) - t0))
  done
  cat >"$LOCAL/images.env" <<EOF
# Written by docker/build-images.sh --standins: images built on this host
# (no registry reached). docker/stack.sh reads this after base-images.env.
PROMETHEUS_IMAGE=localhost/xputimer-prometheus-debian:bookworm
ALERTMANAGER_IMAGE=localhost/xputimer-alertmanager-debian:bookworm
POSTGRES_IMAGE=localhost/xputimer-postgres-debian:bookworm
EOF
fi

echo
echo "build-images: done ($builder)"
for t in "${!took[@]}"; do printf '  %-13s %5d s\n' "$t" "${took[$t]}"; done
