#!/bin/sh
# Container entry point. As root (the compose nodes): apply the link profile LINK_RATE / LINK_DELAY
# to this node's interface (needs NET_ADMIN), start sshd for BACKEND=mpi across nodes (docker/sshd.sh),
# then run the command as the owner of the results directory, so files on the host belong to whoever
# owns ./results. As any other user (plain `docker run`): run the command (a requested link profile
# cannot be applied and is an error).
set -eu
SUITE_DIR=/opt/suite
if [ -n "${LINK_RATE:-}${LINK_RATES:-}${LINK_DELAY:-}" ]; then
  # sourced: it exports the applied profile as LINK_* variables, which the results record per host
  . "$SUITE_DIR/docker/link.sh"
fi
if [ "$(id -u)" = 0 ]; then
  dir="${RESULTS:-/results}"
  if [ "${RUN_AS_ROOT:-0}" = 1 ]; then
    ids=0:0
  elif [ -n "${RUN_AS:-}" ]; then
    ids="$RUN_AS"
  elif [ -d "$dir" ] && [ "$(stat -c %u "$dir")" != 0 ]; then
    ids="$(stat -c %u:%g "$dir")"
  elif [ -d "$dir" ]; then
    ids=0:0   # the host directory belongs to root: only root can write it
  else
    ids="$(id -u suite):$(id -g suite)"
  fi
  uid="${ids%%:*}"; gid="${ids#*:}"
  if [ "${BACKEND:-}" = mpi ] && [ "${NNODES:-1}" -gt 1 ] && [ "${SUITE_CHECK_ONLY:-0}" != 1 ]; then
    "$SUITE_DIR/docker/sshd.sh" "$uid" "$gid"
  fi
  if [ "$uid" != 0 ]; then
    # an arbitrary host uid has no home in the image
    [ "$uid" = "$(id -u suite)" ] && HOME=/home/suite || HOME=/tmp
    export HOME
    exec setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"
  fi
fi
exec "$@"
