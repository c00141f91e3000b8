#!/usr/bin/env bash
# `make image`: choose the base, fill the wheelhouse where containers cannot reach an index, build.
#
#   IMAGE=torch-comm-suite:latest  VARIANT=|full|slim  BASE_IMAGE=auto|local|<image>  LOCAL_BASE=<name>
#
# VARIANT full: a CUDA build of torch with NCCL (GPU hosts); slim: a CPU-only torch. Unset: full
# where its public base can be had, else slim (what the simulation and CI need, without ~6 GB).
# BASE_IMAGE=auto takes the variant's public base (full: PyTorch CUDA runtime, slim: Debian Python)
# when it is present or can be pulled; where no registry answers, and always with BASE_IMAGE=local,
# it builds the local Debian base (docker/build-base.sh) and fills the variant's wheelhouse
# (docker/wheelhouse.sh: ./wheelhouse with the CPU torch, ./wheelhouse-cuda with the CUDA torch and
# its NVIDIA wheels), so the build needs no network at all. WHEELHOUSE=1 fills it whatever the base.
# The CUDA wheels (~2.6 GB) are not sent as build context: they are served on this host's loopback
# for the build's pip (--network host), which keeps them out of every image layer too.
# BUILD_CPU_SHARES=<n>: the CPU weight of the build's RUN steps (docker build --cpu-shares; Docker's
# default is 1024). CI's background build gives way to the tests running beside it with 2.
set -euo pipefail
cd "$(dirname "$0")/.."
# One build at a time per checkout: a second `make image` (a test's, while CI's setup still builds the
# images in the background) waits for the first, then finds its layers cached. The builds share the
# local base, the wheelhouses and the prune of dangling stages at the end, so they must not overlap.
if command -v flock >/dev/null 2>&1; then
  mkdir -p build
  exec 9>build/image.lock
  if ! flock -n 9; then
    echo "waiting for another image build of this checkout to finish (build/image.lock)"
    flock 9
  fi
fi
IMAGE="${IMAGE:-torch-comm-suite:latest}"
VARIANT="${VARIANT:-}"
BASE_IMAGE="${BASE_IMAGE:-auto}"
LOCAL_BASE="${LOCAL_BASE:-torch-comm-suite-base:bookworm}"
PY="${PIP_PYTHON:-python3}"
public_base() {
  case "$1" in
    full) sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile ;;
    slim) echo "python:3.11-slim-bookworm" ;;
  esac
}
case "$VARIANT" in
  ''|full|slim) ;;
  *) echo "error: VARIANT=$VARIANT: choose full (CUDA torch + NCCL) or slim (CPU torch)" >&2; exit 2 ;;
esac

fill_wheelhouse="${WHEELHOUSE:-0}"
if [ "$BASE_IMAGE" = auto ]; then
  public=$(public_base "${VARIANT:-full}")
  if docker image inspect "$public" >/dev/null 2>&1; then
    BASE_IMAGE="$public"
  elif timeout "${PULL_TIMEOUT_S:-900}" docker pull "$public" >/tmp/suite-pull.$$ 2>&1; then
    BASE_IMAGE="$public"
  else
    echo "cannot pull $public ($(tail -n 1 /tmp/suite-pull.$$)):"
    BASE_IMAGE=local
    # unasked, a local base gives the slim image (VARIANT=full asks for the CUDA one)
    [ -n "$VARIANT" ] || VARIANT=slim
  fi
  rm -f /tmp/suite-pull.$$
fi
VARIANT="${VARIANT:-full}"
if [ "$BASE_IMAGE" = local ]; then
  echo "building from the local Debian base $LOCAL_BASE (torch from the $VARIANT wheelhouse)"
  docker/build-base.sh "$LOCAL_BASE"
  BASE_IMAGE="$LOCAL_BASE"
  fill_wheelhouse=1
