#!/usr/bin/env bash
# Fill a wheelhouse with every wheel requirements.txt needs, for a Docker build that cannot reach a
# package index (air-gapped hosts, this project's CI). The Dockerfile installs offline from it.
# Usage:
#
#   docker/wheelhouse.sh [PYTHON_VERSION]    # e.g. 3.11 (default: the python of $BASE_IMAGE, else 3.11)
#   VARIANT=full docker/wheelhouse.sh        # the CUDA build of the pinned torch and its NVIDIA wheels
#
# VARIANT=slim (default) fills ./wheelhouse with what pip picks for the pin. pip uses the host's own
# configuration (index, proxy, certificates): for a CPU-only torch, point pip at PyTorch's CPU
# wheel index first (PIP_EXTRA_INDEX_URL / PIP_INDEX_URL), or PyPI's torch wheel brings the CUDA
# libraries (several GB). VARIANT=full fills ./wheelhouse-cuda (kept apart: ~2.6 GB) with the same
# pin minus its +cpu build, i.e. the CUDA build with nvidia-nccl, cudnn, cusparselt, nvshmem, ...,
# and fails unless NCCL's wheel came with it. Idempotent: wheels already there are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
VARIANT="${VARIANT:-slim}"
case "$VARIANT" in
  slim) DEST="${WHEELHOUSE_DIR:-wheelhouse}" ;;
  full) DEST="${WHEELHOUSE_DIR:-wheelhouse-cuda}" ;;
  *) echo "error: VARIANT=$VARIANT: choose full (CUDA torch) or slim (CPU torch)" >&2; exit 2 ;;
esac
PY="${PIP_PYTHON:-python3}"
if [ -n "${1:-}" ]; then
  PYVER="$1"
elif [ -n "${BASE_IMAGE:-}" ] && docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  PYVER=$(docker run --rm --entrypoint python3 "$BASE_IMAGE" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
else
  PYVER=3.11
fi
ABI="cp${PYVER/./}"
mkdir -p "$DEST"
req=requirements.txt
if [ "$VARIANT" = full ]; then
  # torch==X admits X+cpu too (PEP 440 local versions), which sorts above X: exclude it.
  req=$(mktemp /tmp/suite-req.XXXXXX)
  trap 'rm -f "$req"' EXIT
  sed -E 's/^torch==([^ ;#]+)(.*)$/torch==\1,!=\1+cpu\2/' requirements.txt >"$req"
  grep -q '^torch==.*!=.*+cpu' "$req" || { echo "error: requirements.txt pins no torch==<version>" >&2; exit 2; }
fi
echo "wheelhouse: requirements.txt (variant $VARIANT) for CPython $PYVER ($(uname -m)) into $DEST/"
t0=$(date +%s)
# pip does not widen an explicit --platform to older glibc tags: list every one a glibc 2.28 base
# (Debian 12 has 2.36) can load; wheels are tagged manylinux2014 / _2_17 ... _2_28 (NCCL's: _2_18).
arch=$(uname -m)
platforms=()
for minor in $(seq 28 -1 17); do
  platforms+=(--platform "manylinux_2_${minor}_$arch")
done
platforms+=(--platform "manylinux2014_$arch")
# env -u PIP_PYTHON: pip reads PIP_<OPTION> variables, and PIP_PYTHON is its --python option
# (pip would look for that interpreter by name and fail: "Could not locate Python interpreter").
env -u PIP_PYTHON "$PY" -m pip download --quiet --dest "$DEST" --only-binary=:all: \
  "${platforms[@]}" --python-version "$PYVER" --implementation cp --abi "$ABI" \
  -r "$req" 2> >(grep -v "^WARNING: Location '" >&2)
if [ "$VARIANT" = full ] && ! ls "$DEST"/nvidia_nccl_cu*.whl >/dev/null 2>&1; then
  echo "error: $DEST has no nvidia-nccl wheel: the torch pip chose ($(cd "$DEST" && ls torch-*.whl)) is not" \
       "the CUDA build; check pip's index configuration" >&2
  exit 1
fi
echo "wheelhouse: $(find "$DEST" -maxdepth 1 -name '*.whl' | wc -l) wheels, $(du -sh "$DEST" | cut -f1), $(( $(date +%s) - t0 )) s"
