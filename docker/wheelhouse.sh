#!/usr/bin/env bash
# Fill ./wheelhouse with every wheel requirements.txt needs, for a Docker build that cannot reach a
# package index (air-gapped hosts, this project's CI). The Dockerfile installs offline from it
# whenever it holds wheels. Usage:
#
#   docker/wheelhouse.sh [PYTHON_VERSION]    # e.g. 3.11 (default: the python of $BASE_IMAGE, else 3.11)
#
# pip uses the host's own configuration (index, proxy, certificates). For a CPU-only torch, point
# pip at PyTorch's CPU wheel index first (PIP_EXTRA_INDEX_URL / PIP_INDEX_URL), or PyPI's torch
# wheel brings the CUDA libraries (several GB). Idempotent: wheels already there are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${WHEELHOUSE_DIR:-wheelhouse}"
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
echo "wheelhouse: requirements.txt for CPython $PYVER ($(uname -m)) into $DEST/"
t0=$(date +%s)
# pip does not widen an explicit --platform to older glibc tags: list the ones a Debian 12 /
# glibc >= 2.28 base can load (wheels are tagged manylinux2014 / _2_17 ... _2_28).
arch=$(uname -m)
platforms=()
for p in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014; do
  platforms+=(--platform "${p}_$arch")
done
"$PY" -m pip download --quiet --dest "$DEST" --only-binary=:all: \
  "${platforms[@]}" --python-version "$PYVER" --implementation cp --abi "$ABI" \
  -r requirements.txt 2> >(grep -v "^WARNING: Location '" >&2)
echo "wheelhouse: $(ls "$DEST"/*.whl | wc -l) wheels, $(du -sh "$DEST" | cut -f1), $(( $(date +%s) - t0 )) s"
