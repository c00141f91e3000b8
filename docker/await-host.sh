#!/bin/sh
# Wait until HOST resolves, at most TIMEOUT_S seconds, then run the rest of the arguments (if any).
#
#   docker/await-host.sh HOST TIMEOUT_S [COMMAND ...]
#
# Node 0's name appears in DNS only once its container (compose) or pod (Kubernetes) exists, and the
# other nodes may start first: the launcher's preflight would fail them on a name that does not
# resolve yet. Exit 3 (a preflight failure) naming the host when it never does.
set -eu
if [ $# -lt 2 ]; then
  echo "usage: docker/await-host.sh HOST TIMEOUT_S [COMMAND ...]" >&2
  exit 2
fi
host=$1 timeout_s=$2
shift 2
waited=0
while ! getent hosts "$host" >/dev/null 2>&1; do
  if [ "$waited" -ge "$timeout_s" ]; then
    echo "MASTER_ADDR $host did not resolve within $timeout_s s (node 0's name)" >&2
    exit 3
  fi
  sleep 1; waited=$((waited + 1))
done
[ $# -eq 0 ] || exec "$@"