fi
# WHEELHOUSE_URL: the CUDA wheelhouse, served for the build (see the top)
url=
if [ "$fill_wheelhouse" = 1 ]; then
  BASE_IMAGE="$BASE_IMAGE" VARIANT="$VARIANT" PIP_PYTHON="$PY" docker/wheelhouse.sh
  if [ "$VARIANT" = full ]; then
    dir=wheelhouse-cuda
    # The port follows the wheelhouse's contents (names and sizes), so the URL -- a build argument,
    # hence part of the layer cache key -- is the same for the same wheels and the venv stage is
    # reused; other wheels give another port and a fresh install. A taken port: the next one.
    sum=$(find "$dir" -maxdepth 1 -name '*.whl' -printf '%s %f\n' | sort | cksum | cut -d' ' -f1)
    port=$(( 30000 + sum % 20000 ))
    log=$(mktemp /tmp/suite-wheels.XXXXXX)
    for _ in 1 2 3 4 5 6 7 8; do
      "$PY" -m http.server --bind 127.0.0.1 --directory "$dir" "$port" >"$log" 2>&1 &
      server=$!
      for _ in $(seq 50); do
        if "$PY" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/', timeout=1)" 2>/dev/null; then
          url="http://127.0.0.1:$port/"; break
        fi
        kill -0 "$server" 2>/dev/null || break
        sleep 0.1
      done
      [ -n "$url" ] && break
      kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true
      port=$(( port + 1 ))
    done
    [ -n "$url" ] || { echo "error: could not serve $dir on 127.0.0.1 ($(tail -n 1 "$log"))" >&2; exit 1; }
    trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -f "$log"' EXIT
  fi
fi

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit-dirty"
fi
torch_version=$(sed -n 's/^torch==//p' requirements.txt)
echo "building $IMAGE (variant $VARIANT) from $BASE_IMAGE"
t0=$(date +%s)
# DOCKER_BUILDKIT=0: the legacy builder works everywhere (this Dockerfile needs nothing newer);
# --force-rm: a failed RUN leaves no container behind.
net=()
[ -z "$url" ] || net=(--network host --build-arg WHEELHOUSE_URL="$url")
[ -z "${BUILD_CPU_SHARES:-}" ] || net+=(--cpu-shares "$BUILD_CPU_SHARES")
DOCKER_BUILDKIT=0 docker build --force-rm -q -t "$IMAGE" "${net[@]}" \
  --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg VARIANT="$VARIANT" \
  --build-arg TORCH_VERSION="$torch_version" --build-arg GIT_COMMIT="$commit" . >/dev/null
# Labels of what is really inside (VERSIONS), not only what was asked for: one more metadata layer.
versions=$(docker run --rm --entrypoint cat "$IMAGE" VERSIONS)
found() { awk -v k="$1" '$1 == k { print $2 }' <<<"$versions"; }
cuda=$(sed -n 's/^torch .*(cuda \(.*\))$/\1/p' <<<"$versions")
printf 'FROM %s\nLABEL suite.torch.build="%s" suite.cuda.version="%s" suite.nccl.version="%s"\n' \
  "$IMAGE" "$(found torch)" "$cuda" "$(found nccl)" |
  DOCKER_BUILDKIT=0 docker build -q -t "$IMAGE" - >/dev/null
# The image this build replaced is now dangling: remove it (only images of this project). The
# venv stage stays as an untagged image, the next build's cache: keep the newest of each variant,
# drop older ones.
docker image prune -f --filter label=org.opencontainers.image.title=torch-comm-suite >/dev/null
old_stages=$(docker images -q --filter dangling=true --filter label=suite.stage=venv \
  --filter label=suite.stage.variant="$VARIANT" | tail -n +2)
[ -z "$old_stages" ] || echo "$old_stages" | xargs docker rmi >/dev/null 2>&1 || true
echo "built $IMAGE (variant $VARIANT) in $(( $(date +%s) - t0 )) s:" \
  "$(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.2f GB", $1/1e9}')"
echo "$versions"
