#!/usr/bin/env bash
# Build a minimal Debian + python3 base image locally, for hosts that cannot pull from any
# registry (air-gapped clusters, this project's CI). Usage:
#
#   docker/build-base.sh [IMAGE]        # default: torch-comm-suite-base:<suite>
#
# debootstrap fetches Debian packages from the host's own apt mirror (read from the apt sources,
# or DEBIAN_MIRROR=<uri>), then the tree is imported as an image (`docker import`): no registry.
# Idempotent: an existing image built with the same package list is kept (FORCE=1 rebuilds; one built
# with another list, e.g. before a package was added, is rebuilt). Needs root and debootstrap.
set -euo pipefail
SUITE="${DEBIAN_SUITE:-bookworm}"
IMAGE="${1:-torch-comm-suite-base:$SUITE}"
# make: the image runs `make test-cpu`; iproute2: tc for link shaping; procps: ps/kill for debugging;
# openssh-server/-client: BACKEND=mpi across the compose nodes (hydra's mpiexec starts its proxies over ssh).
PACKAGES="python3,python3-venv,ca-certificates,iproute2,procps,make,openssh-server,openssh-client"
# the image's comment: what it was built from (an existing image with another comment is rebuilt)
COMMENT="debootstrap --variant=minbase $SUITE + $PACKAGES"

if [ "${FORCE:-0}" != 1 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  had=$(docker image inspect -f '{{.Comment}}' "$IMAGE")
  if [ "$had" = "$COMMENT" ]; then
    echo "base image $IMAGE exists (FORCE=1 rebuilds)"
    exit 0
  fi
  echo "base image $IMAGE was built from another package list (${had:-unknown}): rebuilding it"
fi
command -v debootstrap >/dev/null || { echo "error: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "error: debootstrap needs root" >&2; exit 1; }

mirror_from_apt() {
  # deb822 sources (*.sources): the URIs of the first stanza that lists the plain suite
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    uri=$(awk -v s="$SUITE" '
      /^[[:space:]]*$/ { if (u != "" && hit) { found = u; exit } u = ""; hit = 0; next }
      tolower($1) == "uris:" { u = $2 }
      tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == s) hit = 1 }
      END { if (found == "" && hit) found = u; if (found != "") print found }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  # one-line sources: deb [opts] URI SUITE components
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk -v s="$SUITE" '$1 == "deb" { sub(/\[[^]]*\] */, ""); if ($3 == s) { print $2; exit } }'
}
MIRROR="${DEBIAN_MIRROR:-$(mirror_from_apt)}"
if [ -z "$MIRROR" ]; then
  echo "error: no apt mirror for Debian '$SUITE' found in this host's apt sources; set DEBIAN_MIRROR=<uri>" >&2
  exit 1
fi

ROOTFS=$(mktemp -d /tmp/suite-base.XXXXXX)
trap 'rm -rf "$ROOTFS"' EXIT
echo "debootstrap $SUITE (minbase + $PACKAGES) into $ROOTFS"
t0=$(date +%s)
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 || {
  tail -n 30 "$ROOTFS.log" >&2; rm -f "$ROOTFS.log"; exit 1; }
rm -f "$ROOTFS.log"
# Smaller image: no package lists, caches, docs.
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/apt/archives/*.deb \
       "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/*
tar -C "$ROOTFS" -c . | docker import \
  -c 'ENV LANG=C.UTF-8' -c 'CMD ["/bin/bash"]' \
  -m "$COMMENT" - "$IMAGE" >/dev/null
echo "base image $IMAGE built in $(( $(date +%s) - t0 )) s"
