#!/usr/bin/env bash
# `make image`: choose the base, fill the wheelhouse where containers cannot reach an index, build.
#
#   IMAGE=torch-comm-suite:latest  VARIANT=full|slim  BASE_IMAGE=auto|<image>  LOCAL_BASE=<name>
#
# BASE_IMAGE=auto takes the variant's public base (full: PyTorch CUDA runtime, slim: Debian Python)
# when it is present or can be pulled; where no registry answers it builds the local Debian base
# (docker/build-base.sh) and fills ./wheelhouse (docker/wheelhouse.sh), so the build needs no
# network at all. WHEELHOUSE=1 fills the wheelhouse whatever the base.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE="${IMAGE:-torch-comm-suite:latest}"
VARIANT="${VARIANT:-full}"
BASE_IMAGE="${BASE_IMAGE:-auto}"
LOCAL_BASE="${LOCAL_BASE:-torch-comm-suite-base:bookworm}"
case "$VARIANT" in
  full) public=$(sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile) ;;
  slim) public="python:3.11-slim-bookworm" ;;
  *) echo "error: VARIANT=$VARIANT: choose full or slim" >&2; exit 2 ;;
esac

fill_wheelhouse="${WHEELHOUSE:-0}"
if [ "$BASE_IMAGE" = auto ]; then
  if docker image inspect "$public" >/dev/null 2>&1; then
    BASE_IMAGE="$public"
  elif timeout "${PULL_TIMEOUT_S:-900}" docker pull "$public" >/tmp/suite-pull.$$ 2>&1; then
    BASE_IMAGE="$public"
  else
    echo "cannot pull $public ($(tail -n 1 /tmp/suite-pull.$$)):"
    echo "building from the local Debian base $LOCAL_BASE instead (CPU torch from ./wheelhouse)"
    docker/build-base.sh "$LOCAL_BASE"
    BASE_IMAGE="$LOCAL_BASE"
    fill_wheelhouse=1
    # a local Debian base has no CUDA: what it gives is the slim image
    VARIANT=slim
  fi
  rm -f /tmp/suite-pull.$$
fi
if [ "$fill_wheelhouse" = 1 ]; then
  BASE_IMAGE="$BASE_IMAGE" docker/wheelhouse.sh
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
DOCKER_BUILDKIT=0 docker build --force-rm -q -t "$IMAGE" \
  --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg VARIANT="$VARIANT" \
  --build-arg TORCH_VERSION="$torch_version" --build-arg GIT_COMMIT="$commit" . >/dev/null
# The image this build replaced is now dangling: remove it (only images of this project). The
# venv stage stays as an untagged image, the next build's cache: keep the newest, drop older ones.
docker image prune -f --filter label=org.opencontainers.image.title=torch-comm-suite >/dev/null
old_stages=$(docker images -q --filter dangling=true --filter label=suite.stage=venv | tail -n +2)
[ -z "$old_stages" ] || docker rmi $old_stages >/dev/null 2>&1 || true
echo "built $IMAGE in $(( $(date +%s) - t0 )) s: $(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.2f GB", $1/1e9}')"
docker run --rm --entrypoint cat "$IMAGE" VERSIONS
